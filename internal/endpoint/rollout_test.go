package endpoint

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/alarm"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
)

func rolling(batch int) *serving.Policy {
	return &serving.Policy{Rolling: &serving.Rolling{Batch: serving.Size{Unit: serving.Instances, Value: batch}}}
}

// drive reconciles ep, marking every started replica healthy, until it is
// no longer Updating (at most n rounds).
func (e *env) drive(n int) Endpoint {
	e.t.Helper()
	var ep Endpoint
	for range n {
		ep = e.reconcile("ep")
		e.healthyAll()
		if ep.Status != StatusUpdating {
			return ep
		}
	}
	return ep
}

func (e *env) route() (weights map[string]float64, activator bool) {
	e.router.mu.Lock()
	defer e.router.mu.Unlock()
	r := e.router.routes["ep"]
	weights = map[string]float64{}
	for _, v := range r.Variants {
		weights[v.Name+"/"+v.Revision] += v.Weight
	}
	return weights, r.Activator != nil
}

// TestRollingUpdateOnExactCapacity: one instance of capacity, one serving.
// Blue/green cannot fit; a rolling update replaces the replica in place,
// holding requests (activator) while neither side serves.
func TestRollingUpdateOnExactCapacity(t *testing.T) {
	e := newEnv(t, true, 1)
	before := e.serving(1)
	old := before.Current.Variants[0].Replicas[0]
	e.model("m2", "Qwen/Qwen2.5-7B-Instruct")
	e.config("c2", "m2", "ml.g5.12xlarge", 1)

	_, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{})
	var uce *UpdateCapacityError
	if !errors.As(err, &uce) || uce.Serving != 1 || uce.Needed != 1 {
		t.Fatalf("blue/green on exact capacity: %v, want an UpdateCapacityError serving 1, needing 1", err)
	}
	if ep, _ := e.svc.GetEndpoint(e.ctx, "ep"); ep.Status != StatusInService || ep.Pending != nil {
		t.Fatalf("a refused update changed the endpoint: %+v", ep)
	}

	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{Policy: rolling(1)}); err != nil {
		t.Fatal(err)
	}
	ep := e.reconcile("ep")
	if ep.Status != StatusUpdating || len(ep.Current.Variants[0].Replicas) != 0 || len(ep.Pending.Variants[0].Replicas) != 1 {
		t.Fatalf("after the first step: %+v", ep)
	}
	if r, _ := e.rt.Get(old); r.State != runtime.StateStopped {
		t.Fatalf("old replica %s is %s; it must make room first", old, r.State)
	}
	if _, held := e.route(); !held {
		t.Fatal("no replica serves and the route does not hold requests")
	}
	if got := e.usage("ml.g5.12xlarge"); got != 1 {
		t.Fatalf("usage during the rolling update = %d, want 1", got)
	}
	e.healthyAll()
	ep = e.reconcile("ep")
	if ep.Status != StatusInService || ep.Current.ConfigName != "c2" || ep.Rollout != nil || ep.LastPolicy == nil || ep.LastPolicy.Rolling == nil {
		t.Fatalf("after the rolling update: %+v", ep)
	}
	if got := e.router.backends("ep"); !slices.Equal(got, ep.Current.Variants[0].Replicas) {
		t.Fatalf("route %v", got)
	}
	if _, held := e.route(); held {
		t.Fatal("the route still holds requests with a replica serving")
	}
	if e.rt.Starts()[len(e.rt.Starts())-1].Model != "qwen2.5-7b" {
		t.Fatal("the new replica does not run the new model")
	}
}

