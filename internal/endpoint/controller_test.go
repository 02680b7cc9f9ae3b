package endpoint

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// fakeRouter records routes and drains. At each Drain it checks the backend is
// no longer routed and its replica still runs (drain happens before stop).
type fakeRouter struct {
	t  *testing.T
	rt *fake.Runtime

	mu     sync.Mutex
	routes map[string]gateway.Route
	drains []string
}

var _ serving.Router = (*fakeRouter)(nil)

func (r *fakeRouter) SetRoute(rt gateway.Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[rt.Endpoint] = rt
}

func (r *fakeRouter) DeleteRoute(ep string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.routes, ep)
}

func (r *fakeRouter) Drain(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rt := range r.routes {
		for _, v := range rt.Variants {
			for _, b := range v.Backends {
				if b.ID == id {
					r.t.Errorf("drain of %s while it is still routed", id)
				}
			}
		}
	}
	if rep, err := r.rt.Get(id); err == nil && rep.State == runtime.StateStopped {
		r.t.Errorf("drain of %s after it was stopped", id)
	}
	r.drains = append(r.drains, id)
	return nil
}

func (r *fakeRouter) backends(ep string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, v := range r.routes[ep].Variants {
		for _, b := range v.Backends {
			ids = append(ids, b.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

type env struct {
	t      *testing.T
	store  *store.Store
	fleet  *fleet.Fleet
	clock  *clock.Fake
	rt     *fake.Runtime
	router *fakeRouter
	svc    *Service
	ctrl   *Controller
	ctx    context.Context
}

const startTimeout = 5 * time.Minute

func newEnv(t *testing.T, manual bool, capacity int) *env {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var opts []fake.Option
	opts = append(opts, fake.WithClock(clk))
	if manual {
		opts = append(opts, fake.Manual())
	}
	rt := fake.New(opts...)
	rt.SetDefaultAddr("127.0.0.1:1")
	fl := fleet.New(fleet.Capacity{"ml.g5.xlarge": {"a": capacity}, "ml.g5.12xlarge": {"a": capacity}})
	e := &env{t: t, store: st, fleet: fl, clock: clk, rt: rt, router: &fakeRouter{t: t, rt: rt, routes: map[string]gateway.Route{}}, ctx: context.Background()}
	e.svc = NewService(st, fl, catalog.Default(), clk, nil)
	e.ctrl = e.newController(rt)
	return e
}

func (e *env) newController(rt runtime.Runtime) *Controller {
	eng := serving.New(serving.Options{Runtime: rt, Router: e.router, EngineArgs: []string{"--time-scale=0.01"}})
	return NewController(e.store, e.fleet, eng, e.clock, nil, Options{StartTimeout: startTimeout})
}

func (e *env) model(name, hf string) {
	e.t.Helper()
	if _, err := e.svc.CreateModel(e.ctx, Model{Name: name, PrimaryContainer: &Container{Environment: map[string]string{"HF_MODEL_ID": hf}}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) config(name, model, typ string, count int) {
	e.t.Helper()
	if _, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: name, ProductionVariants: []Variant{{VariantName: "AllTraffic", ModelName: model, InstanceType: typ, InitialInstanceCount: count}}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) reconcile(name string) Endpoint {
	e.t.Helper()
	if err := e.ctrl.Reconcile(e.ctx, name); err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	ep, err := e.svc.GetEndpoint(e.ctx, name)
	if err != nil && !IsNotFound(err) {
		e.t.Fatal(err)
	}
	return ep
}

func (e *env) usage(typ string) int {
	var u map[string]int
	_ = e.store.View(func(tx *store.Tx) error { var err error; u, err = e.fleet.Usage(tx); return err })
	return u[typ]
}

func (e *env) healthyAll() {
	for _, r := range e.rt.List() {
		if r.State == runtime.StateStarting {
			_ = e.rt.SetState(r.Spec.ID, runtime.StateHealthy, "")
		}
	}
}

// serving creates model m, config c1 (count instances) and endpoint ep, InService.
func (e *env) serving(count int) Endpoint {
	e.model("m", "meta-llama/Llama-3.1-8B-Instruct")
	e.config("c1", "m", "ml.g5.12xlarge", count)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
		e.t.Fatal(err)
	}
	e.reconcile("ep")
	e.healthyAll()
	ep := e.reconcile("ep")
	if ep.Status != StatusInService {
		e.t.Fatalf("status %s (%s), want InService", ep.Status, ep.FailureReason)
	}
	return ep
}

func TestCreateBecomesInServiceOnlyWhenAllHealthy(t *testing.T) {
	e := newEnv(t, true, 4)
	e.model("m", "meta-llama/Llama-3.1-8B-Instruct")
	e.config("c1", "m", "ml.g5.12xlarge", 2)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
		t.Fatal(err)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 2 {
		t.Fatalf("fleet usage after create = %d, want 2", got)
	}
	ep := e.reconcile("ep")
	if ep.Status != StatusCreating || len(e.rt.Starts()) != 2 {
		t.Fatalf("status %s starts %d", ep.Status, len(e.rt.Starts()))
	}
	spec := e.rt.Starts()[0]
	if spec.Model != "llama-3.1-8b" || spec.GPU != "a10g" || spec.TensorParallel != 4 || spec.Endpoint != "ep" || !slices.Contains(spec.Args, "--time-scale=0.01") {
		t.Fatalf("spec = %+v", spec)
	}
	_ = e.rt.SetState(ep.Pending.Variants[0].Replicas[0], runtime.StateHealthy, "")
	if ep = e.reconcile("ep"); ep.Status != StatusCreating {
		t.Fatalf("one of two healthy: status %s", ep.Status)
	}
	if len(e.router.backends("ep")) != 0 {
		t.Fatal("route set before the endpoint is InService")
	}
	e.healthyAll()
	ep = e.reconcile("ep")
	if ep.Status != StatusInService || ep.Current == nil || ep.Pending != nil {
		t.Fatalf("after all healthy: %+v", ep)
	}
	if got := e.router.backends("ep"); len(got) != 2 {
		t.Fatalf("route backends = %v", got)
	}
	// Reconciling a steady endpoint starts nothing new.
	e.reconcile("ep")
	if len(e.rt.Starts()) != 2 {
		t.Fatalf("steady reconcile started replicas: %d", len(e.rt.Starts()))
	}
}

// An engine that cannot load its model crashes at every start: the
// endpoint fails after CrashLoopFailures of them, with the engine's words,
// long before the start timeout; fewer failures keep it Creating.
func TestCreateFailsOnCrashLoop(t *testing.T) {
	e := newEnv(t, true, 4) // replicas stay Starting until told
	e.model("m", "meta-llama/Llama-3.1-8B-Instruct")
	e.config("c1", "m", "ml.g5.xlarge", 1)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
		t.Fatal(err)
	}
	e.reconcile("ep")
	starts := e.rt.Starts()
	if len(starts) != 1 {
		t.Fatalf("%d starts, want 1", len(starts))
	}
	id := starts[0].ID
	var ep Endpoint
	const why = "engine exited: exit status 1: llama_server: exiting due to model loading error"
	for i := 1; i <= CrashLoopFailures; i++ {
		if err := e.rt.SetState(id, runtime.StateFailed, why); err != nil {
			t.Fatal(err)
		}
		if err := e.rt.SetState(id, runtime.StateStarting, "restarting"); err != nil {
			t.Fatal(err)
		}
		ep = e.reconcile("ep")
		if i < CrashLoopFailures && ep.Status != StatusCreating {
			t.Fatalf("after %d failures: status %s, want Creating", i, ep.Status)
		}
	}
	if ep.Status != StatusFailed || !strings.Contains(ep.FailureReason, "failed 3 times in a row while starting: "+why) {
		t.Fatalf("status %s reason %q, want Failed with the engine's error", ep.Status, ep.FailureReason)
	}
}

func TestCreateFails(t *testing.T) {
	tests := []struct {
		name     string
		hf       string
		never    bool // replicas never become healthy
		startErr error
		want     string
	}{
		{"model not in catalog", "acme/unknown-model", false, nil, `"acme/unknown-model"`},
		{"replicas never healthy", "meta-llama/Llama-3.1-8B-Instruct", true, nil, "did not become healthy within 5m0s"},
		{"runtime cannot start", "meta-llama/Llama-3.1-8B-Instruct", false, errors.New("no such binary"), "no such binary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true, 4)
			e.rt.SetStartError("", tc.startErr)
			e.model("m", tc.hf)
			e.config("c1", "m", "ml.g5.xlarge", 2)
			if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
				t.Fatal(err)
			}
			ep := e.reconcile("ep")
			if tc.never {
				if ep.Status != StatusCreating {
					t.Fatalf("status %s before timeout", ep.Status)
				}
				e.clock.Step(startTimeout + time.Second)
				ep = e.reconcile("ep")
			}
			if ep.Status != StatusFailed || !strings.Contains(ep.FailureReason, tc.want) {
				t.Fatalf("status %s reason %q, want Failed mentioning %s", ep.Status, ep.FailureReason, tc.want)
			}
			if n := len(e.rt.Running()); n != 0 {
				t.Fatalf("%d replicas still running after failure", n)
			}
			if got := e.usage("ml.g5.xlarge"); got != 0 {
				t.Fatalf("failed endpoint still holds %d instances", got)
			}
			// Failed allows Delete and UpdateEndpoint (tested in
			// reservation_test.go), not a capacity change.
			one := 1
			if _, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", InstanceCount: &one}}); err == nil || err.(*Error).Kind != ErrFailedState {
				t.Fatalf("capacity change of failed endpoint: %v", err)
			}
			if err := e.svc.DeleteEndpoint(e.ctx, "ep"); err != nil {
				t.Fatal(err)
			}
			e.reconcile("ep")
			if _, err := e.svc.GetEndpoint(e.ctx, "ep"); !IsNotFound(err) {
				t.Fatalf("after delete: %v", err)
			}
		})
	}
}

func TestBlueGreenUpdate(t *testing.T) {
	e := newEnv(t, true, 4)
	before := e.serving(2)
	old := slices.Clone(before.Current.Variants[0].Replicas)
	e.model("m2", "Qwen/Qwen2.5-7B-Instruct")
	e.config("c2", "m2", "ml.g5.12xlarge", 2)
	// Conflicting calls while Creating/Updating are rejected.
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 4 {
		t.Fatalf("usage during blue/green = %d, want 4", got)
	}
	for _, call := range []func() error{
		func() error { _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c1", UpdateOptions{}); return err },
		func() error {
			_, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", Weight: ptr(2.0)}})
			return err
		},
	} {
		if err := call(); err == nil || err.(*Error).Kind != ErrInProgress {
			t.Fatalf("call during update: %v", err)
		}
	}
	ep := e.reconcile("ep")
	if ep.Status != StatusUpdating || !slices.Equal(e.router.backends("ep"), old) {
		t.Fatalf("before green is healthy: status %s route %v", ep.Status, e.router.backends("ep"))
	}
	e.healthyAll()
	ep = e.reconcile("ep")
	if ep.Status != StatusInService || ep.Current.ConfigName != "c2" || ep.Pending != nil || len(ep.Retiring) != 0 {
		t.Fatalf("after switch: %+v", ep)
	}
	newIDs := ep.Current.Variants[0].Replicas
	if got := e.router.backends("ep"); !slices.Equal(got, newIDs) {
		t.Fatalf("route %v, want %v", got, newIDs)
	}
	if !slices.Equal(e.router.drains, old) {
		t.Fatalf("drained %v, want %v", e.router.drains, old)
	}
	for _, id := range old {
		if r, _ := e.rt.Get(id); r.State != runtime.StateStopped {
			t.Fatalf("old replica %s is %s", id, r.State)
		}
	}
	if got := e.usage("ml.g5.12xlarge"); got != 2 {
		t.Fatalf("usage after switch = %d, want 2", got)
	}
	if e.rt.Starts()[len(e.rt.Starts())-1].Model != "qwen2.5-7b" {
		t.Fatal("green replicas do not run the new model")
	}
}

func TestUpdateRollsBackWhenGreenNeverHealthy(t *testing.T) {
	e := newEnv(t, true, 4)
	before := e.serving(1)
	e.config("c2", "m", "ml.g5.12xlarge", 1)
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.reconcile("ep")
	e.clock.Step(startTimeout + time.Second)
	ep := e.reconcile("ep")
	if ep.Status != StatusInService || ep.Current.ConfigName != "c1" || !strings.Contains(ep.FailureReason, "rolled back") {
		t.Fatalf("after timeout: status %s config %s reason %q", ep.Status, ep.Current.ConfigName, ep.FailureReason)
	}
	if got := e.router.backends("ep"); !slices.Equal(got, before.Current.Variants[0].Replicas) {
		t.Fatalf("route %v", got)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 1 {
		t.Fatalf("usage %d after rollback", got)
	}
}

func ptr[T any](v T) *T { return &v }

func TestWeightsAndCapacities(t *testing.T) {
	e := newEnv(t, true, 4)
	e.serving(2)
	tests := []struct {
		name    string
		count   int
		weight  float64
		wantErr bool
	}{
		{"scale out", 3, 0.5, false},
		{"scale in drains first", 1, 2, false},
		{"beyond the fleet", 5, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", Weight: ptr(tc.weight), InstanceCount: ptr(tc.count)}})
			if tc.wantErr {
				if !fleet.IsLimit(err) {
					t.Fatalf("err = %v, want a fleet limit error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ep := e.reconcile("ep")
			e.healthyAll()
			ep = e.reconcile("ep")
			v := ep.Current.Variants[0]
			if ep.Status != StatusInService || len(v.Replicas) != tc.count || v.Weight != tc.weight {
				t.Fatalf("status %s replicas %v weight %v", ep.Status, v.Replicas, v.Weight)
			}
			if got := e.router.backends("ep"); len(got) != tc.count {
				t.Fatalf("route %v", got)
			}
			if got := e.usage("ml.g5.12xlarge"); got != tc.count {
				t.Fatalf("usage %d", got)
			}
		})
	}
	if len(e.router.drains) != 2 {
		t.Fatalf("drains %v, want the 2 removed replicas", e.router.drains)
	}
	if _, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "Nope", Weight: ptr(1.0)}}); err == nil || !strings.Contains(err.Error(), "Nope") {
		t.Fatalf("unknown variant: %v", err)
	}
}

func TestDeleteStopsReleasesAndRemoves(t *testing.T) {
	e := newEnv(t, false, 4)
	e.serving(2)
	if err := e.svc.DeleteEndpoint(e.ctx, "ep"); err != nil {
		t.Fatal(err)
	}
	e.reconcile("ep")
	if _, err := e.svc.GetEndpoint(e.ctx, "ep"); !IsNotFound(err) {
		t.Fatalf("endpoint survives delete: %v", err)
	}
	if len(e.rt.Running()) != 0 || len(e.router.backends("ep")) != 0 || e.usage("ml.g5.12xlarge") != 0 {
		t.Fatalf("running %v route %v usage %d", e.rt.Running(), e.router.backends("ep"), e.usage("ml.g5.12xlarge"))
	}
}

func TestServiceErrors(t *testing.T) {
	e := newEnv(t, false, 2)
	e.model("m", "llama-3.1-8b")
	e.config("c1", "m", "ml.g5.xlarge", 3)
	tests := []struct {
		name string
		call func() error
		kind ErrorKind
	}{
		{"duplicate model", func() error { _, err := e.svc.CreateModel(e.ctx, Model{Name: "m"}); return err }, ErrAlreadyExists},
		{"config with unknown model", func() error {
			_, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "c9", ProductionVariants: []Variant{{VariantName: "v", ModelName: "nope"}}})
			return err
		}, ErrNotFound},
		{"duplicate config", func() error {
			_, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "c1", ProductionVariants: []Variant{{VariantName: "v", ModelName: "m", InitialInstanceCount: 1}}})
			return err
		}, ErrAlreadyExists},
		{"endpoint with unknown config", func() error { _, err := e.svc.CreateEndpoint(e.ctx, "ep", "nope", nil); return err }, ErrNotFound},
		{"describe unknown endpoint", func() error { _, err := e.svc.GetEndpoint(e.ctx, "nope"); return err }, ErrNotFound},
		{"delete unknown model", func() error { return e.svc.DeleteModel(e.ctx, "nope") }, ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if ee, ok := AsError(err); !ok || ee.Kind != tc.kind {
				t.Fatalf("err = %v, want kind %d", err, tc.kind)
			}
		})
	}
	t.Run("more than the fleet", func(t *testing.T) {
		_, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil)
		var le *fleet.LimitError
		if !errors.As(err, &le) || le.InstanceType != "ml.g5.xlarge" || le.Requested != 3 || le.Total != 2 {
			t.Fatalf("err = %v", err)
		}
		if _, err := e.svc.GetEndpoint(e.ctx, "ep"); !IsNotFound(err) {
			t.Fatal("a rejected create left a record")
		}
	})
}

