package hyperpod

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/fleet"
)

const migField = "KubernetesConfig.Labels." + MIGConfigLabel

func migGroup(name, typ string, n int, layout string) InstanceGroupSpec {
	g := group(name, typ, n)
	g.MIGLayout = layout
	return g
}

// TestMIGLayoutValidation: a layout the group's GPU cannot hold is a
// FieldError on the group's mig.config label naming the group, the GPU
// and the profile at fault.
func TestMIGLayoutValidation(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}, p5: {"a": 4}}, nil)
	tests := []struct {
		name  string
		group InstanceGroupSpec
		want  []string // in the message; nil: valid
	}{
		{"whole GPUs", migGroup("g", p5, 0, ""), nil},
		{"all-1g.10gb on H100", migGroup("g", p5, 0, "all-1g.10gb"), nil},
		{"balanced on H100", migGroup("g", p5, 0, "all-balanced"), nil},
		{"mixed on H100", migGroup("g", p5, 0, "mixed-1-3g.40gb-1-4g.40gb"), nil},
		{"disabled on A10G", migGroup("g", g5, 0, "all-disabled"), nil},
		{"MIG on A10G", migGroup("gpu-a", g5, 0, "all-1g.10gb"), []string{"gpu-a", "a10g", "MIG"}},
		{"A100-40 profile on H100", migGroup("gpu-b", p5, 0, "all-1g.5gb"), []string{"gpu-b", "h100", "1g.5gb"}},
		{"over the compute budget", migGroup("gpu-c", p5, 0, "mixed-1-4g.40gb-1-7g.80gb"), []string{"gpu-c", "h100", "7g.80gb"}},
		{"too many of a profile", migGroup("gpu-d", p5, 0, "mixed-3-3g.40gb"), []string{"gpu-d", "h100", "3g.40gb"}},
		{"unknown layout", migGroup("gpu-e", p5, 0, "most-balanced"), []string{"gpu-e", "most-balanced"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "c" + string(rune('a'+i))
			_, err := e.svc.CreateCluster(ctx, spec(name, group("first", g5, 0), tt.group))
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			fe := asField(t, err)
			if fe.Field != "InstanceGroups[1]."+migField {
				t.Fatalf("field %q, want InstanceGroups[1].%s", fe.Field, migField)
			}
			for _, w := range tt.want {
				if !strings.Contains(fe.Message, w) {
					t.Errorf("message %q does not name %q", fe.Message, w)
				}
			}
		})
	}
	// UpdateCluster checks the layout the same way.
	e.step(time.Second)
	_, err := e.svc.UpdateCluster(ctx, "ca", ClusterUpdate{Groups: []InstanceGroupSpec{migGroup("g", "", 0, "all-1g.18gb")}})
	if fe := asField(t, err); fe.Field != "InstanceGroups[0]."+migField || !strings.Contains(fe.Message, "1g.18gb") {
		t.Fatalf("update: %v", err)
	}
}

