package cluster

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

var gpuNode = Resources{GPUs: 8, MilliCPU: 96000, MemoryBytes: 1024 * gi}

func TestPoolNodesComeAndGo(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := NewPool(clk)
	add := func(name, cl string) {
		t.Helper()
		if err := p.AddNode(NodeSpec{Name: name, Cluster: cl, InstanceType: "ml.p5.48xlarge", Capacity: gpuNode}); err != nil {
			t.Fatal(err)
		}
	}
	add("a", "one")
	add("b", "two")
	if err := p.AddNode(NodeSpec{Name: "a", Cluster: "one", Capacity: gpuNode}); err == nil {
		t.Fatal("a second node named a was accepted")
	}
	<-p.Changes() // the joins were signalled, coalesced

	// A replica of cluster two lands on two's node only.
	if n, err := p.Place("r1", "two", "ml.p5.48xlarge", Resources{GPUs: 8}); err != nil || n != "b" {
		t.Fatalf("Place = %q, %v; want b", n, err)
	}
	if _, err := p.Place("r2", "two", "ml.p5.48xlarge", Resources{GPUs: 1}); !IsUnschedulable(err) {
		t.Fatalf("a full cluster placed r2 (err %v)", err)
	}
	p.SetPending(Pending{ReplicaID: "r2", Cluster: "two", Request: Resources{GPUs: 1}})
	clk.Step(time.Second)
	p.SetPending(Pending{ReplicaID: "r2", Cluster: "two", Request: Resources{GPUs: 1}})
	if ps := p.Pending(); len(ps) != 1 || !ps[0].Since.Equal(clk.Now().Add(-time.Second)) {
		t.Fatalf("pending %+v: want r2 since its first failure", ps)
	}

	// A cordoned node takes nothing new; a new node in the cluster does.
	if rs, err := p.Cordon("b", true); err != nil || !slices.Equal(rs, []string{"r1"}) {
		t.Fatalf("Cordon = %v, %v", rs, err)
	}
	<-p.Changes()
	add("c", "two")
	if n, err := p.Place("r2", "two", "ml.p5.48xlarge", Resources{GPUs: 1}); err != nil || n != "c" {
		t.Fatalf("Place after a node joined = %q, %v; want c", n, err)
	}
	if ps := p.Pending(); len(ps) != 0 {
		t.Fatalf("placing r2 left it pending: %+v", ps)
	}

	// Removing a node evicts its replicas: they are no longer placed.
	if ev := p.RemoveNode("b"); !slices.Equal(ev, []string{"r1"}) {
		t.Fatalf("RemoveNode evicted %v, want [r1]", ev)
	}
	if _, ok := p.NodeOf("r1"); ok {
		t.Fatal("r1 still placed after its node left")
	}
	if ev := p.RemoveNode("b"); ev != nil {
		t.Fatalf("removing b twice evicted %v", ev)
	}
	var names []string
	for _, n := range p.Nodes() {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) {
		t.Fatalf("nodes %v, want [a c]", names)
	}
}

func TestPoolSinceAndPlaced(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := NewPool(clk)
	if err := p.AddNode(NodeSpec{Name: "a", Cluster: "c", InstanceType: "t", Capacity: gpuNode}); err != nil {
		t.Fatal(err)
	}
	joined := clk.Now()
	clk.Step(time.Minute)
	if _, err := p.Place("r", "c", "t", Resources{GPUs: 2, MilliCPU: 1000}); err != nil {
		t.Fatal(err)
	}
	n, _ := p.NodeOf("r")
	if !n.Since.Equal(joined.Add(time.Minute)) || len(n.Placed) != 1 || !reflect.DeepEqual(n.Placed[0], Placement{ReplicaID: "r", Request: Resources{GPUs: 2, MilliCPU: 1000}, InstanceType: "t", GPUs: []int{0, 1}}) {
		t.Fatalf("node after a placement: %+v", n)
	}
	clk.Step(time.Minute)
	p.Release("r")
	if n := p.Nodes()[0]; !n.Since.Equal(joined.Add(2*time.Minute)) || n.Allocated != (Resources{}) {
		t.Fatalf("node after a release: %+v", n)
	}
}
