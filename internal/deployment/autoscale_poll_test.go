package deployment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/manifest"
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