// TestRollingSurgesWhenRoomAllows: with spare capacity a batch starts
// beside the old replicas, which retire one by one as new ones serve.
func TestRollingSurgesWhenRoomAllows(t *testing.T) {
	e := newEnv(t, true, 3)
	e.serving(2)
	e.config("c2", "m", "ml.g5.12xlarge", 2)
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{Policy: rolling(1)}); err != nil {
		t.Fatal(err)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 3 {
		t.Fatalf("usage = %d, want the larger side plus one batch (3)", got)
	}
	ep := e.reconcile("ep")
	if n := len(ep.Current.Variants[0].Replicas); n != 2 {
		t.Fatalf("old replicas = %d before any new one serves, want 2", n)
	}
	minServing := 2
	for range 10 {
		e.healthyAll()
		ep = e.reconcile("ep")
		minServing = min(minServing, len(e.router.backends("ep")))
		if ep.Status != StatusUpdating {
			break
		}
	}
	if ep.Status != StatusInService || ep.Current.ConfigName != "c2" {
		t.Fatalf("after the update: %+v", ep)
	}
	if minServing < 2 {
		t.Fatalf("serving replicas dropped to %d; with room for a batch it must not", minServing)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 2 {
		t.Fatalf("usage after = %d, want 2", got)
	}
}

func TestCanaryShiftsTraffic(t *testing.T) {
	e := newEnv(t, true, 4)
	e.serving(2)
	e.config("c2", "m", "ml.g5.12xlarge", 2)
	policy := &serving.Policy{BlueGreen: &serving.BlueGreen{Traffic: serving.Canary,
		Step: serving.Size{Unit: serving.Instances, Value: 1}, Wait: time.Minute, TerminationWait: 30 * time.Second}}
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{Policy: policy}); err != nil {
		t.Fatal(err)
	}
	e.reconcile("ep")
	e.healthyAll()
	e.reconcile("ep")
	w, _ := e.route()
	if w["AllTraffic/"] != 0.5 || w["AllTraffic/gen2"] != 0.5 {
		t.Fatalf("canary weights %v, want half each", w)
	}
	e.clock.Step(30 * time.Second)
	if e.reconcile("ep"); e.mustRoute()["AllTraffic/gen2"] != 0.5 {
		t.Fatal("the canary moved on before its wait")
	}
	e.clock.Step(30 * time.Second)
	e.reconcile("ep")
	if w := e.mustRoute(); w["AllTraffic/"] != 0 || w["AllTraffic/gen2"] != 1 {
		t.Fatalf("after the canary: %v, want all traffic on gen2", w)
	}
	if ep, _ := e.svc.GetEndpoint(e.ctx, "ep"); len(ep.Current.Variants[0].Replicas) != 2 {
		t.Fatal("the old side retired before its termination wait")
	}
	e.clock.Step(30 * time.Second)
	ep := e.reconcile("ep")
	if ep.Status != StatusInService || ep.Current.ConfigName != "c2" || len(ep.Retiring) != 0 {
		t.Fatalf("after termination wait: %+v", ep)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 2 {
		t.Fatalf("usage = %d, want 2", got)
	}
}

func (e *env) mustRoute() map[string]float64 { w, _ := e.route(); return w }

// TestMaxDurationRollsBack: a rolling update still waiting between batches
// when MaxDuration passes is rolled back in batches, and says so.
func TestMaxDurationRollsBack(t *testing.T) {
	e := newEnv(t, true, 3)
	before := e.serving(2)
	e.model("m2", "Qwen/Qwen2.5-7B-Instruct")
	e.config("c2", "m2", "ml.g5.12xlarge", 2)
	policy := rolling(1)
	policy.Rolling.Wait = 20 * time.Minute
	policy.MaxDuration = 10 * time.Minute
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{Policy: policy}); err != nil {
		t.Fatal(err)
	}
	e.drive(3) // first batch up, one old retired, waiting
	ep, _ := e.svc.GetEndpoint(e.ctx, "ep")
	if ep.Status != StatusUpdating || len(ep.Current.Variants[0].Replicas) != 1 {
		t.Fatalf("mid-update: %+v", ep)
	}
	e.clock.Step(11 * time.Minute)
	ep = e.drive(10)
	if ep.Status != StatusInService || ep.Current.ConfigName != "c1" || ep.Pending != nil {
		t.Fatalf("after the timeout: %+v", ep)
	}
	if !strings.Contains(ep.FailureReason, "rolled back") || !strings.Contains(ep.FailureReason, "maximum execution time") {
		t.Fatalf("FailureReason %q does not say it rolled back on the timeout", ep.FailureReason)
	}
	if n := len(ep.Current.Variants[0].Replicas); n != 2 {
		t.Fatalf("old side back to %d replicas, want 2", n)
	}
	if got := e.rt.Starts()[len(e.rt.Starts())-1].Model; got != before.Current.Variants[0].Model {
		t.Fatalf("the rollback started %s, want the old model", got)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 2 {
		t.Fatalf("usage = %d, want 2", got)
	}
}

// alarms adapts the real evaluator to the controller's seam.
type alarms struct{ ev *alarm.Evaluator }

func (a alarms) Known(names []string) error { return a.ev.Known(names) }
func (a alarms) Arm(ep string, names []string) (AlarmWatch, error) {
	return a.ev.Arm(context.Background(), ep, names)
}

func TestAlarmRollsBack(t *testing.T) {
	e := newEnv(t, true, 4)
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_gateway_requests_total"}, []string{"endpoint", "variant", "status"})
	reg.MustRegister(reqs)
	reqs.WithLabelValues("ep", "AllTraffic", "500").Add(3) // before the update: not counted
	ev, err := alarm.NewEvaluator(reg, []alarm.Alarm{{Name: "errors", Metric: "capstan_gateway_requests_total",
		Labels: map[string]string{"status": "5xx"}, Comparison: alarm.GreaterThanThreshold, Threshold: 0}})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.SetAlarms(alarms{ev})
	e.ctrl.opts.Alarms = alarms{ev}
	e.serving(1)
	e.config("c2", "m", "ml.g5.12xlarge", 1)
	policy := &serving.Policy{BlueGreen: &serving.BlueGreen{Traffic: serving.AllAtOnce, TerminationWait: 10 * time.Minute}, Alarms: []string{"nope"}}
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{Policy: policy}); !alarm.IsUnknownAlarm(err) {
		t.Fatalf("unknown alarm: %v", err)
	}
	policy.Alarms = []string{"errors"}
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{Policy: policy}); err != nil {
		t.Fatal(err)
	}
	e.drive(3) // green up, all traffic moved, baking in the termination wait
	if ep, _ := e.svc.GetEndpoint(e.ctx, "ep"); ep.Status != StatusUpdating {
		t.Fatalf("before the alarm: %s", ep.Status)
	}
	reqs.WithLabelValues("ep", "AllTraffic", "503").Inc()
	ep := e.drive(3)
	if ep.Status != StatusInService || ep.Current.ConfigName != "c1" || !strings.Contains(ep.FailureReason, `alarm "errors"`) {
		t.Fatalf("after the alarm: %s %s %q", ep.Status, ep.Current.ConfigName, ep.FailureReason)
	}
	if got := e.router.backends("ep"); !slices.Equal(got, ep.Current.Variants[0].Replicas) {
		t.Fatalf("route %v after the rollback", got)
	}
}

