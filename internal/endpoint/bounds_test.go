package endpoint

import (
	"math"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/store"
)

func TestAddInstances(t *testing.T) {
	tests := []struct {
		a, b, want int
		ok         bool
	}{
		{0, 0, 0, true},
		{1, MaxInstancesPerEndpoint - 1, MaxInstancesPerEndpoint, true},
		{1, MaxInstancesPerEndpoint, 0, false},
		{math.MaxInt, math.MaxInt, 0, false}, // would wrap negative
		{math.MaxInt, 1, 0, false},
		{-1, 5, 0, false},
		{5, -1, 0, false},
	}
	for _, tt := range tests {
		got, err := AddInstances(tt.a, tt.b)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("AddInstances(%d, %d) = %d, %v; want %d, ok=%v", tt.a, tt.b, got, err, tt.want, tt.ok)
		}
	}
}

// TestCountAndWeightCaps: the service refuses counts and weights outside
// capstan's caps even when a caller skips the wire validation (defence in
// depth for the repro where two MaxInt64 counts summed negative).
func TestCountAndWeightCaps(t *testing.T) {
	e := newEnv(t, true, 4)
	e.serving(1)
	variant := func(name string, n int, w *float64) Variant {
		return Variant{VariantName: name, ModelName: "m", InstanceType: "ml.g5.12xlarge", InitialInstanceCount: n, InitialVariantWeight: w}
	}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"two MaxInt64 variants", func() error {
			_, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "big", ProductionVariants: []Variant{
				variant("a", math.MaxInt64, nil), variant("b", math.MaxInt64, nil)}})
			return err
		}, "capstan allows 0 to 1000 instances per variant"},
		{"one over the cap", func() error {
			_, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "big", ProductionVariants: []Variant{variant("a", MaxInstancesPerVariant+1, nil)}})
			return err
		}, "instances per variant"},
		{"eleven variants", func() error {
			vs := make([]Variant, MaxVariants+1)
			for i := range vs {
				vs[i] = variant(string(rune('a'+i)), 1, nil)
			}
			_, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "many", ProductionVariants: vs})
			return err
		}, "1 to 10 production variants"},
		{"weights add to +Inf", func() error {
			_, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "inf", ProductionVariants: []Variant{
				variant("a", 1, ptr(math.MaxFloat64)), variant("b", 1, ptr(math.MaxFloat64))}})
			return err
		}, "add up to more than a float64 holds"},
		{"NaN initial weight", func() error {
			_, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "nan", ProductionVariants: []Variant{variant("a", 1, ptr(math.NaN()))}})
			return err
		}, "finite number"},
		{"desired count MaxInt", func() error {
			_, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", InstanceCount: ptr(math.MaxInt)}})
			return err
		}, "instances per variant"},
		{"negative desired count", func() error {
			_, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", InstanceCount: ptr(-1)}})
			return err
		}, "instances per variant"},
		{"NaN desired weight", func() error {
			_, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", Weight: ptr(math.NaN())}})
			return err
		}, "finite number"},
		{"infinite desired weight", func() error {
			_, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", Weight: ptr(math.Inf(1))}})
			return err
		}, "finite number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			ee, ok := AsError(err)
			if !ok || ee.Kind != ErrInvalid || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	ep, err := e.svc.GetEndpoint(e.ctx, "ep")
	if err != nil || ep.Status != StatusInService || ep.Current.Variants[0].DesiredCount != 1 {
		t.Fatalf("a refused change altered the endpoint: %+v, %v", ep, err)
	}
}

// TestDeleteInAnyState: DeleteEndpoint is accepted while a rollout is stuck
// (replicas that never become healthy, a 5-minute start timeout), and the
// controller then stops everything and removes the record.
func TestDeleteInAnyState(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		want  string
	}{
		{"stuck create", func(e *env) {
			e.model("m", "meta-llama/Llama-3.1-8B-Instruct")
			e.config("c1", "m", "ml.g5.12xlarge", 2)
			if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
				e.t.Fatal(err)
			}
			e.reconcile("ep")
		}, StatusCreating},
		{"stuck update", func(e *env) {
			e.serving(1)
			e.config("c2", "m", "ml.g5.12xlarge", 2)
			if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{}); err != nil {
				e.t.Fatal(err)
			}
			e.reconcile("ep")
		}, StatusUpdating},
		{"stuck scale-out", func(e *env) {
			e.serving(1)
			if _, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", InstanceCount: ptr(3)}}); err != nil {
				e.t.Fatal(err)
			}
			e.reconcile("ep")
		}, StatusUpdating},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, true, 4)
			tt.setup(e)
			e.clock.Step(startTimeout / 2) // mid-rollout, nothing timed out
			if ep := e.reconcile("ep"); ep.Status != tt.want {
				t.Fatalf("status %s, want %s", ep.Status, tt.want)
			}
			if err := e.svc.DeleteEndpoint(e.ctx, "ep"); err != nil {
				t.Fatalf("DeleteEndpoint during %s: %v", tt.want, err)
			}
			// A second delete while Deleting is accepted and changes nothing.
			if err := e.svc.DeleteEndpoint(e.ctx, "ep"); err != nil {
				t.Fatalf("second DeleteEndpoint: %v", err)
			}
			e.reconcile("ep")
			if _, err := e.svc.GetEndpoint(e.ctx, "ep"); !IsNotFound(err) {
				t.Fatalf("endpoint survives delete: %v", err)
			}
			for _, r := range e.rt.List() {
				if r.State != runtime.StateStopped {
					t.Errorf("replica %s still %s", r.Spec.ID, r.State)
				}
			}
			if u := e.usage("ml.g5.12xlarge"); u != 0 {
				t.Fatalf("fleet usage %d after delete", u)
			}
		})
	}
}

// TestUncappedStoredRecord: a data dir written before the caps (a pending
// deployment asking for MaxInt64 replicas) is repaired by the controller,
// which fails the deployment instead of numbering replicas, and stays
// deletable.
func TestUncappedStoredRecord(t *testing.T) {
	e := newEnv(t, true, 4)
	e.model("m", "meta-llama/Llama-3.1-8B-Instruct")
	e.config("c1", "m", "ml.g5.12xlarge", 1)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
		t.Fatal(err)
	}
	err := e.store.Update(func(tx *store.Tx) error {
		var ep Endpoint
		if _, err := tx.Get(KindEndpoint, "ep", &ep); err != nil {
			return err
		}
		ep.Pending.Variants[0].DesiredCount = math.MaxInt64
		return tx.Put(KindEndpoint, "ep", ep)
	})
	if err != nil {
		t.Fatal(err)
	}
	ep := e.reconcile("ep")
	if ep.Status != StatusFailed || !strings.Contains(ep.FailureReason, "instances per variant") {
		t.Fatalf("status %s (%s), want Failed naming the cap", ep.Status, ep.FailureReason)
	}
	if len(e.rt.Starts()) != 0 {
		t.Fatalf("started %d replicas", len(e.rt.Starts()))
	}
	if err := e.svc.DeleteEndpoint(e.ctx, "ep"); err != nil {
		t.Fatal(err)
	}
	e.reconcile("ep")
	if _, err := e.svc.GetEndpoint(e.ctx, "ep"); !IsNotFound(err) {
		t.Fatalf("endpoint survives delete: %v", err)
	}
}