// TestResumeAfterCrashMidUpdate: a new controller with a fresh runtime (as
// after kill -9 and restart) finishes a half-done update from the record.
func TestResumeAfterCrashMidUpdate(t *testing.T) {
	for _, stage := range []string{"green recorded, not started", "green started, not switched", "switched, blue not retired"} {
		t.Run(stage, func(t *testing.T) {
			e := newEnv(t, false, 4)
			e.serving(2)
			e.config("c2", "m", "ml.g5.12xlarge", 1)
			if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			switch stage {
			case "green started, not switched":
				ep, _ := e.svc.GetEndpoint(e.ctx, "ep")
				ep.Pending.Variants[0].Replicas = []string{"ep.AllTraffic.gen2.0"}
				ep.Pending.Variants[0].NextIndex = 1
				if err := e.ctrl.save(&ep, false); err != nil {
					t.Fatal(err)
				}
				if err := e.ctrl.ensureStarted(e.ctx, &ep, ep.Pending); err != nil {
					t.Fatal(err)
				}
			case "switched, blue not retired":
				ep, _ := e.svc.GetEndpoint(e.ctx, "ep")
				var old []string
				old = append(old, ep.Current.Variants[0].Replicas...)
				ep.Pending.Variants[0].Replicas = []string{"ep.AllTraffic.gen2.0"}
				ep.Pending.Variants[0].NextIndex = 1
				ep.Current, ep.Pending, ep.Retiring = ep.Pending, nil, old
				if err := e.ctrl.save(&ep, false); err != nil {
					t.Fatal(err)
				}
			}
			// Crash: a new runtime (nothing runs) and a new controller.
			rt2 := fake.New(fake.WithClock(e.clock))
			rt2.SetDefaultAddr("127.0.0.1:1")
			e.router.rt = rt2
			e.ctrl = e.newController(rt2)
			ep := e.reconcile("ep")
			if ep.Status == StatusUpdating {
				ep = e.reconcile("ep")
			}
			if ep.Status != StatusInService || ep.Current.ConfigName != "c2" || ep.Pending != nil || len(ep.Retiring) != 0 {
				t.Fatalf("after resume: %+v", ep)
			}
			want := ep.Current.Variants[0].Replicas
			if got := rt2.Running(); !slices.Equal(got, want) {
				t.Fatalf("running %v, want %v", got, want)
			}
			if got := e.router.backends("ep"); !slices.Equal(got, want) {
				t.Fatalf("route %v, want %v", got, want)
			}
			if got := e.usage("ml.g5.12xlarge"); got != 1 {
				t.Fatalf("usage %d", got)
			}
		})
	}
}