// TestRollingResumesAfterCrash: a crash mid-rollout (new runtime, new
// controller, same store) finishes the rollout and loses no replica.
func TestRollingResumesAfterCrash(t *testing.T) {
	e := newEnv(t, true, 2)
	e.serving(2)
	e.config("c2", "m", "ml.g5.12xlarge", 2)
	if _, err := e.svc.UpdateEndpoint(e.ctx, "ep", "c2", UpdateOptions{Policy: rolling(1)}); err != nil {
		t.Fatal(err)
	}
	e.reconcile("ep") // makes room: one old replica retires, one new recorded
	mid, _ := e.svc.GetEndpoint(e.ctx, "ep")
	if len(mid.Pending.Variants[0].Replicas) != 1 || len(mid.Current.Variants[0].Replicas) != 1 {
		t.Fatalf("mid-rollout: %+v", mid)
	}
	rt2 := fake.New(fake.WithClock(e.clock), fake.Manual())
	rt2.SetDefaultAddr("127.0.0.1:1")
	e.router.rt, e.rt = rt2, rt2
	e.ctrl = e.newController(rt2)
	ep := e.drive(10)
	if ep.Status != StatusInService || ep.Current.ConfigName != "c2" || len(ep.Current.Variants[0].Replicas) != 2 {
		t.Fatalf("after resume: %+v", ep)
	}
	if !slices.Contains(ep.Current.Variants[0].Replicas, mid.Pending.Variants[0].Replicas[0]) {
		t.Fatalf("the replica recorded before the crash (%s) is not in %v", mid.Pending.Variants[0].Replicas[0], ep.Current.Variants[0].Replicas)
	}
	if got := rt2.Running(); !slices.Equal(got, ep.Current.Variants[0].Replicas) {
		t.Fatalf("running %v, want %v", got, ep.Current.Variants[0].Replicas)
	}
	if got := e.usage("ml.g5.12xlarge"); got != 2 {
		t.Fatalf("usage %d", got)
	}
}
