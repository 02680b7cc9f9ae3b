package deployment

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// TestDesiredIsCapped: whatever a stored record says (one written before
// the manifest caps, or a damaged one), the controller never aims for more
// than manifest.MaxReplicas replicas, nor fewer than zero.
func TestDesiredIsCapped(t *testing.T) {
	huge, neg := math.MaxInt, -5
	tests := []struct {
		name string
		rec  record
		p    plan
		want int
	}{
		{"spec replicas", record{}, plan{replicas: 3}, 3},
		{"spec replicas past the cap", record{}, plan{replicas: math.MaxInt32}, manifest.MaxReplicas},
		{"autoscaler count past the cap", record{Desired: &huge}, plan{autoscale: &manifest.AutoScalingSpec{}}, manifest.MaxReplicas},
		{"negative autoscaler count", record{Desired: &neg}, plan{autoscale: &manifest.AutoScalingSpec{}}, 0},
	}
	var c Controller
	for _, tt := range tests {
		if got := c.desired(&tt.rec, &tt.p); got != tt.want {
			t.Errorf("%s: desired = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestDeleteDuringStuckRollout: a deployment whose replicas never become
// healthy (still within maxDeployTimeInSeconds) is deleted at once: its
// replicas stop, its route and SageMaker registration go, and the record is
// removed.
func TestDeleteDuringStuckRollout(t *testing.T) {
	h := newHarness(t, manualRuntime())
	h.apply(jsm("deepseek", "deepseek-ep", ""))
	k := kJSM("deepseek")
	h.reconcile(k)
	if got := h.get(manifest.KindJumpStartModel, "deepseek").GetStatus().State; got != manifest.StateDeploymentInProgress {
		t.Fatalf("state %s, want %s", got, manifest.StateDeploymentInProgress)
	}
	if len(h.running("jsm.default.deepseek.")) != 1 {
		t.Fatalf("running %v", h.rt.Running())
	}
	if err := h.svc.Delete(context.Background(), manifest.KindJumpStartModel, "default", "deepseek"); err != nil {
		t.Fatalf("delete during rollout: %v", err)
	}
	if err := h.svc.Controller().Reconcile(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Get(context.Background(), manifest.KindJumpStartModel, "default", "deepseek"); !errors.Is(err, manifest.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if len(h.running("jsm.")) != 0 {
		t.Fatalf("still running %v", h.rt.Running())
	}
	if _, ok := h.reg.get(t, "deepseek-ep"); ok {
		t.Fatal("SageMaker registration survives")
	}
}
