package deployment

import (
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// TestReplicasMoveWhenTheirNodeLeaves: a replica whose node is cordoned (it
// is about to leave) or removed from the pool is drained, stopped and placed
// again on another node of its cluster; with no room anywhere it is pending
// in the pool, which is what the node autoscaler provisions for.
func TestReplicasMoveWhenTheirNodeLeaves(t *testing.T) {
	for _, leave := range []string{"cordon", "remove"} {
		t.Run(leave, func(t *testing.T) {
			h := newHarness(t, withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.24xlarge", Count: 2}))
			// Each replica asks for all 4 GPUs: one replica per node.
			h.apply(iec("demo", 1, 4, ""))
			h.reconcile(kIEC("demo"))
			ids := h.running("")
			if len(ids) != 1 {
				t.Fatalf("running %v, want one replica", ids)
			}
			id := ids[0]
			from, ok := h.cl.NodeOf(id)
			if !ok {
				t.Fatalf("replica %s not placed", id)
			}
			gone := func(name string) {
				t.Helper()
				if leave == "cordon" {
					if _, err := h.cl.Cordon(name, true); err != nil {
						t.Fatal(err)
					}
					return
				}
				if ev := h.cl.RemoveNode(name); !slices.Equal(ev, []string{id}) {
					t.Fatalf("RemoveNode evicted %v, want [%s]", ev, id)
				}
			}
			gone(from.Name)
			h.reconcile(kIEC("demo"))
			to, ok := h.cl.NodeOf(id)
			if !ok || to.Name == from.Name {
				t.Fatalf("replica %s on %+v (placed %v) after node %s left; want the other node", id, to.Name, ok, from.Name)
			}
			if got := h.running(""); !slices.Equal(got, []string{id}) {
				t.Fatalf("running %v after the move, want [%s]", got, id)
			}
			if !hasEvent(t, h, "Evicted") {
				t.Fatal("no Evicted event")
			}

			// The other node leaves too: nowhere to go, so the replica is
			// pending in the pool with its request.
			gone(to.Name)
			h.reconcile(kIEC("demo"))
			if _, ok := h.cl.NodeOf(id); ok {
				t.Fatalf("replica %s still placed with no node left", id)
			}
			ps := h.cl.Pending()
			if len(ps) != 1 || ps[0].ReplicaID != id || ps[0].Cluster != cluster.DefaultName || ps[0].Request.GPUs != 4 ||
				!slices.Equal(ps[0].InstanceTypes, []string{"ml.g5.24xlarge"}) {
				t.Fatalf("pending %+v, want %s asking for 4 GPUs of ml.g5.24xlarge in %s", ps, id, cluster.DefaultName)
			}
			if got := h.running(""); len(got) != 0 {
				t.Fatalf("running %v with no node", got)
			}

			// A node joins: the replica lands on it and runs.
			if err := h.cl.AddNode(cluster.NodeSpec{Name: "new", Cluster: cluster.DefaultName, InstanceGroup: "g5",
				InstanceType: "ml.g5.24xlarge", Capacity: to.Capacity}); err != nil {
				t.Fatal(err)
			}
			h.reconcile(kIEC("demo"))
			if n, ok := h.cl.NodeOf(id); !ok || n.Name != "new" {
				t.Fatalf("replica on %q (placed %v), want the new node", n.Name, ok)
			}
			if len(h.cl.Pending()) != 0 {
				t.Fatalf("still pending: %+v", h.cl.Pending())
			}
		})
	}
}

// TestManifestsRunOnTheirCluster: the capstan.dev/cluster annotation puts a
// deployment on that cluster's nodes only.
func TestManifestsRunOnTheirCluster(t *testing.T) {
	h := newHarness(t, withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.24xlarge", Count: 1}))
	if err := h.cl.AddNode(cluster.NodeSpec{Name: "other-0", Cluster: "other", InstanceGroup: "g5",
		InstanceType: "ml.g5.24xlarge", Capacity: cluster.Resources{GPUs: 4, MilliCPU: 96000, MemoryBytes: 384 << 30}}); err != nil {
		t.Fatal(err)
	}
	h.apply(strings.Replace(iec("demo", 1, 4, ""), "metadata: {name: demo, namespace: default}",
		"metadata: {name: demo, namespace: default, annotations: {capstan.dev/cluster: other}}", 1))
	h.reconcile(kIEC("demo"))
	ids := h.running("")
	if len(ids) != 1 {
		t.Fatalf("running %v", ids)
	}
	if n, _ := h.cl.NodeOf(ids[0]); n.Cluster != "other" {
		t.Fatalf("replica on %s of cluster %q, want cluster other", n.Name, n.Cluster)
	}
}

func hasEvent(t *testing.T, h *harness, reason string) bool {
	t.Helper()
	evs, err := h.svc.Events(t.Context(), manifest.KindInferenceEndpointConfig, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Reason == reason {
			return true
		}
	}
	return false
}