// TestMIGGroupNodesPartitioned: a node of an all-1g.10gb p5 group joins
// the pool with its 8 GPUs split 7 ways, and keeps them over a restart.
func TestMIGGroupNodesPartitioned(t *testing.T) {
	e := newEnv(t, fleet.Capacity{p5: {"a": 2}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", migGroup("mig", p5, 1, "all-1g.10gb"))); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	check := func(when string) {
		t.Helper()
		pn := e.poolNodes("c1")
		if len(pn) != 1 {
			t.Fatalf("%s: pool has %d nodes", when, len(pn))
		}
		if len(pn[0].Partitions) != 8 || len(pn[0].Slices) != 56 {
			t.Fatalf("%s: %d partitions, %d slices; want 8 and 56", when, len(pn[0].Partitions), len(pn[0].Slices))
		}
		for _, s := range pn[0].Slices {
			if s.Profile != "1g.10gb" {
				t.Fatalf("%s: slice %+v", when, s)
			}
		}
	}
	check("after launch")
	if ns := e.nodes("c1"); ns[0].MIGLayout != "all-1g.10gb" {
		t.Fatalf("node record layout %q", ns[0].MIGLayout)
	}
	if _, err := e.pool.Place("r1", "c1", p5, cluster.Resources{MIGProfile: "1g.10gb"}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP capstan_cluster_mig_slices MIG slices of the clusters' partitioned GPUs, by profile and whether a replica holds them.
# TYPE capstan_cluster_mig_slices gauge
capstan_cluster_mig_slices{cluster="c1",instance_type="ml.p5.48xlarge",profile="1g.10gb",state="free"} 55
capstan_cluster_mig_slices{cluster="c1",instance_type="ml.p5.48xlarge",profile="1g.10gb",state="used"} 1
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "capstan_cluster_mig_slices"); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	check("after restart")
}

// TestMIGLayoutChangeReplacesNodes: changing a group's layout replaces
// its nodes one at a time, each draining through the leave path, and the
// cluster is InService only once every node has the new layout.
func TestMIGLayoutChangeReplacesNodes(t *testing.T) {
	e := newEnv(t, fleet.Capacity{p5: {"a": 4}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", migGroup("w", p5, 2, ""))); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	old := e.nodes("c1")
	busy, err := e.pool.Place("r1", "c1", p5, cluster.Resources{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{migGroup("w", "", 2, "all-1g.10gb")}}); err != nil {
		t.Fatal(err)
	}
	// One old node leaves at a time and one new node launches for it.
	seen := map[string]bool{}
	cordoned := false
	for step := 0; step < 20 && e.cluster("c1").Status != StatusInService; step++ {
		ns := e.nodes("c1")
		leaving := countStatus(ns, NodeShuttingDown)
		if leaving > 1 {
			t.Fatalf("step %d: %d nodes leaving at once", step, leaving)
		}
		for _, n := range ns {
			seen[n.ID] = true
			if n.Status == NodeShuttingDown && n.Name() == busy {
				// The busy node is cordoned while its replica moves.
				for _, pn := range e.poolNodes("c1") {
					if pn.Name == busy {
						cordoned = pn.Cordoned
					}
				}
			}
		}
		e.step(30 * time.Second)
	}
	if st := e.cluster("c1").Status; st != StatusInService || !cordoned {
		t.Fatalf("cluster %s after the replacement; busy node cordoned while leaving: %v", st, cordoned)
	}
	ns := e.nodes("c1")
	if len(ns) != 2 || countStatus(ns, NodeRunning) != 2 {
		t.Fatalf("nodes %+v", ns)
	}
	for _, n := range ns {
		if n.MIGLayout != "all-1g.10gb" || n.ID == old[0].ID || n.ID == old[1].ID || !strings.Contains(n.Reason, "replaces") {
			t.Fatalf("node %+v", n)
		}
	}
	for _, pn := range e.poolNodes("c1") {
		if len(pn.Slices) != 56 {
			t.Fatalf("pool node %s has %d slices", pn.Name, len(pn.Slices))
		}
	}
	if len(seen) != 4 {
		t.Fatalf("saw %d nodes, want the 2 old and 2 new", len(seen))
	}
	if h := heldOf(e.held("c1"), p5); h != 2 {
		t.Fatalf("held %d, want 2", h)
	}
	// Back to whole GPUs by all-disabled: "" and all-disabled are alike,
	// so a second switch to all-disabled after "" would replace nothing.
	if _, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{migGroup("w", "", 2, "all-disabled")}}); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		e.step(30 * time.Second)
	}
	for _, pn := range e.poolNodes("c1") {
		if len(pn.Partitions) != 0 {
			t.Fatalf("pool node %s still partitioned", pn.Name)
		}
	}
	before := e.nodes("c1")
	if _, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{migGroup("w", "", 2, "")}}); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	after := e.nodes("c1")
	if len(after) != 2 || after[0].ID != before[0].ID || after[1].ID != before[1].ID || e.cluster("c1").Status != StatusInService {
		t.Fatalf("switch to \"\" replaced nodes: %+v → %+v", before, after)
	}
}
