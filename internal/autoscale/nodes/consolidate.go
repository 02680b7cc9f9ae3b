package nodes

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/cluster"
)

// Consolidate decides, in Karpenter's order, which managed nodes to remove.
// First every empty node whose pool consolidates and whose Since is at least
// consolidateAfter ago, in parallel up to each pool's Empty budget; if there
// are none, one under-used node (pool policy WhenEmptyOrUnderutilized) whose
// replicas all fit on other ready, non-deleting nodes of its cluster, most
// expensive and then least utilised first. Launching and deleting nodes, and
// nodes nominated for pending replicas (Plan.Nominated's values), are never
// disrupted, and the room a nominated node keeps for its pending replicas
// is no room for moves.
func Consolidate(now time.Time, nodes []NodeState, pools []NodePool, pending []PendingReplica, nominated map[string]string) []Disruption {
	ps := newPoolSet(pools)
	busy := map[string]bool{}
	for _, n := range nominated {
		busy[n] = true
	}
	type poolStat struct{ total, disrupting int }
	stats := map[*NodePool]*poolStat{}
	var cands []int
	owner := make([]*NodePool, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if !n.Managed {
			continue
		}
		p := ps.poolOf(n)
		if p == nil {
			continue
		}
		owner[i] = p
		st := stats[p]
		if st == nil {
			st = &poolStat{}
			stats[p] = st
		}
		st.total++
		// Karpenter subtracts deleting and not-ready nodes from the budget.
		if n.Deleting || n.Launching {
			st.disrupting++
			continue
		}
		d := p.Disruption
		if d.Never || busy[n.Name] || now.Sub(n.Since) < d.ConsolidateAfter {
			continue
		}
		cands = append(cands, i)
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		x, y := &nodes[a], &nodes[b]
		if c := cmp.Compare(y.PricePerHour, x.PricePerHour); c != 0 {
			return c
		}
		if c := cmp.Compare(utilisation(x), utilisation(y)); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})

	var out []Disruption
	for _, i := range cands {
		n := &nodes[i]
		if len(n.Replicas) > 0 {
			continue
		}
		p, st := owner[i], stats[owner[i]]
		if allowed(p.Disruption.Budgets, ReasonEmpty, st.total, st.disrupting) <= 0 {
			continue
		}
		st.disrupting++
		out = append(out, Disruption{Cluster: n.Cluster, Node: n.Name, NodePool: p.Name, Reason: ReasonEmpty})
	}
	if len(out) > 0 {
		return out
	}

	for _, i := range cands {
		n := &nodes[i]
		p, st := owner[i], stats[owner[i]]
		if len(n.Replicas) == 0 || p.Disruption.ConsolidationPolicy == WhenEmpty ||
			allowed(p.Disruption.Budgets, ReasonUnderutilized, st.total, st.disrupting) <= 0 {
			continue
		}
		if moves := simulate(nodes, i, pending, nominated); moves != nil {
			return []Disruption{{Cluster: n.Cluster, Node: n.Name, NodePool: p.Name, Reason: ReasonUnderutilized, Moves: moves}}
		}
	}
	return nil
}

func utilisation(n *NodeState) float64 {
	switch {
	case n.Capacity.GPUs > 0:
		return float64(n.Allocated.GPUs) / float64(n.Capacity.GPUs)
	case n.Capacity.MilliCPU > 0:
		return float64(n.Allocated.MilliCPU) / float64(n.Capacity.MilliCPU)
	}
	return 0
}

// simulate asks cluster.Simulate, the placer's own rules, where node i's
// replicas would go, largest first, on the other ready, non-deleting nodes
// of its cluster; nil if one fits nowhere. As Karpenter does, the room
// others are about to take is taken first: pending replicas' on the nodes
// nominated for them (a node that just became ready is empty for a moment
// before its replicas land), then the replicas still on deleting nodes
// (without this, every pass while a drain ran saw the same free GPU, and
// one scale-in disrupted four full nodes whose replicas then waited for new
// ones). A replica on a MIG slice moves to a free slice of its profile.
func simulate(nodes []NodeState, i int, pending []PendingReplica, nominated map[string]string) map[string]string {
	from := &nodes[i]
	var targets []cluster.Node
	var leaving []PlacedReplica
	for j := range nodes {
		n := &nodes[j]
		if j == i || n.Cluster != from.Cluster || n.Launching {
			continue
		}
		if n.Deleting {
			leaving = append(leaving, n.Replicas...)
			continue
		}
		targets = append(targets, cluster.Node{NodeSpec: cluster.NodeSpec{Name: n.Name, Cluster: n.Cluster, InstanceType: n.InstanceType,
			Capacity: n.Capacity}, Allocated: n.Allocated, Slices: n.Slices})
	}
	slices.SortFunc(targets, func(a, b cluster.Node) int { return cmp.Compare(a.Name, b.Name) })
	var reqs []cluster.Request
	for _, r := range pending {
		if to, ok := nominated[r.ID]; ok {
			reqs = append(reqs, cluster.Request{ID: r.ID, Cluster: from.Cluster, Node: to, Resources: r.Request})
		}
	}
	// One leaving replica that fits nowhere waits for a new node; it takes
	// no room here.
	for _, r := range largestFirst(leaving) {
		reqs = append(reqs, cluster.Request{ID: r.ID, Cluster: from.Cluster, InstanceType: r.InstanceType, Resources: r.Request})
	}
	first := len(reqs)
	reps := largestFirst(from.Replicas)
	for _, r := range reps {
		reqs = append(reqs, cluster.Request{ID: r.ID, Cluster: from.Cluster, InstanceType: r.InstanceType, Resources: r.Request})
	}
	to := cluster.Simulate(targets, reqs)
	moves := make(map[string]string, len(reps))
	for k, r := range reps {
		if to[first+k] == "" {
			return nil
		}
		moves[r.ID] = to[first+k]
	}
	return moves
}

// largestFirst is a copy of reps sorted by GPUs, then CPU, then memory,
// largest first (first-fit decreasing).
func largestFirst(reps []PlacedReplica) []PlacedReplica {
	out := slices.Clone(reps)
	slices.SortStableFunc(out, func(a, b PlacedReplica) int {
		if c := cmp.Compare(b.Request.GPUs, a.Request.GPUs); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Request.MilliCPU, a.Request.MilliCPU); c != 0 {
			return c
		}
		return cmp.Compare(b.Request.MemoryBytes, a.Request.MemoryBytes)
	})
	return out
}

// allowed is how many more of a pool's nodes may be disrupted for reason:
// the minimum over the budgets that apply (no reasons, or reason listed) of
// roundup(total × pct) or the absolute number, less those disrupting. No
// budgets means Karpenter's default, 10 %. A budget that does not parse
// (ParseNodePool rejects them) allows nothing.
func allowed(budgets []Budget, reason string, total, disrupting int) int {
	if len(budgets) == 0 {
		budgets = []Budget{{Nodes: "10%"}}
	}
	best := -1
	for _, b := range budgets {
		if len(b.Reasons) > 0 && !contains(b.Reasons, reason) {
			continue
		}
		n, ok := budgetNodes(b.Nodes, total)
		if !ok {
			n = 0
		}
		if best < 0 || n < best {
			best = n
		}
	}
	if best < 0 {
		return total - disrupting // no budget applies to this reason
	}
	return best - disrupting
}

// budgetNodes resolves a budget's nodes value against the pool's size.
func budgetNodes(s string, total int) (int, bool) {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.Atoi(pct)
		if err != nil || v < 0 || v > 100 {
			return 0, false
		}
		return (total*v + 99) / 100, true
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
