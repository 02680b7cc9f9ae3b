package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
)

const gi = int64(1) << 30

func TestNew(t *testing.T) {
	cat := catalog.Default()
	tests := []struct {
		name    string
		groups  []InstanceGroup
		nodes   []string
		wantErr string
	}{
		{name: "two groups", groups: []InstanceGroup{{"g5", "ml.g5.24xlarge", 2}, {"p5", "ml.p5.48xlarge", 1}},
			nodes: []string{"g5-0", "g5-1", "p5-0"}},
		{name: "empty group", groups: []InstanceGroup{{"g5", "ml.g5.24xlarge", 0}}},
		{name: "unknown type", groups: []InstanceGroup{{"x", "ml.nope.large", 1}}, wantErr: "cluster.instanceGroups[0].instanceType"},
		{name: "bad name", groups: []InstanceGroup{{"P5!", "ml.p5.48xlarge", 1}}, wantErr: "cluster.instanceGroups[0].name"},
		{name: "duplicate name", groups: []InstanceGroup{{"a", "ml.p5.48xlarge", 1}, {"a", "ml.g5.24xlarge", 1}}, wantErr: `duplicate group "a"`},
		{name: "negative count", groups: []InstanceGroup{{"a", "ml.p5.48xlarge", -1}}, wantErr: "cluster.instanceGroups[0].count"},
		{name: "too many nodes", groups: []InstanceGroup{{"a", "ml.p5.48xlarge", MaxNodesPerGroup + 1}}, wantErr: "count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(cat, tc.groups)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: err %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range c.Nodes() {
				names = append(names, n.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.nodes, ",") {
				t.Fatalf("nodes %v, want %v", names, tc.nodes)
			}
		})
	}
}

func TestNodeCapacityFromCatalog(t *testing.T) {
	cat := catalog.Default()
	for _, g := range DefaultInstanceGroups() {
		t.Run(g.InstanceType, func(t *testing.T) {
			c, err := New(cat, []InstanceGroup{g})
			if err != nil {
				t.Fatal(err)
			}
			it, _ := cat.InstanceType(g.InstanceType)
			nodes := c.Nodes()
			if len(nodes) != 2 {
				t.Fatalf("%d nodes, want 2", len(nodes))
			}
			want := Resources{GPUs: it.GPUCount, MilliCPU: int64(it.VCPU) * 1000, MemoryBytes: int64(it.MemoryGiB) * gi}
			if nodes[0].Capacity != want || nodes[0].GPU != it.GPU || nodes[0].InstanceType != it.Name {
				t.Fatalf("node %+v, want capacity %+v gpu %s", nodes[0], want, it.GPU)
			}
		})
	}
}

func TestDefaultInstanceGroupsCoverExamples(t *testing.T) {
	// Every instance type used in the reference examples.
	want := []string{"ml.g5.24xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.p5en.48xlarge"}
	c, err := New(catalog.Default(), DefaultInstanceGroups())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, it := range c.InstanceTypes(DefaultName) {
		have[it] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("default cluster lacks %s", w)
		}
	}
}

type step struct {
	id, instanceType string
	req              Resources
	release          bool
	wantNode         string // "" with wantErr
	wantErr          string
}

