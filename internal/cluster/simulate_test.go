package cluster

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// TestSimulateAgreesWithPlace: from a snapshot of a pool with replicas on
// it, Simulate names for each request the node Place then puts it on, with
// whole GPUs, MIG slices, CPU-only requests and requests that fit nowhere;
// the snapshot is not changed.
func TestSimulateAgreesWithPlace(t *testing.T) {
	oneG := Resources{MilliCPU: 1000, MemoryBytes: gi, MIGProfile: "1g.5gb"}
	gpus := func(n int) Resources { return Resources{GPUs: n, MilliCPU: 4000, MemoryBytes: 16 * gi} }
	cases := []struct {
		name   string
		nodes  []NodeSpec
		before []Resources // placed first, in order
		reqs   []Resources
	}{
		{"whole GPUs pack onto the fullest node",
			[]NodeSpec{p4dNode("a", nil), p4dNode("b", nil), p4dNode("c", nil)},
			[]Resources{gpus(2), gpus(8), gpus(3)},
			[]Resources{gpus(1), gpus(4), gpus(4), gpus(2), gpus(8)}},
		{"MIG slices fill the most held GPU of the most held node",
			[]NodeSpec{p4dNode("a", repeat(2, []string{"1g.5gb", "1g.5gb", "3g.20gb"})), p4dNode("b", repeat(1, []string{"1g.5gb", "1g.5gb"}))},
			[]Resources{oneG, oneG, oneG},
			[]Resources{oneG, oneG, oneG, {MIGProfile: "3g.20gb"}, {MIGProfile: "3g.20gb"}, {MIGProfile: "3g.20gb"}, gpus(6), gpus(7)}},
		{"ties go to the node that joined first",
			[]NodeSpec{p4dNode("a", nil), p4dNode("b", nil), p4dNode("c", nil)},
			nil,
			[]Resources{gpus(8), gpus(4), gpus(8), gpus(4), gpus(5)}},
		{"CPU and memory decide when no GPU is asked",
			[]NodeSpec{p4dNode("a", nil), p4dNode("b", nil)},
			[]Resources{{MilliCPU: 90000}},
			[]Resources{{MilliCPU: 6000}, {MilliCPU: 1000}, {MemoryBytes: 1000 * gi}, {MemoryBytes: 1000 * gi}, {MemoryBytes: 1000 * gi}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPool(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
			for _, n := range tc.nodes {
				if err := p.AddNode(n); err != nil {
					t.Fatal(err)
				}
			}
			for i, r := range tc.before {
				if _, err := p.Place(fmt.Sprintf("before-%d", i), "c", "ml.p4d.24xlarge", r); err != nil {
					t.Fatal(err)
				}
			}
			snap := p.Nodes()
			kept := p.Nodes()
			reqs := make([]Request, len(tc.reqs))
			for i, r := range tc.reqs {
				reqs[i] = Request{ID: fmt.Sprintf("r%d", i), Cluster: "c", InstanceType: "ml.p4d.24xlarge", Resources: r}
			}
			got := Simulate(snap, reqs)
			if !reflect.DeepEqual(snap, kept) {
				t.Fatal("Simulate changed the snapshot")
			}
			placed := 0
			for i, r := range reqs {
				want, err := p.Place(r.ID, r.Cluster, r.InstanceType, r.Resources)
				if err != nil {
					want = ""
				} else {
					placed++
				}
				if got[i] != want {
					t.Errorf("request %d (%+v): simulated on %q, placed on %q", i, r.Resources, got[i], want)
				}
			}
			if placed == 0 || placed == len(reqs) {
				t.Errorf("%d of %d requests placed: a case should have both outcomes", placed, len(reqs))
			}
		})
	}
}

// TestSimulatePinnedAndTyped: a pinned request takes its node's room even
// when the node looks full, and a MIG slice there; a request of no
// instance type goes to any type's node, of its own cluster only;
// cordoned nodes take nothing.
func TestSimulatePinnedAndTyped(t *testing.T) {
	a := Node{NodeSpec: p4dNode("a", repeat(1, []string{"1g.5gb"}))}
	a.Slices = []Slice{{GPU: 0, Profile: "1g.5gb"}}
	b := Node{NodeSpec: NodeSpec{Name: "b", Cluster: "c", InstanceType: "ml.g5.12xlarge", Capacity: Resources{GPUs: 4, MilliCPU: 48000, MemoryBytes: 192 * gi}}}
	other := Node{NodeSpec: NodeSpec{Name: "x", Cluster: "other", InstanceType: "ml.g5.12xlarge", Capacity: Resources{GPUs: 4, MilliCPU: 48000, MemoryBytes: 192 * gi}}}
	cordoned := b
	cordoned.Name, cordoned.Cordoned = "cordoned", true
	got := Simulate([]Node{a, b, other, cordoned}, []Request{
		{ID: "pinned", Cluster: "c", Node: "a", Resources: Resources{GPUs: 7, MilliCPU: 96000}},
		{ID: "slice", Cluster: "c", Node: "a", Resources: Resources{MIGProfile: "1g.5gb"}},
		{ID: "no-slice", Cluster: "c", Resources: Resources{MIGProfile: "1g.5gb"}},
		{ID: "any-type", Cluster: "c", Resources: Resources{GPUs: 4}},
		{ID: "none-left", Cluster: "c", Resources: Resources{GPUs: 1}},
		{ID: "both", Cluster: "c", Resources: Resources{GPUs: 1, MIGProfile: "1g.5gb"}},
	})
	if want := []string{"a", "a", "", "b", "", ""}; !slices.Equal(got, want) {
		t.Fatalf("Simulate = %q, want %q", got, want)
	}
}
