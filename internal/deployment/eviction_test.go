package deployment

import (
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// TestReplicasMoveWhenTheirNodeLeaves: a replica whose node is removed from
// the pool (a failure, an interruption) is stopped and placed again on
// another node of its cluster; with no room anywhere it is pending in the
// pool, which is what the node autoscaler provisions for.
func TestReplicasMoveWhenTheirNodeLeaves(t *testing.T) {
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
	wantPending(t, h, id)
	if got := h.running(""); len(got) != 0 {
		t.Fatalf("running %v with no node", got)
	}

	// A node joins: the replica lands on it and runs.
	addNode(t, h, "new", to.Capacity)
	h.reconcile(kIEC("demo"))
	if n, ok := h.cl.NodeOf(id); !ok || n.Name != "new" {
		t.Fatalf("replica on %q (placed %v), want the new node", n.Name, ok)
	}
	if len(h.cl.Pending()) != 0 {
		t.Fatalf("still pending: %+v", h.cl.Pending())
	}
}

// TestReplicaOnALeavingNodeIsReplacedFirst: a replica whose node is
// cordoned (consolidation, a spot notice, a plan's end) keeps serving until
// a replacement on another node serves; with no room for the replacement it
// stops at once and the replacement is pending.
func TestReplicaOnALeavingNodeIsReplacedFirst(t *testing.T) {
	h := newHarness(t, manualRuntime(), withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.24xlarge", Count: 2}))
	k := kIEC("demo")
	first, from := cordonServingReplica(t, h, k)
	running := h.running("")
	if len(running) != 2 || running[0] != first && running[1] != first {
		t.Fatalf("running %v after the cordon; want %s and its replacement", running, first)
	}
	second := running[0]
	if second == first {
		second = running[1]
	}
	if n, ok := h.cl.NodeOf(second); !ok || n.Name == from.Name {
		t.Fatalf("replacement %s on %q (placed %v), want the other node", second, n.Name, ok)
	}
	if got := h.backends("demo"); !slices.Equal(got, []string{first}) {
		t.Fatalf("route %v while the replacement starts, want the leaving replica [%s]", got, first)
	}
	if !hasEvent(t, h, "Evicted") {
		t.Fatal("no Evicted event")
	}

	h.rt.SetState(second, runtime.StateHealthy, "")
	h.reconcile(k)
	if got := h.running(""); !slices.Equal(got, []string{second}) {
		t.Fatalf("running %v once the replacement serves, want [%s]", got, second)
	}
	if got := h.backends("demo"); !slices.Equal(got, []string{second}) {
		t.Fatalf("route %v, want [%s]", got, second)
	}
	if _, ok := h.cl.NodeOf(first); ok {
		t.Fatalf("%s still holds its node", first)
	}
	if got := h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus().State; got != manifest.StateDeploymentComplete {
		t.Fatalf("state %s after the move", got)
	}

	// Its node is cordoned and then leaves (the drain timed out) before
	// the replacement serves: the replica is stopped, the replacement
	// stays, and no third replica is made.
	addNode(t, h, "spare", from.Capacity)
	to, _ := h.cl.NodeOf(second)
	if _, err := h.cl.Cordon(to.Name, true); err != nil {
		t.Fatal(err)
	}
	h.reconcile(k)
	third := h.running("")
	if len(third) != 2 {
		t.Fatalf("running %v after the second cordon; want %s and its replacement", third, second)
	}
	h.cl.RemoveNode(to.Name)
	h.reconcile(k)
	got := h.running("")
	if len(got) != 1 || got[0] == second || !slices.Contains(third, got[0]) {
		t.Fatalf("running %v after %s's node left; want only its replacement (of %v)", got, second, third)
	}
	second = got[0]

	// The spare node is cordoned too, and every other node is leaving or
	// gone: the replacement has nowhere to go, so the leaving replica
	// stops now.
	if _, err := h.cl.Cordon("spare", true); err != nil {
		t.Fatal(err)
	}
	h.reconcile(k)
	if got := h.running(""); len(got) != 0 {
		t.Fatalf("running %v with no node to move to", got)
	}
	ps := h.cl.Pending()
	if len(ps) != 1 || ps[0].ReplicaID == second {
		t.Fatalf("pending %+v, want the replacement of %s", ps, second)
	}
	addNode(t, h, "new", to.Capacity)
	h.reconcile(k)
	if n, ok := h.cl.NodeOf(ps[0].ReplicaID); !ok || n.Name != "new" {
		t.Fatalf("replacement on %q (placed %v), want the new node", n.Name, ok)
	}
}

// TestLeavingReplicaServesWhileAnAutoscalerAddsANode: in a cluster whose
// node autoscaler adds nodes for pending replicas, a replica on a leaving
// node (a spot notice) with no room for its replacement keeps serving until
// the replacement, on the node that is added for it, serves; if its node
// goes first, it stops then. Without the autoscaler it stops at once
// (TestReplicaOnALeavingNodeIsReplacedFirst).
func TestLeavingReplicaServesWhileAnAutoscalerAddsANode(t *testing.T) {
	var asked []string
	provisioned := func(o *Options, _ *harnessConfig) {
		o.Provisioned = func(name string) bool { asked = append(asked, name); return name == cluster.DefaultName }
	}
	h := newHarness(t, manualRuntime(), provisioned, withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.24xlarge", Count: 1}))
	k := kIEC("demo")
	first, from := cordonServingReplica(t, h, k)
	if got := h.running(""); !slices.Equal(got, []string{first}) {
		t.Fatalf("running %v with no room for the replacement; want the leaving replica %s serving", got, first)
	}
	if got := h.backends("demo"); !slices.Equal(got, []string{first}) {
		t.Fatalf("route %v while the replacement waits for a node, want [%s]", got, first)
	}
	ps := h.cl.Pending()
	if len(ps) != 1 || ps[0].ReplicaID == first {
		t.Fatalf("pending %+v, want the replacement of %s", ps, first)
	}
	if !slices.Contains(asked, cluster.DefaultName) {
		t.Fatalf("Provisioned asked about %v, want %s", asked, cluster.DefaultName)
	}
	second := ps[0].ReplicaID

	// The autoscaler's node joins: the replacement lands and starts while
	// the leaving replica serves, then takes over.
	addNode(t, h, "added", from.Capacity)
	h.reconcile(k)
	if n, ok := h.cl.NodeOf(second); !ok || n.Name != "added" {
		t.Fatalf("replacement on %q (placed %v), want the added node", n.Name, ok)
	}
	if got := h.backends("demo"); !slices.Equal(got, []string{first}) {
		t.Fatalf("route %v while the replacement starts, want [%s]", got, first)
	}
	h.rt.SetState(second, runtime.StateHealthy, "")
	h.reconcile(k)
	if got := h.running(""); !slices.Equal(got, []string{second}) {
		t.Fatalf("running %v once the replacement serves, want [%s]", got, second)
	}
	if _, ok := h.cl.NodeOf(first); ok {
		t.Fatalf("%s still holds its node", first)
	}

	// Its node is interrupted before a node is added for the replacement:
	// the leaving replica stops then, and the replacement stays pending.
	if _, err := h.cl.Cordon("added", true); err != nil {
		t.Fatal(err)
	}
	h.reconcile(k)
	if got := h.running(""); !slices.Equal(got, []string{second}) {
		t.Fatalf("running %v after the second cordon, want %s serving", got, second)
	}
	h.cl.RemoveNode("added")
	h.reconcile(k)
	if got := h.running(""); len(got) != 0 {
		t.Fatalf("running %v after the leaving node went, want none", got)
	}
	if ps := h.cl.Pending(); len(ps) != 1 || ps[0].ReplicaID == second {
		t.Fatalf("pending %+v, want one replacement of %s", ps, second)
	}
}

// cordonServingReplica applies "demo" (one replica of 4 GPUs), lets its
// replica serve, cordons that replica's node and reconciles once; it returns
// the replica and the node it was on.
func cordonServingReplica(t *testing.T, h *harness, k string) (string, cluster.Node) {
	t.Helper()
	h.apply(iec("demo", 1, 4, ""))
	h.reconcile(k)
	ids := h.running("")
	if len(ids) != 1 {
		t.Fatalf("running %v, want one replica", ids)
	}
	h.rt.SetState(ids[0], runtime.StateHealthy, "")
	h.reconcile(k)
	from, _ := h.cl.NodeOf(ids[0])
	if _, err := h.cl.Cordon(from.Name, true); err != nil {
		t.Fatal(err)
	}
	h.reconcile(k)
	return ids[0], from
}

func wantPending(t *testing.T, h *harness, id string) {
	t.Helper()
	ps := h.cl.Pending()
	if len(ps) != 1 || ps[0].ReplicaID != id || ps[0].Cluster != cluster.DefaultName || ps[0].Request.GPUs != 4 ||
		!slices.Equal(ps[0].InstanceTypes, []string{"ml.g5.24xlarge"}) {
		t.Fatalf("pending %+v, want %s asking for 4 GPUs of ml.g5.24xlarge in %s", ps, id, cluster.DefaultName)
	}
}

func addNode(t *testing.T, h *harness, name string, capacity cluster.Resources) {
	t.Helper()
	if err := h.cl.AddNode(cluster.NodeSpec{Name: name, Cluster: cluster.DefaultName, InstanceGroup: "g5",
		InstanceType: "ml.g5.24xlarge", Capacity: capacity}); err != nil {
		t.Fatal(err)
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
