package nodes

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

func TestProvision(t *testing.T) {
	od, spot, rsv := hyperpod.CapacityOnDemand, hyperpod.CapacitySpot, hyperpod.CapacityReserved
	poolWith := func(mut func(*NodePool)) []NodePool {
		p := DefaultNodePool("c")
		p.Name = "p"
		mut(&p)
		return []NodePool{p}
	}
	type want struct {
		launches      []Launch
		nominated     map[string]string
		unschedulable []string // "id: reason substring"
	}
	cases := []struct {
		name      string
		pending   []PendingReplica
		nodes     []NodeState
		offerings []hyperpod.Offering
		pools     []NodePool
		want      want
	}{
		{
			name:    "cheapest type that fits",
			pending: []PendingReplica{pend("r1", gpus(1))},
			offerings: []hyperpod.Offering{
				offer("big", "ml.g5.12xlarge", od, 5.67, 10),
				offer("small", "ml.g5.xlarge", od, 1.0, 10),
				offer("cpu", "ml.m5.xlarge", od, 0.2, 10), // cheaper, but has no GPU
			},
			want: want{launches: []Launch{{Cluster: "c", Group: "small", InstanceType: "ml.g5.xlarge", CapacityType: od, Count: 1,
				NodePool: "default", Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool default)"}}},
		},
		{
			name:    "reserved over spot over on-demand, whatever the price",
			pending: []PendingReplica{pend("r1", gpus(1))},
			offerings: []hyperpod.Offering{
				offer("od", "ml.g5.xlarge", od, 0.5, 10),
				offer("spot", "ml.g5.xlarge", spot, 0.3, 10),
				offer("plan", "ml.g5.12xlarge", rsv, 9, 1),
			},
			want: want{launches: []Launch{{Cluster: "c", Group: "plan", InstanceType: "ml.g5.12xlarge", CapacityType: rsv, Count: 1,
				NodePool: "default", Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool default)"}}},
		},
		{
			name:    "spot before on-demand",
			pending: []PendingReplica{pend("r1", gpus(1))},
			offerings: []hyperpod.Offering{
				offer("od", "ml.g5.xlarge", od, 0.5, 10),
				offer("spot", "ml.g5.12xlarge", spot, 2, 10),
			},
			want: want{launches: []Launch{{Cluster: "c", Group: "spot", InstanceType: "ml.g5.12xlarge", CapacityType: spot, Count: 1,
				NodePool: "default", Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool default)"}}},
		},
		{
			name:    "Available respected: the rest falls back to the next offering",
			pending: []PendingReplica{pend("r1", gpus(4)), pend("r2", gpus(4)), pend("r3", gpus(4))},
			offerings: []hyperpod.Offering{
				offer("plan", "ml.g5.12xlarge", rsv, 0, 1),
				offer("od", "ml.g5.12xlarge", od, 5.67, 1),
			},
			want: want{
				launches: []Launch{
					{Cluster: "c", Group: "plan", InstanceType: "ml.g5.12xlarge", CapacityType: rsv, Count: 1, NodePool: "default",
						Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool default)"},
					{Cluster: "c", Group: "od", InstanceType: "ml.g5.12xlarge", CapacityType: od, Count: 1, NodePool: "default",
						Replicas: []string{"r2"}, Reason: "provisioner: 1 pending replicas (nodepool default)"},
				},
				unschedulable: []string{"r3: no capacity available"},
			},
		},
		{
			name:      "pool GPU limit counts managed nodes",
			pending:   []PendingReplica{pend("r1", gpus(4)), pend("r2", gpus(4))},
			nodes:     []NodeState{{Name: "n1", Cluster: "c", Group: "g", InstanceType: "ml.g5.12xlarge", Capacity: catalog["ml.g5.12xlarge"], Allocated: gpus(4), Managed: true}},
			offerings: []hyperpod.Offering{offer("g", "ml.g5.12xlarge", od, 5.67, 10)},
			pools:     poolWith(func(p *NodePool) { p.Limits.GPUs = 8 }),
			want: want{
				launches: []Launch{{Cluster: "c", Group: "g", InstanceType: "ml.g5.12xlarge", CapacityType: od, Count: 1, NodePool: "p",
					Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool p)"}},
				unschedulable: []string{"r2: NodePool limits reached"},
			},
		},
		{
			name:      "node limit",
			pending:   []PendingReplica{pend("r1", gpus(1)), pend("r2", gpus(1))},
			offerings: []hyperpod.Offering{offer("g", "ml.g5.xlarge", od, 1, 10)},
			pools:     poolWith(func(p *NodePool) { p.Limits.Nodes = 1 }),
			want: want{
				launches: []Launch{{Cluster: "c", Group: "g", InstanceType: "ml.g5.xlarge", CapacityType: od, Count: 1, NodePool: "p",
					Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool p)"}},
				unschedulable: []string{"r2: NodePool limits reached"},
			},
		},
		{
			name:    "existing and launching room first, planned nodes next",
			pending: []PendingReplica{pend("r1", gpus(1)), pend("r2", gpus(2)), pend("r3", gpus(2)), pend("r4", gpus(2)), pend("r5", gpus(2))},
			nodes: []NodeState{
				{Name: "full", Cluster: "c", InstanceType: "ml.g5.12xlarge", Capacity: catalog["ml.g5.12xlarge"], Allocated: gpus(4)},
				{Name: "half", Cluster: "c", InstanceType: "ml.g5.12xlarge", Capacity: catalog["ml.g5.12xlarge"], Allocated: gpus(2)},
				{Name: "new", Cluster: "c", InstanceType: "ml.g5.xlarge", Capacity: catalog["ml.g5.xlarge"], Launching: true},
				{Name: "gone", Cluster: "c", InstanceType: "ml.g5.12xlarge", Capacity: catalog["ml.g5.12xlarge"], Deleting: true},
				{Name: "other", Cluster: "d", InstanceType: "ml.g5.12xlarge", Capacity: catalog["ml.g5.12xlarge"]},
			},
			offerings: []hyperpod.Offering{offer("g", "ml.g5.12xlarge", od, 5.67, 10)},
			want: want{
				nominated: map[string]string{"r2": "half", "r1": "new"},
				// r3 opens a node, r4 joins it (fewest replicas with room), r5 opens another.
				launches: []Launch{{Cluster: "c", Group: "g", InstanceType: "ml.g5.12xlarge", CapacityType: od, Count: 2, NodePool: "default",
					Replicas: []string{"r3", "r4", "r5"}, Reason: "provisioner: 3 pending replicas (nodepool default)"}},
			},
		},
		{
			name:      "replica's allowed types and pool requirements",
			pending:   []PendingReplica{pend("r1", gpus(1), "ml.g5.12xlarge")},
			offerings: []hyperpod.Offering{offer("s", "ml.g5.xlarge", od, 1, 10), offer("b", "ml.g5.12xlarge", spot, 3, 10), offer("b2", "ml.g5.12xlarge", od, 2, 10)},
			pools: poolWith(func(p *NodePool) {
				p.Requirements = []Requirement{{Key: KeyCapacityType, Operator: OpIn, Values: []string{"on-demand"}}}
			}),
			want: want{launches: []Launch{{Cluster: "c", Group: "b2", InstanceType: "ml.g5.12xlarge", CapacityType: od, Count: 1, NodePool: "p",
				Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool p)"}}},
		},
		{
			name:      "heavier pool wins even when dearer; groups from the node class",
			pending:   []PendingReplica{pend("r1", gpus(1))},
			offerings: []hyperpod.Offering{offer("cheap", "ml.g5.xlarge", od, 1, 10), offer("dear", "ml.g5.xlarge", od, 2, 10)},
			pools: []NodePool{
				{Name: "a", Cluster: "c", Weight: 1},
				{Name: "b", Cluster: "c", Weight: 10, InstanceGroups: []string{"dear"}},
			},
			want: want{launches: []Launch{{Cluster: "c", Group: "dear", InstanceType: "ml.g5.xlarge", CapacityType: od, Count: 1, NodePool: "b",
				Replicas: []string{"r1"}, Reason: "provisioner: 1 pending replicas (nodepool b)"}}},
		},
		{
			name:      "unfit replicas reported",
			pending:   []PendingReplica{pend("huge", gpus(16)), pend("bad", cluster.Resources{GPUs: -1}), pend("typed", gpus(1), "ml.p5.48xlarge")},
			offerings: []hyperpod.Offering{offer("g", "ml.p4d.24xlarge", od, 30, 10)},
			want: want{unschedulable: []string{
				"huge: no allowed instance type fits",
				"typed: no NodePool of cluster c allows",
				"bad: invalid request",
			}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Provision(tc.pending, tc.nodes, tc.offerings, tc.pools, capacityOf)
			if !reflect.DeepEqual(got.Launches, tc.want.launches) {
				t.Errorf("launches:\n got %+v\nwant %+v", got.Launches, tc.want.launches)
			}
			wantNom := tc.want.nominated
			if wantNom == nil {
				wantNom = map[string]string{}
			}
			if !reflect.DeepEqual(got.Nominated, wantNom) {
				t.Errorf("nominated: got %v, want %v", got.Nominated, wantNom)
			}
			if len(got.Unschedulable) != len(tc.want.unschedulable) {
				t.Fatalf("unschedulable: got %+v, want %v", got.Unschedulable, tc.want.unschedulable)
			}
			for i, u := range got.Unschedulable {
				id, sub, _ := strings.Cut(tc.want.unschedulable[i], ": ")
				if u.ID != id || !strings.Contains(u.Reason, sub) {
					t.Errorf("unschedulable[%d] = %+v, want %s with %q", i, u, id, sub)
				}
			}
		})
	}
}

func TestProvisionPacksPlannedNodes(t *testing.T) {
	var pending []PendingReplica
	for i := range 6 {
		pending = append(pending, pend(fmt.Sprintf("r%d", i), gpus(2)))
	}
	got := Provision(pending, nil, []hyperpod.Offering{offer("g", "ml.p4d.24xlarge", hyperpod.CapacityOnDemand, 30, 10)}, nil, capacityOf)
	if len(got.Launches) != 1 || got.Launches[0].Count != 2 || len(got.Launches[0].Replicas) != 6 {
		t.Fatalf("want one launch of 2 nodes for 6 replicas of 2 GPUs, got %+v", got.Launches)
	}
}

func BenchmarkProvision1000x20(b *testing.B) {
	caps := map[string]cluster.Resources{}
	var offerings []hyperpod.Offering
	for i := range 20 {
		typ := fmt.Sprintf("type-%02d", i)
		caps[typ] = cluster.Resources{GPUs: 1 << (i % 4), MilliCPU: int64(4000 * (i + 1)), MemoryBytes: int64(i+1) * 32 * gib}
		ct := []hyperpod.CapacityType{hyperpod.CapacityOnDemand, hyperpod.CapacitySpot, hyperpod.CapacityReserved}[i%3]
		offerings = append(offerings, hyperpod.Offering{Cluster: "c", Group: "g-" + typ, InstanceType: typ, CapacityType: ct,
			PricePerHour: float64(i + 1), Available: 100})
	}
	capOf := func(t string) (cluster.Resources, bool) { r, ok := caps[t]; return r, ok }
	pending := make([]PendingReplica, 1000)
	for i := range pending {
		pending[i] = PendingReplica{ID: fmt.Sprintf("r%04d", i), Cluster: "c",
			Request: cluster.Resources{GPUs: 1 + i%4, MilliCPU: int64(500 * (1 + i%7)), MemoryBytes: int64(1+i%5) * 4 * gib}}
	}
	nodes := make([]NodeState, 100)
	for i := range nodes {
		nodes[i] = NodeState{Name: fmt.Sprintf("n%03d", i), Cluster: "c", InstanceType: "type-03", Capacity: caps["type-03"], Allocated: caps["type-03"]}
	}
	b.ReportAllocs()
	for b.Loop() {
		Provision(pending, nodes, offerings, nil, capOf)
	}
}

// TestProvisionMIG: a replica that asks for a MIG slice goes on a node with
// a free slice of its profile, else on a new node of a group whose layout
// has the profile; CPU and memory room alone is not enough.
func TestProvisionMIG(t *testing.T) {
	od := hyperpod.CapacityOnDemand
	slice := func(profile string) cluster.Resources {
		return cluster.Resources{MIGProfile: profile, MilliCPU: 1000, MemoryBytes: 4 * gib}
	}
	all := func(n int, profiles ...string) [][]string {
		out := make([][]string, n)
		for i := range out {
			out[i] = profiles
		}
		return out
	}
	sevenSmall := []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}
	whole := offer("whole", "ml.p4d.24xlarge", od, 30, 10)
	partitioned := offer("mig", "ml.p4d.24xlarge", od, 30, 10)
	partitioned.Partitions = all(8, sevenSmall...)
	big := offer("mig-big", "ml.p4d.24xlarge", od, 20, 10) // cheaper, but only 7g slices
	big.Partitions = all(8, "7g.80gb")

	cases := []struct {
		name      string
		pending   []PendingReplica
		nodes     []NodeState
		offerings []hyperpod.Offering
		launches  map[string]int // group → nodes
		nominated map[string]string
		reason    string // of the first unschedulable replica
	}{
		{
			name:      "a whole-GPU node with room is no slice: a node of the partitioned group",
			pending:   []PendingReplica{pend("r1", slice("1g.10gb"))},
			nodes:     []NodeState{{Name: "n-whole", Cluster: "c", InstanceType: "ml.p4d.24xlarge", Capacity: catalog["ml.p4d.24xlarge"]}},
			offerings: []hyperpod.Offering{whole, big, partitioned},
			launches:  map[string]int{"mig": 1},
		},
		{
			name:    "a free slice on a node: nominated, nothing launched",
			pending: []PendingReplica{pend("r1", slice("1g.10gb"))},
			nodes: []NodeState{{Name: "n-mig", Cluster: "c", InstanceType: "ml.p4d.24xlarge",
				Capacity: cluster.Resources{MilliCPU: 96000, MemoryBytes: 1152 * gib}, Slices: []cluster.Slice{{GPU: 0, Profile: "1g.10gb"}, {GPU: 0, Profile: "1g.10gb", ReplicaID: "held"}}}},
			offerings: []hyperpod.Offering{partitioned},
			nominated: map[string]string{"r1": "n-mig"},
		},
		{
			name:    "one free slice, two replicas: the second gets a new node",
			pending: []PendingReplica{pend("r1", slice("1g.10gb")), pend("r2", slice("1g.10gb"))},
			nodes: []NodeState{{Name: "n-mig", Cluster: "c", InstanceType: "ml.p4d.24xlarge",
				Capacity: cluster.Resources{MilliCPU: 96000, MemoryBytes: 1152 * gib}, Slices: []cluster.Slice{{GPU: 0, Profile: "1g.10gb"}, {GPU: 0, Profile: "1g.10gb", ReplicaID: "held"}}}},
			offerings: []hyperpod.Offering{partitioned},
			nominated: map[string]string{"r1": "n-mig"},
			launches:  map[string]int{"mig": 1},
		},
		{
			name: "56 slices of a node's layout hold 56 replicas; the 57th needs another node",
			pending: func() []PendingReplica {
				var out []PendingReplica
				for i := range 57 {
					out = append(out, pend(fmt.Sprintf("r%02d", i), cluster.Resources{MIGProfile: "1g.10gb", MilliCPU: 100, MemoryBytes: gib}))
				}
				return out
			}(),
			offerings: []hyperpod.Offering{partitioned},
			launches:  map[string]int{"mig": 2},
		},
		{
			name:      "no group's layout has the profile",
			pending:   []PendingReplica{pend("r1", slice("3g.40gb"))},
			offerings: []hyperpod.Offering{whole, partitioned},
			reason:    "no allowed instance group's MIG layout has a 3g.40gb slice",
		},
		{
			name:      "a partitioned group takes whole-GPU replicas on its whole GPUs only",
			pending:   []PendingReplica{pend("r1", gpus(1))},
			offerings: []hyperpod.Offering{partitioned, whole},
			launches:  map[string]int{"whole": 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Provision(tc.pending, tc.nodes, tc.offerings, nil, capacityOf)
			launches := map[string]int{}
			for _, l := range got.Launches {
				launches[l.Group] += l.Count
			}
			if len(launches) == 0 {
				launches = nil
			}
			if !reflect.DeepEqual(launches, tc.launches) {
				t.Errorf("launches %v, want %v", launches, tc.launches)
			}
			nominated := got.Nominated
			if len(nominated) == 0 {
				nominated = nil
			}
			if !reflect.DeepEqual(nominated, tc.nominated) {
				t.Errorf("nominated %v, want %v", nominated, tc.nominated)
			}
			switch {
			case tc.reason == "" && len(got.Unschedulable) > 0:
				t.Errorf("unschedulable %+v", got.Unschedulable)
			case tc.reason != "" && (len(got.Unschedulable) == 0 || !strings.Contains(got.Unschedulable[0].Reason, tc.reason)):
				t.Errorf("unschedulable %+v, want %q", got.Unschedulable, tc.reason)
			}
		})
	}
}
