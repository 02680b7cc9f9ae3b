package nodes

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

// CapacityFunc says what a node of an instance type offers; the catalog
// stays outside the package.
type CapacityFunc func(instanceType string) (cluster.Resources, bool)

// Unschedulable is a pending replica Provision found no room for.
type Unschedulable struct {
	ID, Reason string
}

// Plan is what Provision decided.
type Plan struct {
	Launches []Launch
	// Nominated maps replicas that fit on an existing or launching node to
	// that node; Consolidate must leave those nodes alone.
	Nominated     map[string]string
	Unschedulable []Unschedulable
}

// capacityRank orders capacity types by Karpenter's preference.
func capacityRank(ct hyperpod.CapacityType) int {
	switch ct {
	case hyperpod.CapacityReserved:
		return 0
	case hyperpod.CapacitySpot:
		return 1
	}
	return 2
}

// effectivePrice is what choosing the offering costs: reserved capacity is
// pre-paid, so it is free (Karpenter models it so).
func effectivePrice(o *hyperpod.Offering) float64 {
	if o.CapacityType == hyperpod.CapacityReserved {
		return 0
	}
	return o.PricePerHour
}

// slot is room on an existing, launching or planned node.
type slot struct {
	name    string
	typ     string
	free    cluster.Resources
	mig     map[string]int // free MIG slices by profile
	pods    int
	planned *plannedNode
}

// fits reports whether req fits in the slot: a MIG request needs a free
// slice of its profile besides CPU and memory.
func (s *slot) fits(req *cluster.Resources) bool {
	f := &s.free
	return req.GPUs <= f.GPUs && req.MilliCPU <= f.MilliCPU && req.MemoryBytes <= f.MemoryBytes &&
		(req.MIGProfile == "" || s.mig[req.MIGProfile] > 0)
}

// take books req in the slot.
func (s *slot) take(req cluster.Resources) {
	s.free = sub(s.free, req)
	if req.MIGProfile != "" {
		s.mig[req.MIGProfile]--
	}
}

type plannedNode struct {
	offering *hyperpod.Offering
	pool     *NodePool
	replicas []string
}

type usage struct {
	nodes int
	res   cluster.Resources
}

// Provision decides, as Karpenter's provisioner does, which nodes to launch
// for the pending replicas. Replicas are taken largest first (GPUs, CPU,
// memory); each goes on the first existing or launching node of its cluster
// with room and an allowed type, else on the node planned in this batch with
// the fewest replicas that has room, else on a new planned node: the first
// pool of its cluster (by weight) with an offering it allows whose type fits
// the replica (for a MIG slice: whose group's layout has a slice of that
// profile), picking reserved over spot over on-demand, then the cheapest,
// within the offering's Available count and the pool's Limits (its managed
// nodes, launching ones and planned ones included). A cluster no pool names
// gets DefaultNodePool.
func Provision(pending []PendingReplica, nodes []NodeState, offerings []hyperpod.Offering, pools []NodePool, capacity CapacityFunc) Plan {
	ps := newPoolSet(pools)
	plan := Plan{Nominated: map[string]string{}}

	order := make([]int, len(pending))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := pending[a].Request, pending[b].Request
		if c := cmp.Compare(y.GPUs, x.GPUs); c != 0 {
			return c
		}
		if c := cmp.Compare(y.MilliCPU, x.MilliCPU); c != 0 {
			return c
		}
		if c := cmp.Compare(y.MemoryBytes, x.MemoryBytes); c != 0 {
			return c
		}
		return cmp.Compare(pending[a].ID, pending[b].ID)
	})

	existing := map[string][]slot{}
	used := map[*NodePool]*usage{}
	for i := range nodes {
		n := &nodes[i]
		if n.Deleting {
			continue
		}
		existing[n.Cluster] = append(existing[n.Cluster], slot{name: n.Name, typ: n.InstanceType, free: sub(n.Capacity, n.Allocated),
			mig: n.freeSlices()})
		if n.Managed {
			if p := ps.poolOf(n); p != nil {
				u := used[p]
				if u == nil {
					u = &usage{}
					used[p] = u
				}
				u.nodes++
				u.res = add(u.res, n.Capacity)
			}
		}
	}

	caps := map[string]cluster.Resources{}
	capOf := func(t string) (cluster.Resources, bool) {
		if r, ok := caps[t]; ok {
			return r, true
		}
		r, ok := capacity(t)
		if ok && !negative(r) {
			caps[t] = r
			return r, true
		}
		return cluster.Resources{}, false
	}
	byCluster := map[string][]*hyperpod.Offering{}
	for i := range offerings {
		o := &offerings[i]
		byCluster[o.Cluster] = append(byCluster[o.Cluster], o)
	}
	launched := map[*hyperpod.Offering]int{}
	planned := map[string][]*slot{}
	var plannedOrder []*plannedNode

	for _, i := range order {
		r := &pending[i]
		if negative(r.Request) {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{r.ID, "invalid request: negative resources"})
			continue
		}
		typeOK := func(t string) bool { return len(r.InstanceTypes) == 0 || contains(r.InstanceTypes, t) }
		if s := firstFit(existing[r.Cluster], r.Request, typeOK); s != nil {
			s.take(r.Request)
			plan.Nominated[r.ID] = s.name
			continue
		}
		if s := fewestFit(planned[r.Cluster], r.Request, typeOK); s != nil {
			s.take(r.Request)
			s.pods++
			s.planned.replicas = append(s.planned.replicas, r.ID)
			continue
		}
		o, p, why := choose(r, ps.of(r.Cluster), byCluster[r.Cluster], launched, used, capOf, typeOK)
		if o == nil {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{r.ID, why})
			continue
		}
		c, _ := capOf(o.InstanceType)
		launched[o]++
		u := used[p]
		if u == nil {
			u = &usage{}
			used[p] = u
		}
		u.nodes++
		u.res = add(u.res, c)
		pn := &plannedNode{offering: o, pool: p, replicas: []string{r.ID}}
		plannedOrder = append(plannedOrder, pn)
		s := &slot{typ: o.InstanceType, pods: 1, planned: pn}
		s.free, s.mig = room(c, o)
		s.take(r.Request)
		planned[r.Cluster] = append(planned[r.Cluster], s)
	}

	type key struct {
		o *hyperpod.Offering
		p *NodePool
	}
	at := map[key]int{}
	for _, pn := range plannedOrder {
		k := key{pn.offering, pn.pool}
		i, ok := at[k]
		if !ok {
			i = len(plan.Launches)
			at[k] = i
			o := pn.offering
			plan.Launches = append(plan.Launches, Launch{Cluster: o.Cluster, Group: o.Group, InstanceType: o.InstanceType,
				CapacityType: o.CapacityType, NodePool: pn.pool.Name})
		}
		l := &plan.Launches[i]
		l.Count++
		l.Replicas = append(l.Replicas, pn.replicas...)
	}
	for i := range plan.Launches {
		l := &plan.Launches[i]
		l.Reason = fmt.Sprintf("provisioner: %d pending replicas (nodepool %s)", len(l.Replicas), l.NodePool)
	}
	return plan
}

