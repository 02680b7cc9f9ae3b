package nodes

import (
	"reflect"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/cluster"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// node is a managed ml.g5.12xlarge (4 GPUs) holding replicas of the given GPU counts.
func node(name string, price float64, since time.Time, reps ...int) NodeState {
	n := NodeState{Name: name, Cluster: "c", Group: "g", InstanceType: "ml.g5.12xlarge", PricePerHour: price,
		Capacity: catalog["ml.g5.12xlarge"], Since: since, Managed: true}
	for i, g := range reps {
		n.Replicas = append(n.Replicas, PlacedReplica{ID: name + "-r" + string(rune('0'+i)), Request: gpus(g)})
		n.Allocated = add(n.Allocated, gpus(g))
	}
	return n
}

func with(n NodeState, mut func(*NodeState)) NodeState { mut(&n); return n }

func TestConsolidate(t *testing.T) {
	now := t0.Add(time.Hour)
	pool := func(mut func(*DisruptionPolicy)) []NodePool {
		p := DefaultNodePool("c")
		p.Name = "p"
		p.Disruption.Budgets = []Budget{{Nodes: "100%"}}
		mut(&p.Disruption)
		return []NodePool{p}
	}
	after30s := pool(func(d *DisruptionPolicy) { d.ConsolidateAfter = 30 * time.Second })
	empty := func(names ...string) []Disruption {
		var out []Disruption
		for _, n := range names {
			out = append(out, Disruption{Cluster: "c", Node: n, NodePool: "p", Reason: ReasonEmpty})
		}
		return out
	}
	cases := []struct {
		name      string
		nodes     []NodeState
		pools     []NodePool
		pending   []PendingReplica
		nominated map[string]string
		want      []Disruption
	}{
		{
			name:  "empty after consolidateAfter, not before",
			nodes: []NodeState{node("old", 1, now.Add(-30*time.Second)), node("young", 1, now.Add(-29*time.Second))},
			pools: after30s,
			want:  empty("old"),
		},
		{
			name:  "empty nodes go together, dearest first, before any underutilized",
			nodes: []NodeState{node("a", 1, t0), node("b", 3, t0), node("busy", 9, t0, 1), node("x", 0, t0, 4)},
			pools: after30s,
			want:  empty("b", "a"),
		},
		{
			name:  "Never",
			nodes: []NodeState{node("a", 1, t0)},
			pools: pool(func(d *DisruptionPolicy) { d.Never = true }),
		},
		{
			name: "unmanaged, launching, deleting and nominated nodes untouched",
			nodes: []NodeState{
				with(node("static", 1, t0), func(n *NodeState) { n.Managed = false }),
				with(node("launching", 1, t0), func(n *NodeState) { n.Launching = true }),
				with(node("deleting", 1, t0), func(n *NodeState) { n.Deleting = true }),
				node("nominated", 1, t0),
			},
			pools:     after30s,
			nominated: map[string]string{"r": "nominated"},
		},
		{
			name:  "underutilized with room elsewhere: one node, the dearest",
			nodes: []NodeState{node("cheap", 1, t0, 1), node("dear", 5, t0, 1, 1), node("host", 0, t0, 1)},
			pools: after30s,
			want: []Disruption{{Cluster: "c", Node: "dear", NodePool: "p", Reason: ReasonUnderutilized,
				Moves: map[string]string{"dear-r0": "cheap", "dear-r1": "cheap"}}},
		},
		{
			name:  "underutilized without room elsewhere",
			nodes: []NodeState{node("a", 1, t0, 3), node("b", 1, t0, 3)},
			pools: after30s,
		},
		{
			name: "moves never target launching or deleting nodes",
			nodes: []NodeState{node("a", 2, t0, 2),
				with(node("l", 1, t0), func(n *NodeState) { n.Launching = true; n.Managed = false }),
				with(node("d", 1, t0), func(n *NodeState) { n.Deleting = true; n.Managed = false }),
				node("full", 1, t0, 4)},
			pools: after30s,
		},
		{
			// A 1-GPU node per replica, one just emptied by a scale-in and
			// one deleting whose replica is draining: the free GPU is the
			// draining replica's, so no full node may count on it.
			name: "the replicas of deleting nodes take their room first",
			nodes: []NodeState{
				with(node("draining", 1, t0, 1), func(n *NodeState) { n.Deleting = true }),
				with(node("emptied", 1, now), func(n *NodeState) { n.Capacity = gpus(1) }),
				with(node("full", 1, t0, 1), func(n *NodeState) { n.Capacity = gpus(1) }),
			},
			pools: after30s,
		},
		{
			name: "room left after the deleting nodes' replicas is used",
			nodes: []NodeState{
				with(node("draining", 1, t0, 1), func(n *NodeState) { n.Deleting = true }),
				with(node("emptied", 1, now), func(n *NodeState) { n.Capacity = gpus(2) }),
				with(node("full", 1, t0, 1), func(n *NodeState) { n.Capacity = gpus(1) }),
			},
			pools: after30s,
			want: []Disruption{{Cluster: "c", Node: "full", NodePool: "p", Reason: ReasonUnderutilized,
				Moves: map[string]string{"full-r0": "emptied"}}},
		},
		{
			// Nodes launched for a spike are ready and empty for a moment
			// before their replicas land: their room is the pending
			// replicas', and the node that serves stays.
			name: "room nominated for pending replicas is not room for moves",
			nodes: []NodeState{
				with(node("serving", 1, t0, 1), func(n *NodeState) { n.Capacity = gpus(1) }),
				with(node("new1", 1, now), func(n *NodeState) { n.Capacity = gpus(1) }),
				with(node("new2", 1, now), func(n *NodeState) { n.Capacity = gpus(1) }),
			},
			pools:     after30s,
			pending:   []PendingReplica{pend("p1", gpus(1)), pend("p2", gpus(1))},
			nominated: map[string]string{"p1": "new1", "p2": "new2"},
		},
		{
			name:  "WhenEmpty leaves underutilized nodes",
			nodes: []NodeState{node("a", 1, t0, 1), node("b", 1, t0, 1)},
			pools: pool(func(d *DisruptionPolicy) { d.ConsolidationPolicy = WhenEmpty }),
		},
		{
			name: "10% of 11 nodes rounds up to 2",
			nodes: []NodeState{node("e1", 1, t0), node("e2", 1, t0), node("e3", 1, t0), node("f4", 0, t0, 4), node("f5", 0, t0, 4),
				node("f6", 0, t0, 4), node("f7", 0, t0, 4), node("f8", 0, t0, 4), node("f9", 0, t0, 4), node("fa", 0, t0, 4), node("fb", 0, t0, 4)},
			pools: pool(func(d *DisruptionPolicy) { d.Budgets = []Budget{{Nodes: "10%"}} }),
			want:  empty("e1", "e2"),
		},
		{
			name: "deleting and launching nodes use up the budget",
			nodes: []NodeState{node("e1", 1, t0), node("e2", 1, t0),
				with(node("d", 1, t0), func(n *NodeState) { n.Deleting = true }),
				with(node("l", 1, t0), func(n *NodeState) { n.Launching = true })},
			pools: pool(func(d *DisruptionPolicy) { d.Budgets = []Budget{{Nodes: "3"}} }),
			want:  empty("e1"),
		},
		{
			name:  "the smallest applicable budget wins; a budget for another reason does not apply",
			nodes: []NodeState{node("e1", 1, t0), node("e2", 1, t0), node("e3", 1, t0)},
			pools: pool(func(d *DisruptionPolicy) {
				d.Budgets = []Budget{{Nodes: "100%"}, {Nodes: "2", Reasons: []string{ReasonEmpty}}, {Nodes: "0", Reasons: []string{ReasonUnderutilized}}}
			}),
			want: empty("e1", "e2"),
		},
		{
			name:  "a zero budget for Underutilized blocks it",
			nodes: []NodeState{node("a", 1, t0, 1), node("b", 1, t0, 1)},
			pools: pool(func(d *DisruptionPolicy) { d.Budgets = []Budget{{Nodes: "0", Reasons: []string{ReasonUnderutilized}}} }),
		},
		{
			// The replica asked for ml.g5.12xlarge; a roomy node of another
			// type (unmanaged, e.g. a MIG group's) is no place to move it.
			name: "moves keep the replica's instance type",
			nodes: []NodeState{
				with(node("a", 1, t0, 1), func(n *NodeState) { n.Replicas[0].InstanceType = "ml.g5.12xlarge" }),
				with(node("other", 1, t0), func(n *NodeState) { n.InstanceType = "ml.p4d.24xlarge"; n.Managed = false }),
			},
			pools: after30s,
		},
		{
			name: "a replica on a MIG slice stays where no slice of its profile is free",
			nodes: []NodeState{
				with(node("a", 1, t0), func(n *NodeState) {
					n.Replicas = []PlacedReplica{{ID: "slice", Request: cluster.Resources{MIGProfile: "1g.10gb"}}}
				}),
				with(node("b", 1, t0), func(n *NodeState) {
					n.Managed = false
					n.Slices = []cluster.Slice{{GPU: 0, Profile: "3g.40gb"}, {GPU: 1, Profile: "1g.10gb", ReplicaID: "other"}}
				}),
			},
			pools: after30s,
		},
		{
			// As the placer packs slices: the GPU whose slices are most held
			// fills first, so the move goes to c, not to the first node.
			name: "a replica on a MIG slice moves to a free slice of its profile, as the placer would put it",
			nodes: []NodeState{
				with(node("a", 1, t0), func(n *NodeState) {
					n.Replicas = []PlacedReplica{{ID: "slice", Request: cluster.Resources{MIGProfile: "1g.10gb"}}}
				}),
				with(node("b", 1, t0), func(n *NodeState) {
					n.Managed = false
					n.Slices = []cluster.Slice{{GPU: 0, Profile: "1g.10gb"}, {GPU: 0, Profile: "1g.10gb"}}
				}),
				with(node("c", 1, t0), func(n *NodeState) {
					n.Managed = false
					n.Slices = []cluster.Slice{{GPU: 0, Profile: "1g.10gb", ReplicaID: "held"}, {GPU: 0, Profile: "1g.10gb"}}
				}),
			},
			pools: after30s,
			want: []Disruption{{Cluster: "c", Node: "a", NodePool: "p", Reason: ReasonUnderutilized,
				Moves: map[string]string{"slice": "c"}}},
		},
		{
			name:  "default pool for a cluster no pool names; other clusters are not move targets",
			nodes: []NodeState{node("a", 1, t0, 1), with(node("b", 1, t0), func(n *NodeState) { n.Cluster = "d"; n.Managed = false })},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Consolidate(now, tc.nodes, tc.pools, tc.pending, tc.nominated)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	cases := []struct {
		budgets           []Budget
		reason            string
		total, disrupting int
		want              int
	}{
		{nil, ReasonEmpty, 11, 0, 2},
		{nil, ReasonEmpty, 1, 0, 1},
		{[]Budget{{Nodes: "0%"}}, ReasonEmpty, 50, 0, 0},
		{[]Budget{{Nodes: "5"}}, ReasonEmpty, 50, 2, 3},
		{[]Budget{{Nodes: "5"}}, ReasonEmpty, 50, 7, -2},
		{[]Budget{{Nodes: "1", Reasons: []string{ReasonUnderutilized}}}, ReasonEmpty, 4, 1, 3},
		{[]Budget{{Nodes: "bogus"}}, ReasonEmpty, 4, 0, 0},
	}
	for _, tc := range cases {
		if got := allowed(tc.budgets, tc.reason, tc.total, tc.disrupting); got != tc.want {
			t.Errorf("allowed(%+v, %s, %d, %d) = %d, want %d", tc.budgets, tc.reason, tc.total, tc.disrupting, got, tc.want)
		}
	}
}
