package deployment

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime"
)

const pollEverySecond = `  autoScalingSpec:
    minReplicaCount: 1
    maxReplicaCount: 4
    pollingInterval: 1
    scaleDownStabilizationTime: 0
`

// TestAutoscalePollCadenceUnderJitter steps the fake clock to the instants
// at which reconciles would run under Run: one per polling tick, each a few
// milliseconds late by a varying amount, plus reconciles between ticks
// (runtime events). Every tick must poll the triggers exactly once and the
// reconciles in between never: a tick that is less late than the previous
// one used to land just before the next poll and be skipped, halving the
// polling rate.
func TestAutoscalePollCadenceUnderJitter(t *testing.T) {
	trig := autoscale.NewFakeTrigger("inflight", autoscale.Target{Type: autoscale.Value, Value: 4})
	builder := func(spec *manifest.AutoScalingSpec, env triggers.Env) (autoscale.Config, []autoscale.Trigger, error) {
		cfg, _, err := triggers.Build(spec, env)
		return cfg, []autoscale.Trigger{trig}, err
	}
	h := newHarness(t, func(o *Options, _ *harnessConfig) { o.Triggers = builder })
	h.rt.SetDefaultAddr(chatBackend(t))
	h.apply(iec("poll", 1, 1, pollEverySecond))
	k := kIEC("poll")
	start := h.clk.Now()
	// The first reconcile builds the scaler; its first poll is due at +1 s.
	if err := h.svc.Controller().Reconcile(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if n := trig.Calls(); n != 0 {
		t.Fatalf("trigger read %d times before the first poll was due", n)
	}

	const ms = time.Millisecond
	steps := []struct {
		at   time.Duration // since the scaler was built
		poll bool
	}{
		{1000*ms + 30*ms, true},
		{1500 * ms, false}, // a runtime event between ticks
		{2000*ms + 5*ms, true},
		{3000*ms + 1*ms, true},
		{3000*ms + 50*ms, false}, // a second reconcile right after a poll
		{3600 * ms, false},
		{4000*ms + 40*ms, true},
		{5000 * ms, true},
		{5000*ms + 80*ms, false},
		{9000 * ms, true}, // after a stall: polls at once, then every second from here
		{9500 * ms, false},
		{10000*ms + 2*ms, true},
	}
	for _, s := range steps {
		t.Run(fmt.Sprintf("at %v", s.at), func(t *testing.T) {
			h.clk.Set(start.Add(s.at))
			before := trig.Calls()
			if err := h.svc.Controller().Reconcile(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			polled := trig.Calls() - before
			want := 0
			if s.poll {
				want = 1
			}
			if polled != want {
				t.Errorf("trigger read %d times, want %d", polled, want)
			}
		})
	}
}

// TestPollSchedule checks the schedule arithmetic on its own: the slack
// before a due poll and the anchoring of the next one.
func TestPollSchedule(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	const every = 10 * time.Second
	cases := []struct {
		name     string
		now      time.Duration // since t0; the poll is due at t0
		due      bool
		wantNext time.Duration
	}{
		{"well before", -5 * time.Second, false, 0},
		{"just outside the slack", -every/pollSlack - time.Millisecond, false, 0},
		{"within the slack", -every / pollSlack, true, every},
		{"on time", 0, true, every},
		{"late", 3 * time.Second, true, every},
		{"a whole interval late", every, true, 2 * every},
		{"far behind", 35 * time.Second, true, 45 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := t0.Add(c.now)
			if got := pollDue(now, t0, every); got != c.due {
				t.Fatalf("pollDue = %v, want %v", got, c.due)
			}
			if !c.due {
				return
			}
			if got := nextPoll(now, t0, every).Sub(t0); got != c.wantNext {
				t.Errorf("nextPoll = t0%+v, want t0%+v", got, c.wantNext)
			}
		})
	}
}

// peekable makes a FakeTrigger an autoscale.Peeker, as the cloudWatch
// triggers are; peeks are counted apart from the polls' reads.
type peekable struct {
	*autoscale.FakeTrigger
	peeks *atomic.Int64
}

func (p peekable) Peek(ctx context.Context) (float64, error) {
	p.peeks.Add(1)
	return p.Value(ctx)
}

// TestPressureRunsPollEarly: between two scheduled polls (10 s apart) a peek
// that asks for more replicas runs the poll at once; a poll run early that
// changes nothing (here the scale-up stabilization window holds it) quiets
// the watch until the next scheduled poll, and the schedule itself never
// moves.
func TestPressureRunsPollEarly(t *testing.T) {
	trig := autoscale.NewFakeTrigger("rate", autoscale.Target{Type: autoscale.AverageValue, Value: 1})
	var peeks atomic.Int64
	builder := func(spec *manifest.AutoScalingSpec, env triggers.Env) (autoscale.Config, []autoscale.Trigger, error) {
		cfg, _, err := triggers.Build(spec, env)
		return cfg, []autoscale.Trigger{peekable{trig, &peeks}}, err
	}
	h := newHarness(t, func(o *Options, _ *harnessConfig) { o.Triggers = builder })
	h.rt.SetDefaultAddr(chatBackend(t))
	h.apply(iec("burst", 1, 1, `  autoScalingSpec:
    minReplicaCount: 1
    maxReplicaCount: 6
    pollingInterval: 10
    scaleUpStabilizationTime: 0
    scaleDownStabilizationTime: 0
`))
	k := kIEC("burst")
	ctrl := h.svc.Controller()
	ctx := context.Background()
	trig.Set(1)
	h.reconcile(k) // builds the scaler; the first poll is due at +10 s
	start := h.clk.Now()
	st := ctrl.state(k)
	polls := func() int { return trig.Calls() - int(peeks.Load()) }

	// A peek without pressure does nothing.
	h.clk.Set(start.Add(time.Second))
	ctrl.watchPressure(ctx, k, st)
	h.reconcile(k)
	if n := polls(); n != 0 {
		t.Fatalf("polled %d times without pressure before the schedule", n)
	}

	// A burst: the next peek runs the poll now, 8 s before its time.
	trig.Set(3)
	h.clk.Set(start.Add(2 * time.Second))
	ctrl.watchPressure(ctx, k, st)
	h.reconcile(k)
	if n := polls(); n != 1 {
		t.Fatalf("polled %d times after a peek under pressure, want 1", n)
	}
	if got := h.running("iec.default.burst."); len(got) != 3 {
		t.Fatalf("running %v after the early poll, want 3 replicas", got)
	}
	// The scheduled poll still runs at +10 s.
	h.clk.Set(start.Add(10 * time.Second))
	h.reconcile(k)
	if n := polls(); n != 2 {
		t.Fatalf("polled %d times by the scheduled time, want 2", n)
	}

	// An early poll that changes nothing (the burst was gone by the time
	// the poll read the trigger) quiets the watch until the next scheduled
	// poll, which runs on time.
	h.clk.Set(start.Add(11 * time.Second))
	trig.Set(5)
	ctrl.watchPressure(ctx, k, st)
	trig.Set(3)
	h.reconcile(k)
	if n := polls(); n != 3 {
		t.Fatalf("polled %d times after the second peek under pressure, want 3", n)
	}
	h.clk.Set(start.Add(12 * time.Second))
	trig.Set(5)
	ctrl.watchPressure(ctx, k, st)
	h.reconcile(k)
	if n := polls(); n != 3 {
		t.Fatalf("polled %d times: the watch should be quiet until the next scheduled poll", n)
	}
	h.clk.Set(start.Add(20 * time.Second))
	h.reconcile(k)
	if n, got := polls(), h.running("iec.default.burst."); n != 4 || len(got) != 5 {
		t.Fatalf("scheduled poll: polled %d times (want 4), running %v (want 5)", n, got)
	}
}

// TestPressureWaitsForStartingReplicas: while replicas decided by a poll
// are still starting, peeks run no early poll (per-replica values still
// divide by the replicas serving, and would ask again for what is on its
// way); once they serve, the watch is back.
func TestPressureWaitsForStartingReplicas(t *testing.T) {
	trig := autoscale.NewFakeTrigger("inflight", autoscale.Target{Type: autoscale.Value, Value: 10})
	var peeks atomic.Int64
	builder := func(spec *manifest.AutoScalingSpec, env triggers.Env) (autoscale.Config, []autoscale.Trigger, error) {
		cfg, _, err := triggers.Build(spec, env)
		return cfg, []autoscale.Trigger{peekable{trig, &peeks}}, err
	}
	h := newHarness(t, manualRuntime(), func(o *Options, _ *harnessConfig) { o.Triggers = builder })
	h.apply(iec("slow", 1, 1, `  autoScalingSpec:
    minReplicaCount: 1
    maxReplicaCount: 6
    pollingInterval: 10
    scaleUpStabilizationTime: 0
`))
	k := kIEC("slow")
	ctrl := h.svc.Controller()
	ctx := context.Background()
	trig.Set(10)
	h.reconcile(k)
	healthy := func() {
		for _, id := range h.running("iec.default.slow.") {
			h.rt.SetState(id, runtime.StateHealthy, "")
		}
		h.reconcile(k)
	}
	healthy()
	start := h.clk.Now()
	st := ctrl.state(k)
	polls := func() int { return trig.Calls() - int(peeks.Load()) }

	trig.Set(20) // twice the target: 1 → 2
	h.clk.Set(start.Add(time.Second))
	ctrl.watchPressure(ctx, k, st)
	h.reconcile(k)
	if n, got := polls(), h.running("iec.default.slow."); n != 1 || len(got) != 2 {
		t.Fatalf("after the first peek: polled %d times (want 1), running %v (want 2)", n, got)
	}
	// The second replica is starting; the value has not moved.
	h.clk.Set(start.Add(2 * time.Second))
	ctrl.watchPressure(ctx, k, st)
	h.reconcile(k)
	if n := polls(); n != 1 {
		t.Fatalf("polled %d times while the new replica was starting, want 1", n)
	}
	healthy()
	trig.Set(15) // 1.5 × target at 2 replicas: 2 → 3
	h.clk.Set(start.Add(3 * time.Second))
	ctrl.watchPressure(ctx, k, st)
	h.reconcile(k)
	if n, got := polls(), h.running("iec.default.slow."); n != 2 || len(got) != 3 {
		t.Fatalf("once both serve: polled %d times (want 2), running %v (want 3)", n, got)
	}
}
