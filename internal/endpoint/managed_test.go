package endpoint

import (
	"errors"
	"testing"

	"github.com/capstan-dev/capstan/internal/runtime"
)

func TestManagedEndpoints(t *testing.T) {
	e := newEnv(t, true, 4)
	owner := "InferenceEndpointConfig/default/demo"
	m := ManagedEndpoint{Name: "demo", Owner: owner, Status: StatusCreating, InstanceType: "ml.g5.24xlarge", Model: "llama-3.1-8b", DesiredCount: 2}
	if err := e.svc.PutManaged(e.ctx, m); err != nil {
		t.Fatal(err)
	}
	ep, err := e.svc.GetEndpoint(e.ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if ep.ManagedBy != owner || ep.Status != StatusCreating || ep.Current == nil || ep.Current.Variants[0].Name != "AllTraffic" || ep.Current.Variants[0].DesiredCount != 2 {
		t.Fatalf("stored %+v", ep)
	}
	v1 := ep.Version
	// Unchanged registrations write nothing.
	if err := e.svc.PutManaged(e.ctx, m); err != nil {
		t.Fatal(err)
	}
	if ep, _ = e.svc.GetEndpoint(e.ctx, "demo"); ep.Version != v1 {
		t.Fatalf("unchanged put wrote: version %d → %d", v1, ep.Version)
	}
	m.Status, m.Replicas = StatusInService, []string{"r0", "r1"}
	if err := e.svc.PutManaged(e.ctx, m); err != nil {
		t.Fatal(err)
	}
	if ep, _ = e.svc.GetEndpoint(e.ctx, "demo"); ep.Status != StatusInService || len(ep.Current.Variants[0].Replicas) != 2 {
		t.Fatalf("after update %+v", ep)
	}

	tests := []struct {
		name string
		call func() error
	}{
		{"another manifest", func() error {
			return e.svc.PutManaged(e.ctx, ManagedEndpoint{Name: "demo", Owner: "JumpStartModel/default/other", Status: StatusCreating})
		}},
		{"the name in another case", func() error {
			// Same ARN (ARNs lower-case names), so the name is taken.
			return e.svc.PutManaged(e.ctx, ManagedEndpoint{Name: "Demo", Owner: "JumpStartModel/default/other", Status: StatusCreating})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrNameInUse) {
				t.Fatalf("err = %v, want ErrNameInUse", err)
			}
		})
	}
	// SageMaker calls refuse to change a managed endpoint.
	for name, call := range map[string]func() error{
		"DeleteEndpoint": func() error { return e.svc.DeleteEndpoint(e.ctx, "demo") },
		"UpdateWeights":  func() error { _, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "demo", nil); return err },
	} {
		if err := call(); err == nil {
			t.Fatalf("%s on a managed endpoint succeeded", name)
		} else if se, ok := AsError(err); !ok || se.Kind != ErrInvalid {
			t.Fatalf("%s: %v, want an ErrInvalid", name, err)
		}
	}
	// The endpoint controller leaves it (and replicas of other controllers) alone.
	if err := e.rt.Start(e.ctx, runtime.ReplicaSpec{ID: "demo.0", Endpoint: "demo", Controller: runtime.ControllerDeployment, Engine: "sim", Model: "llama-3.1-8b", GPU: "a10g", TensorParallel: 1}); err != nil {
		t.Fatal(err)
	}
	e.reconcile("demo")
	if r, err := e.rt.Get("demo.0"); err != nil || r.State == runtime.StateStopped {
		t.Fatalf("endpoint controller touched a deployment replica: %+v %v", r, err)
	}
	if err := e.svc.DeleteManaged(e.ctx, "demo", "JumpStartModel/default/other"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.GetEndpoint(e.ctx, "demo"); err != nil {
		t.Fatalf("a foreign DeleteManaged removed it: %v", err)
	}
	if err := e.svc.DeleteManaged(e.ctx, "demo", owner); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.GetEndpoint(e.ctx, "demo"); !IsNotFound(err) {
		t.Fatalf("after DeleteManaged: %v", err)
	}
	e.reconcile("demo") // record gone: must still not stop the deployment's replica
	if r, _ := e.rt.Get("demo.0"); r.State == runtime.StateStopped {
		t.Fatal("endpoint controller stopped a deployment replica after the record went")
	}
}