func TestPlace(t *testing.T) {
	groups := []InstanceGroup{{"g5", "ml.g5.24xlarge", 2}, {"p4", "ml.p4d.24xlarge", 1}}
	gpu := func(n int) Resources { return Resources{GPUs: n} }
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "replicas share the most allocated node", steps: []step{
			{id: "a", instanceType: "ml.g5.24xlarge", req: gpu(1), wantNode: "g5-0"},
			{id: "b", instanceType: "ml.g5.24xlarge", req: gpu(1), wantNode: "g5-0"},
			{id: "c", instanceType: "ml.g5.24xlarge", req: gpu(2), wantNode: "g5-0"},
			{id: "d", instanceType: "ml.g5.24xlarge", req: gpu(1), wantNode: "g5-1"},
		}},
		{name: "a large request goes where it fits", steps: []step{
			{id: "a", instanceType: "ml.g5.24xlarge", req: gpu(3), wantNode: "g5-0"},
			{id: "b", instanceType: "ml.g5.24xlarge", req: gpu(4), wantNode: "g5-1"},
			{id: "c", instanceType: "ml.g5.24xlarge", req: gpu(1), wantNode: "g5-0"},
		}},
		{name: "placing twice is idempotent", steps: []step{
			{id: "a", instanceType: "ml.g5.24xlarge", req: gpu(4), wantNode: "g5-0"},
			{id: "a", instanceType: "ml.g5.24xlarge", req: gpu(4), wantNode: "g5-0"},
			{id: "b", instanceType: "ml.g5.24xlarge", req: gpu(4), wantNode: "g5-1"},
		}},
		{name: "gpus exhausted", steps: []step{
			{id: "a", instanceType: "ml.g5.24xlarge", req: gpu(3), wantNode: "g5-0"},
			{id: "b", instanceType: "ml.g5.24xlarge", req: gpu(2), wantNode: "g5-1"},
			{id: "c", instanceType: "ml.g5.24xlarge", req: gpu(4),
				wantErr: "none of the 2 ml.g5.24xlarge nodes has room: 2 lack gpu (want 4, most free 2)"},
		}},
		{name: "room appears after release", steps: []step{
			{id: "a", instanceType: "ml.p4d.24xlarge", req: gpu(8), wantNode: "p4-0"},
			{id: "b", instanceType: "ml.p4d.24xlarge", req: gpu(8), wantErr: "none of the 1 ml.p4d.24xlarge nodes has room: 1 lack gpu (want 8, most free 0)"},
			{id: "a", release: true},
			{id: "b", instanceType: "ml.p4d.24xlarge", req: gpu(8), wantNode: "p4-0"},
		}},
		{name: "cpu and memory count", steps: []step{
			{id: "a", instanceType: "ml.g5.24xlarge", req: Resources{MilliCPU: 90000, MemoryBytes: 10 * gi}, wantNode: "g5-0"},
			{id: "b", instanceType: "ml.g5.24xlarge", req: Resources{MilliCPU: 6000, MemoryBytes: 380 * gi}, wantNode: "g5-1"},
			{id: "c", instanceType: "ml.g5.24xlarge", req: Resources{MilliCPU: 6500, MemoryBytes: 30 * gi},
				wantErr: "none of the 2 ml.g5.24xlarge nodes has room: 1 lack cpu (want 6500, most free 90000), 1 lack memory (want 32212254720, most free 401579442176)"},
		}},
		{name: "unknown instance type", steps: []step{
			{id: "a", instanceType: "ml.p5.48xlarge", req: gpu(1), wantErr: "no node of type ml.p5.48xlarge in the cluster"},
		}},
		{name: "more than a node holds", steps: []step{
			{id: "a", instanceType: "ml.g5.24xlarge", req: gpu(8), wantErr: "none of the 2 ml.g5.24xlarge nodes has room: 2 lack gpu (want 8, most free 4)"},
		}},
		{name: "release of unknown id is a no-op", steps: []step{
			{id: "zz", release: true},
			{id: "a", instanceType: "ml.g5.24xlarge", req: gpu(4), wantNode: "g5-0"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(catalog.Default(), groups)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				if s.release {
					c.Release(s.id)
					continue
				}
				node, err := c.Place(s.id, DefaultName, s.instanceType, s.req)
				if s.wantErr != "" {
					if !IsUnschedulable(err) || err.Error() != s.wantErr {
						t.Fatalf("step %d: Place(%s) = %q, %v; want unschedulable %q", i, s.id, node, err, s.wantErr)
					}
					continue
				}
				if err != nil || node != s.wantNode {
					t.Fatalf("step %d: Place(%s) = %q, %v; want %q", i, s.id, node, err, s.wantNode)
				}
			}
			checkAccounting(t, c)
		})
	}
}

// checkAccounting verifies that every node's Allocated never exceeds its
// capacity and that NodeOf agrees with Nodes.
func checkAccounting(t *testing.T, c *Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		if n.Allocated.GPUs > n.Capacity.GPUs || n.Allocated.MilliCPU > n.Capacity.MilliCPU || n.Allocated.MemoryBytes > n.Capacity.MemoryBytes {
			t.Errorf("node %s over-allocated: %+v of %+v", n.Name, n.Allocated, n.Capacity)
		}
		for _, id := range n.Replicas {
			if got, ok := c.NodeOf(id); !ok || got.Name != n.Name {
				t.Errorf("NodeOf(%s) = %s, %v; want %s", id, got.Name, ok, n.Name)
			}
		}
	}
}

