package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

func p4dNode(name string, partitions [][]string) NodeSpec {
	return NodeSpec{Name: name, Cluster: "c", InstanceType: "ml.p4d.24xlarge",
		Capacity: Resources{GPUs: 8, MilliCPU: 96000, MemoryBytes: 1152 * gi}, Partitions: partitions}
}

func repeat(n int, v []string) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestMIGSlicesPackAndCount: a p4d with all-1g.5gb holds 56 one-slice
// replicas, filling each GPU before the next, and says why the 57th waits.
func TestMIGSlicesPackAndCount(t *testing.T) {
	p := NewPool(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err := p.AddNode(p4dNode("n", repeat(8, slices.Repeat([]string{"1g.5gb"}, 7)))); err != nil {
		t.Fatal(err)
	}
	req := Resources{MilliCPU: 1000, MemoryBytes: 4 * gi, MIGProfile: "1g.5gb"}
	for i := range 56 {
		if _, err := p.Place(fmt.Sprintf("r%02d", i), "c", "ml.p4d.24xlarge", req); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		// Packing: replica i sits on GPU i/7.
		n, _ := p.NodeOf(fmt.Sprintf("r%02d", i))
		for _, s := range n.Slices {
			if s.ReplicaID == fmt.Sprintf("r%02d", i) && s.GPU != i/7 {
				t.Fatalf("replica %d on GPU %d, want GPU %d (one GPU fills before the next)", i, s.GPU, i/7)
			}
		}
	}
	_, err := p.Place("r56", "c", "ml.p4d.24xlarge", req)
	var u *UnschedulableError
	if !asUnschedulable(err, &u) || len(u.Short) != 1 || u.Short[0].Resource != "mig-1g.5gb" || u.Short[0].MostFree != 0 {
		t.Fatalf("57th replica: %v, want no free mig-1g.5gb", err)
	}
	if !strings.Contains(err.Error(), "mig-1g.5gb") {
		t.Fatalf("error %q does not name the profile", err)
	}
	p.Release("r10")
	if _, err := p.Place("r56", "c", "ml.p4d.24xlarge", req); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if n, _ := p.NodeOf("r56"); !slices.ContainsFunc(n.Slices, func(s Slice) bool { return s.ReplicaID == "r56" && s.GPU == 1 }) {
		t.Fatalf("r56 did not take the freed slice on GPU 1: %+v", n.Slices)
	}
}

// TestWholeAndMIGNeverShareAGPU: on a node with 4 partitioned GPUs, whole
// GPU requests see only the other 4, and MIG requests only the slices.
func TestWholeAndMIGNeverShareAGPU(t *testing.T) {
	p := NewPool(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	parts := append(repeat(4, []string{"3g.20gb", "4g.20gb"}), nil, nil, nil, nil)
	if err := p.AddNode(p4dNode("n", parts)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id      string
		req     Resources
		wantErr bool
	}{
		{"whole-5", Resources{GPUs: 5}, true},
		{"whole-4", Resources{GPUs: 4}, false},
		{"whole-1", Resources{GPUs: 1}, true},
		{"mig-4g", Resources{MIGProfile: "4g.20gb"}, false},
		{"mig-1g", Resources{MIGProfile: "1g.5gb"}, true},
		{"both", Resources{GPUs: 1, MIGProfile: "4g.20gb"}, true},
	}
	for _, tc := range tests {
		_, err := p.Place(tc.id, "c", "ml.p4d.24xlarge", tc.req)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: err %v, want error %v", tc.id, err, tc.wantErr)
		}
	}
	if !p.CouldFit("c", "ml.p4d.24xlarge", Resources{MIGProfile: "3g.20gb"}) || p.CouldFit("c", "ml.p4d.24xlarge", Resources{MIGProfile: "1g.5gb"}) {
		t.Fatal("CouldFit disagrees with the node's slices")
	}
	if err := p.AddNode(NodeSpec{Name: "bad", Cluster: "c", Capacity: Resources{GPUs: 1}, Partitions: repeat(2, []string{"7g.40gb"})}); err == nil {
		t.Fatal("a node with more partitions than GPUs was accepted")
	}
}

func asUnschedulable(err error, u **UnschedulableError) bool {
	e, ok := err.(*UnschedulableError)
	*u = e
	return ok
}

// TestPlaceHoldsGPUIndices: whole-GPU replicas get the lowest free whole
// GPUs of their node, never a partitioned one, and get them back on
// release; a MIG replica holds no whole GPU.
func TestPlaceHoldsGPUIndices(t *testing.T) {
	p := NewPool(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	// GPUs 1 and 4 are cut into slices; 0, 2, 3, 5, 6, 7 are whole.
	parts := make([][]string, 8)
	parts[1], parts[4] = []string{"7g.40gb"}, []string{"7g.40gb"}
	if err := p.AddNode(p4dNode("n", parts)); err != nil {
		t.Fatal(err)
	}
	gpusOf := func(id string) []int {
		n, ok := p.NodeOf(id)
		if !ok {
			t.Fatalf("%s not placed", id)
		}
		for _, pl := range n.Placed {
			if pl.ReplicaID == id {
				return pl.GPUs
			}
		}
		t.Fatalf("%s not in the node's placements", id)
		return nil
	}
	for _, step := range []struct {
		id      string
		gpus    int
		mig     string
		release string
		want    []int
	}{
		{id: "a", gpus: 2, want: []int{0, 2}},
		{id: "m", mig: "7g.40gb", want: nil},
		{id: "b", gpus: 3, want: []int{3, 5, 6}},
		{id: "c", gpus: 1, release: "a", want: []int{0}},
		{id: "d", gpus: 2, want: []int{2, 7}},
	} {
		if step.release != "" {
			p.Release(step.release)
		}
		if _, err := p.Place(step.id, "c", "ml.p4d.24xlarge", Resources{GPUs: step.gpus, MIGProfile: step.mig}); err != nil {
			t.Fatalf("place %s: %v", step.id, err)
		}
		if got := gpusOf(step.id); !slices.Equal(got, step.want) {
			t.Fatalf("%s holds GPUs %v, want %v", step.id, got, step.want)
		}
	}
	if _, err := p.Place("e", "c", "ml.p4d.24xlarge", Resources{GPUs: 1}); !IsUnschedulable(err) {
		t.Fatalf("a ninth whole GPU was given out: %v", err)
	}
}
