package autoscale

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestHyperPodTrace drives a scale-to-zero HyperPod spec (the docs' worked
// example: polling 15 s, initial cooldown 60 s, cooldown 120 s, scale-down
// stabilisation 60 s) through a load curve with a metrics outage, and
// compares the decision trace with a reviewed golden file. Each line was
// checked by hand against the rules in autoscaling.md §1.6 and §2.2–2.3.
func TestHyperPodTrace(t *testing.T) {
	cfg := HyperPodDefaults()
	cfg.MinReplicas = 0
	cfg.PollingInterval = 15 * time.Second
	cfg.InitialCooldownPeriod = 60 * time.Second
	cfg.CooldownPeriod = 120 * time.Second
	cfg.Behavior.ScaleDown.StabilizationWindow = dur(60 * time.Second)
	cfg.Fallback = &Fallback{FailureThreshold: 2, Replicas: 3}

	clk := clock.NewFake(epoch)
	queue := NewFakeTrigger("queue", Target{Type: AverageValue, Value: 5, Activation: 0})
	kvu := NewFakeTrigger("kv", Target{Type: Value, Value: 0.8, Activation: 0.5})
	s, err := New(cfg, clk, queue, kvu)
	if err != nil {
		t.Fatal(err)
	}
	// Per poll: queue depth and KV utilisation; errV = that source is down.
	load := [][2]float64{
		{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, // idle past the initial cooldown
		{3, 0.1}, {40, 0.2}, {40, 0.9}, {40, 0.9}, {22, 0.85}, // burst
		{20, 0.8}, {20, 0.8}, // plateau
		{errV, errV}, {errV, errV}, {errV, errV}, {errV, errV}, // outage: hold, then fallback
		{10, 0.5}, {5, 0.4}, {5, 0.4}, {2, 0.3}, {2, 0.3}, {1, 0.2}, {0, 0.1}, // decline
		{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, // idle until zero
	}
	var b strings.Builder
	current := 0
	for i, l := range load {
		if i > 0 {
			clk.Step(s.PollingInterval())
		}
		for j, tr := range []*FakeTrigger{queue, kvu} {
			if l[j] == errV {
				tr.Fail(errSource)
			} else {
				tr.Set(l[j])
			}
		}
		d, err := s.Reconcile(context.Background(), current)
		fmt.Fprintf(&b, "t=%4ds cur=%d queue=%s kv=%s rec=%2d stab=%2d active=%-5t fallback=%-5t err=%-5t -> %d %s\n",
			int(clk.Now().Sub(epoch)/time.Second), current, show(l[0]), show(l[1]),
			d.Recommendation, d.Stabilized, d.Active, d.Fallback, err != nil, d.Desired, d.Reason)
		current = d.Desired
	}
	golden := filepath.Join("testdata", "hyperpod_trace.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Fatalf("trace differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
	}
}

func show(v float64) string {
	if v == errV {
		return " err"
	}
	return fmt.Sprintf("%4.4g", v)
}
