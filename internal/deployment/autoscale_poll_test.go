package deployment

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
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
	h := newHarness(t, withTriggers(nil, trig))
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

// pressureRig is one deployment (min 1, max 6, polling every 10 s, no
// scale-up window) whose only trigger is a peekable fake. Tests drive it by
// hand: peekAt does what the peek ticker would, then reconciles.
type pressureRig struct {
	h     *harness
	name  string
	k     string
	st    *objState
	trig  *autoscale.FakeTrigger
	peeks atomic.Int64
	start time.Time // the scaler's creation; its first poll is due at +10 s
}

func newPressureRig(t *testing.T, name string, target autoscale.Target, initial float64, opts ...harnessOpt) *pressureRig {
	r := &pressureRig{name: name, trig: autoscale.NewFakeTrigger("pressure", target)}
	r.h = newHarness(t, append(opts, withTriggers(nil, peekable{r.trig, &r.peeks}))...)
	r.h.rt.SetDefaultAddr(chatBackend(t))
	r.h.apply(iec(name, 1, 1, `  autoScalingSpec:
    minReplicaCount: 1
    maxReplicaCount: 6
    pollingInterval: 10
    scaleUpStabilizationTime: 0
    scaleDownStabilizationTime: 0
`))
	r.k = kIEC(name)
	r.trig.Set(initial)
	r.h.reconcile(r.k)
	r.start = r.h.clk.Now()
	r.st = r.h.svc.Controller().state(r.k)
	return r
}

// polls counts the trigger's reads by polls, peeks left out.
func (r *pressureRig) polls() int { return r.trig.Calls() - int(r.peeks.Load()) }

func (r *pressureRig) peekAt(at time.Duration) {
	r.h.clk.Set(r.start.Add(at))
	r.h.svc.Controller().watchPressure(context.Background(), r.k, r.st)
}

func (r *pressureRig) replicas() int { return len(r.h.running("iec.default." + r.name + ".")) }

// TestPressureRunsPollEarly: between two scheduled polls (10 s apart) a peek
// that asks for more replicas runs the poll at once; a poll run early that
// changes nothing quiets the watch until the next scheduled poll, and the
// schedule itself never moves.
func TestPressureRunsPollEarly(t *testing.T) {
	r := newPressureRig(t, "burst", autoscale.Target{Type: autoscale.AverageValue, Value: 1}, 1)
	steps := []struct {
		name         string
		at           time.Duration
		peek         float64 // the trigger's value when the peek reads it
		poll         float64 // and when the poll reads it; 0 = same
		wantPolls    int
		wantReplicas int
	}{
		{"a peek without pressure does nothing", 1 * time.Second, 1, 0, 0, 1},
		{"a burst: the poll runs now, 8 s early", 2 * time.Second, 3, 0, 1, 3},
		{"the scheduled poll still runs at +10 s", 10 * time.Second, 3, 0, 2, 3},
		{"an early poll that changes nothing (the burst gone by then)", 11 * time.Second, 5, 3, 3, 3},
		{"then the watch is quiet until the next scheduled poll", 12 * time.Second, 5, 0, 3, 3},
		{"which runs on time", 20 * time.Second, 5, 0, 4, 5},
	}
	for _, s := range steps {
		r.trig.Set(s.peek)
		r.peekAt(s.at)
		if s.poll != 0 {
			r.trig.Set(s.poll)
		}
		r.h.reconcile(r.k)
		if n, got := r.polls(), r.replicas(); n != s.wantPolls || got != s.wantReplicas {
			t.Fatalf("%s: polled %d times (want %d), %d replicas (want %d)", s.name, n, s.wantPolls, got, s.wantReplicas)
		}
	}
}

// TestPressureWaitsForStartingReplicas: while replicas decided by a poll
// are still starting, peeks run no early poll (per-replica values still
// divide by the replicas serving, and would ask again for what is on its
// way); once they serve, the watch is back.
func TestPressureWaitsForStartingReplicas(t *testing.T) {
	r := newPressureRig(t, "slow", autoscale.Target{Type: autoscale.Value, Value: 10}, 10, manualRuntime())
	healthy := func() {
		for _, id := range r.h.running("iec.default.slow.") {
			r.h.rt.SetState(id, runtime.StateHealthy, "")
		}
		r.h.reconcile(r.k)
	}
	healthy()
	steps := []struct {
		name                    string
		at                      time.Duration
		value                   float64
		healthy                 bool // mark every replica serving first
		wantPolls, wantReplicas int
	}{
		{"twice the target: 1 → 2", 1 * time.Second, 20, false, 1, 2},
		{"the new replica is starting: no early poll", 2 * time.Second, 20, false, 1, 2},
		{"both serve, 1.5 × target: 2 → 3", 3 * time.Second, 15, true, 2, 3},
	}
	for _, s := range steps {
		if s.healthy {
			healthy()
		}
		r.trig.Set(s.value)
		r.peekAt(s.at)
		r.h.reconcile(r.k)
		if n, got := r.polls(), r.replicas(); n != s.wantPolls || got != s.wantReplicas {
			t.Fatalf("%s: polled %d times (want %d), %d replicas (want %d)", s.name, n, s.wantPolls, got, s.wantReplicas)
		}
	}
}