// room is what a new node of offering o, of capacity c, has free: its
// whole GPUs and its MIG slices.
func room(c cluster.Resources, o *hyperpod.Offering) (cluster.Resources, map[string]int) {
	partitioned, slices := MIGRoom(o.Partitions)
	c.GPUs -= partitioned
	return c, slices
}

func firstFit(slots []slot, req cluster.Resources, typeOK func(string) bool) *slot {
	for i := range slots {
		if slots[i].fits(&req) && typeOK(slots[i].typ) {
			return &slots[i]
		}
	}
	return nil
}

// fewestFit is the planned node with the fewest replicas that has room,
// as Karpenter tries its in-flight NodeClaims.
func fewestFit(slots []*slot, req cluster.Resources, typeOK func(string) bool) *slot {
	var best *slot
	for _, s := range slots {
		if (best == nil || s.pods < best.pods) && s.fits(&req) && typeOK(s.typ) {
			best = s
		}
	}
	return best
}

// choose picks the offering of a new node for r, and says why when none fits.
func choose(r *PendingReplica, pools []*NodePool, offerings []*hyperpod.Offering, launched map[*hyperpod.Offering]int,
	used map[*NodePool]*usage, capOf CapacityFunc, typeOK func(string) bool) (*hyperpod.Offering, *NodePool, string) {
	allowed, big, avail := false, false, false
	for _, p := range pools {
		var best *hyperpod.Offering
		for _, o := range offerings {
			if !typeOK(o.InstanceType) || !p.allows(o.Group, o.InstanceType, o.CapacityType) {
				continue
			}
			allowed = true
			c, ok := capOf(o.InstanceType)
			if !ok {
				continue
			}
			if free, slices := room(c, o); !(&slot{free: free, mig: slices}).fits(&r.Request) {
				continue
			}
			big = true
			if o.Available-launched[o] <= 0 {
				continue
			}
			avail = true
			if !withinLimits(p, used[p], c) {
				continue
			}
			if best == nil || better(o, best) {
				best = o
			}
		}
		if best != nil {
			return best, p, ""
		}
	}
	switch {
	case !allowed:
		return nil, nil, fmt.Sprintf("no NodePool of cluster %s allows an offering of the replica's instance types", r.Cluster)
	case !big && r.Request.MIGProfile != "":
		return nil, nil, fmt.Sprintf("no allowed instance group's MIG layout has a %s slice (its %s label) with %dm CPU and %d bytes memory",
			r.Request.MIGProfile, hyperpod.MIGConfigLabel, r.Request.MilliCPU, r.Request.MemoryBytes)
	case !big:
		return nil, nil, fmt.Sprintf("no allowed instance type fits the request (%d GPUs, %dm CPU, %d bytes memory)",
			r.Request.GPUs, r.Request.MilliCPU, r.Request.MemoryBytes)
	case !avail:
		return nil, nil, "no capacity available for the instance types that fit"
	}
	return nil, nil, "NodePool limits reached"
}

func better(a, b *hyperpod.Offering) bool {
	if ra, rb := capacityRank(a.CapacityType), capacityRank(b.CapacityType); ra != rb {
		return ra < rb
	}
	if pa, pb := effectivePrice(a), effectivePrice(b); pa != pb {
		return pa < pb
	}
	if a.InstanceType != b.InstanceType {
		return a.InstanceType < b.InstanceType
	}
	return a.Group < b.Group
}

func withinLimits(p *NodePool, u *usage, c cluster.Resources) bool {
	var cur usage
	if u != nil {
		cur = *u
	}
	l := p.Limits
	return (l.Nodes <= 0 || cur.nodes+1 <= l.Nodes) &&
		(l.GPUs <= 0 || cur.res.GPUs+c.GPUs <= l.GPUs) &&
		(l.MilliCPU <= 0 || cur.res.MilliCPU+c.MilliCPU <= l.MilliCPU) &&
		(l.MemoryBytes <= 0 || cur.res.MemoryBytes+c.MemoryBytes <= l.MemoryBytes)
}