func TestReleaseRestoresCapacity(t *testing.T) {
	c, err := New(catalog.Default(), []InstanceGroup{{"g5", "ml.g5.24xlarge", 1}})
	if err != nil {
		t.Fatal(err)
	}
	req := Resources{GPUs: 1, MilliCPU: 6000, MemoryBytes: 30 * gi}
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := c.Place(id, DefaultName, "ml.g5.24xlarge", req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Place("e", DefaultName, "ml.g5.24xlarge", req); !IsUnschedulable(err) {
		t.Fatalf("fifth replica placed: %v", err)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		c.Release(id)
	}
	n := c.Nodes()[0]
	if n.Allocated != (Resources{}) || len(n.Replicas) != 0 {
		t.Fatalf("after release: %+v", n)
	}
}

func TestPlaceRejectsNegative(t *testing.T) {
	c, _ := New(catalog.Default(), DefaultInstanceGroups())
	if _, err := c.Place("a", DefaultName, "ml.g5.24xlarge", Resources{GPUs: -1}); err == nil || IsUnschedulable(err) {
		t.Fatalf("negative request: %v", err)
	}
}

func BenchmarkPlaceRelease(b *testing.B) {
	c, _ := New(catalog.Default(), []InstanceGroup{{"g5", "ml.g5.24xlarge", 256}})
	req := Resources{GPUs: 1, MilliCPU: 6000, MemoryBytes: 30 * gi}
	ids := make([]string, 512)
	for i := range ids {
		ids[i] = "r" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := ids[i%len(ids)]
		if _, err := c.Place(id, DefaultName, "ml.g5.24xlarge", req); err != nil {
			b.Fatal(err)
		}
		if i%len(ids) == len(ids)-1 {
			for _, id := range ids {
				c.Release(id)
			}
		}
	}
}

func TestCouldFit(t *testing.T) {
	c, err := New(catalog.Default(), []InstanceGroup{{"g5", "ml.g5.24xlarge", 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Place("a", DefaultName, "ml.g5.24xlarge", Resources{GPUs: 4}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		instanceType string
		req          Resources
		want         bool
	}{
		{"fits once freed", "ml.g5.24xlarge", Resources{GPUs: 4}, true},
		{"larger than any node", "ml.g5.24xlarge", Resources{GPUs: 5}, false},
		{"no such group", "ml.p5.48xlarge", Resources{GPUs: 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.CouldFit(DefaultName, tc.instanceType, tc.req); got != tc.want {
				t.Fatalf("CouldFit = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWatch: every watcher hears a node join, and a release that frees
// room while a request is pending; Changes hears a release only through
// NotifyFreed.
func TestWatch(t *testing.T) {
	c := NewPool(clock.NewFake(time.Unix(0, 0)))
	a, b := c.Watch(), c.Watch()
	heard := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if err := c.AddNode(NodeSpec{Name: "n1", Cluster: "c", InstanceType: "t", Capacity: Resources{GPUs: 1, MilliCPU: 1000, MemoryBytes: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	if !heard(a) || !heard(b) || !heard(c.Changes()) {
		t.Fatal("a watcher missed a node joining")
	}
	if _, err := c.Place("r1", "c", "t", Resources{GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	c.Release("r1")
	if heard(a) {
		t.Error("a release with nothing pending was signalled")
	}
	if _, err := c.Place("r1", "c", "t", Resources{GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	c.SetPending(Pending{ReplicaID: "r2", Cluster: "c", Request: Resources{GPUs: 1}})
	c.Release("r1")
	if !heard(a) || !heard(b) {
		t.Error("a release that frees room for a pending request was not signalled")
	}
	if heard(c.Changes()) {
		t.Error("Changes heard a plain release")
	}
	c.NotifyFreed()
	if !heard(c.Changes()) || !heard(a) {
		t.Error("NotifyFreed with a pending request did not signal Changes and the watchers")
	}
}
