package endpoint

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// gaugeSeries returns the series of gauge name in reg, keyed by their label
// values joined with spaces, in label-name order.
func gaugeSeries(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var vs []string
			for _, l := range m.GetLabel() {
				vs = append(vs, l.GetValue())
			}
			got[strings.Join(vs, " ")] = m.GetGauge().GetValue()
		}
	}
	return got
}

// withMetrics replaces e's controller by one registering its metrics in a
// fresh registry.
func (e *env) withMetrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	eng := serving.New(serving.Options{Runtime: e.rt, Router: e.router, EngineArgs: []string{"--time-scale=0.01"}})
	e.ctrl = NewController(e.store, e.fleet, eng, e.clock, nil, Options{StartTimeout: startTimeout, Registerer: reg})
	return reg
}

// capstan_endpoint_replicas follows the variant's desired instance count
// and the replicas that actually serve, read at scrape time: starting
// replicas are not ready, a replica that fails stops counting at once, a
// capacity change moves desired before the new replica is up, and a
// deleted endpoint has no series.
func TestEndpointReplicasGauge(t *testing.T) {
	e := newEnv(t, true, 4)
	reg := e.withMetrics()
	e.model("m", "meta-llama/Llama-3.1-8B-Instruct")
	e.config("c1", "m", "ml.g5.12xlarge", 2)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c1", nil); err != nil {
		t.Fatal(err)
	}
	want := func(desired, ready float64) map[string]float64 {
		return map[string]float64{"ep desired AllTraffic": desired, "ep ready AllTraffic": ready}
	}
	check := func(step string, want map[string]float64) {
		t.Helper()
		if got := gaugeSeries(t, reg, "capstan_endpoint_replicas"); !maps.Equal(got, want) {
			t.Fatalf("%s: capstan_endpoint_replicas %v, want %v", step, got, want)
		}
	}
	check("created, not reconciled", want(2, 0))
	ep := e.reconcile("ep")
	check("replicas starting", want(2, 0))
	_ = e.rt.SetState(ep.Pending.Variants[0].Replicas[0], runtime.StateHealthy, "")
	check("one healthy", want(2, 1))
	e.healthyAll()
	ep = e.reconcile("ep")
	if ep.Status != StatusInService {
		t.Fatalf("status %s", ep.Status)
	}
	check("InService", want(2, 2))

	_ = e.rt.SetState(ep.Current.Variants[0].Replicas[1], runtime.StateFailed, "crashed")
	check("one failed", want(2, 1))
	_ = e.rt.SetState(ep.Current.Variants[0].Replicas[1], runtime.StateHealthy, "")

	three := 3
	if _, err := e.svc.UpdateWeightsAndCapacities(e.ctx, "ep", []Desired{{VariantName: "AllTraffic", InstanceCount: &three}}); err != nil {
		t.Fatal(err)
	}
	check("scale-out asked", want(3, 2))
	e.reconcile("ep")
	check("third replica starting", want(3, 2))
	e.healthyAll()
	e.reconcile("ep")
	check("scaled out", want(3, 3))

	if err := e.svc.DeleteEndpoint(e.ctx, "ep"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.reconcile("ep")
	}
	check("deleted", map[string]float64{})
}

// capstan_endpoint_on_expired_plan is 0 for an endpoint on a running
// training plan, 1 once the plan has ended (the controller takes its
// instances back and the endpoint serves nothing), and goes away when the
// endpoint is updated to an on-demand configuration.
func TestEndpointOnExpiredPlanGauge(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Date(2030, 1, 6, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	const p5 = "ml.p5.48xlarge"
	cal, err := capacity.New(st, catalog.Default(), clk, map[string]map[string]int{p5: {"a": 4}})
	if err != nil {
		t.Fatal(err)
	}
	offers, err := cal.Search(capacity.Query{InstanceType: p5, Count: 2, Duration: 24 * time.Hour, TargetResources: []string{"endpoint"}})
	if err != nil || len(offers) == 0 {
		t.Fatalf("search: %v %v", offers, err)
	}
	plan, err := cal.CreatePlan("Plan-A", offers[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := fake.New(fake.WithClock(clk), fake.Manual())
	rt.SetDefaultAddr("127.0.0.1:1")
	e := &env{t: t, store: st, clock: clk, rt: rt, router: &fakeRouter{t: t, rt: rt, routes: map[string]gateway.Route{}}, ctx: context.Background()}
	e.svc = NewService(st, cal, catalog.Default(), clk, nil)
	e.svc.SetReservations(cal)
	reg := prometheus.NewRegistry()
	eng := serving.New(serving.Options{Runtime: rt, Router: e.router})
	e.ctrl = NewController(st, cal, eng, clk, nil, Options{StartTimeout: startTimeout, Reservations: cal, Registerer: reg})

	e.model("m", "meta-llama/Llama-3.1-8B-Instruct")
	arn := "arn:aws:sagemaker:us-east-1:000000000000:training-plan/Plan-A"
	if _, err := e.svc.CreateEndpointConfig(e.ctx, EndpointConfig{Name: "reserved", ProductionVariants: []Variant{{VariantName: "AllTraffic", ModelName: "m",
		InstanceType: p5, InitialInstanceCount: 2, CapacityReservationConfig: &CapacityReservationConfig{
			CapacityReservationPreference: PreferenceReservedOnly, MlReservationArn: arn}}}}); err != nil {
		t.Fatal(err)
	}
	e.config("ondemand", "m", p5, 1)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "reserved", nil); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want map[string]float64) {
		t.Helper()
		if got := gaugeSeries(t, reg, "capstan_endpoint_on_expired_plan"); !maps.Equal(got, want) {
			t.Fatalf("%s: capstan_endpoint_on_expired_plan %v, want %v", step, got, want)
		}
	}
	check("waiting for the plan", map[string]float64{"ep Plan-A": 0})
	clk.Set(plan.Start.Add(time.Minute))
	e.reconcile("ep")
	e.healthyAll()
	if ep := e.reconcile("ep"); ep.Status != StatusInService {
		t.Fatalf("status %s (%s)", ep.Status, ep.FailureReason)
	}
	check("serving on the plan", map[string]float64{"ep Plan-A": 0})
	clk.Set(plan.End)
	check("plan ended, not yet reconciled", map[string]float64{"ep Plan-A": 1})
	ep := e.reconcile("ep")
	if !ep.ReservationExpired || ep.Status != StatusFailed {
		t.Fatalf("after the plan's end: status %s expired %v", ep.Status, ep.ReservationExpired)
	}
	check("expired", map[string]float64{"ep Plan-A": 1})
	if got := gaugeSeries(t, reg, "capstan_endpoint_replicas"); got["ep ready AllTraffic"] != 0 || got["ep desired AllTraffic"] != 0 {
		t.Fatalf("replicas of the expired endpoint: %v", got)
	}

	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "ondemand", UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.healthyAll()
		if ep = e.reconcile("ep"); ep.Status == StatusInService {
			break
		}
	}
	if ep.Status != StatusInService {
		t.Fatalf("update to on-demand: status %s (%s)", ep.Status, ep.FailureReason)
	}
	check("updated to on-demand", map[string]float64{})
}