func TestRunLoopDrivesEndpointsFromStoreChanges(t *testing.T) {
	e := newEnv(t, false, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.ctrl.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	e.model("m", "llama-3.1-8b")
	e.config("c1", "m", "ml.g5.xlarge", 1)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ep, err := e.svc.GetEndpoint(e.ctx, "ep")
		if err == nil && ep.Status == StatusInService {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not InService: %+v %v", ep, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShutdownDoesNotFailDeployments: a Start refused because the server is
// stopping (ctx cancelled) must not fail the endpoint or roll back an update.
func TestShutdownDoesNotFailDeployments(t *testing.T) {
	e := newEnv(t, false, 4)
	e.model("m", "llama-3.1-8b")
	e.config("c1", "m", "ml.g5.xlarge", 1)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.ctrl.Reconcile(ctx, "ep"); !errors.Is(err, context.Canceled) {
		t.Fatalf("reconcile with cancelled ctx: %v", err)
	}
	ep, _ := e.svc.GetEndpoint(e.ctx, "ep")
	if ep.Status != StatusCreating || ep.FailureReason != "" {
		t.Fatalf("after shutdown: %s %q", ep.Status, ep.FailureReason)
	}
	if ep = e.reconcile("ep"); ep.Status != StatusInService {
		t.Fatalf("after restart: %s", ep.Status)
	}
}
