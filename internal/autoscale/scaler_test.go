package autoscale

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// errV in a step's values makes that trigger fail.
var errV = math.Inf(-1)

var errSource = errors.New("metrics source unreachable")

func avg(target float64) Target { return Target{Type: AverageValue, Value: target} }

func dur(d time.Duration) *time.Duration { return &d }

func f64(v float64) *float64 { return &v }

func ptr(n int) *int { return &n }

// step is one poll: advance the fake clock by after, set the trigger values,
// reconcile at cur (default: the previous decision, as if applied).
type step struct {
	after  time.Duration
	v      []float64
	cur    *int
	want   int
	reason Reason
}

type scenario struct {
	name    string
	cfg     Config
	targets []Target // default: one AverageValue trigger with target 1
	start   int
	steps   []step
}

func runScenario(t *testing.T, sc scenario) []Decision {
	t.Helper()
	clk := clock.NewFake(epoch)
	targets := sc.targets
	if len(targets) == 0 {
		targets = []Target{avg(1)}
	}
	fakes := make([]*FakeTrigger, len(targets))
	trigs := make([]Trigger, len(targets))
	for i, tg := range targets {
		fakes[i] = NewFakeTrigger(fmt.Sprintf("t%d", i), tg)
		trigs[i] = fakes[i]
	}
	s, err := New(sc.cfg, clk, trigs...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cur := sc.start
	var out []Decision
	for i, st := range sc.steps {
		clk.Step(st.after)
		if len(st.v) != len(fakes) {
			t.Fatalf("step %d: %d values for %d triggers", i, len(st.v), len(fakes))
		}
		for j, v := range st.v {
			if v == errV {
				fakes[j].Fail(errSource)
			} else {
				fakes[j].Set(v)
			}
		}
		if st.cur != nil {
			cur = *st.cur
		}
		d, err := s.Reconcile(context.Background(), cur)
		if d.Desired != st.want || (st.reason != "" && d.Reason != st.reason) {
			t.Fatalf("step %d (t=%v, current %d, values %v): got %d (%s), want %d (%s); decision %+v, err %v",
				i, clk.Now().Sub(epoch), cur, st.v, d.Desired, d.Reason, st.want, st.reason, d, err)
		}
		for j, in := range d.Inputs {
			if (in.Err != nil) != (st.v[j] == errV) {
				t.Fatalf("step %d: input %d err = %v, want error %v", i, j, in.Err, st.v[j] == errV)
			}
		}
		out = append(out, d)
		cur = d.Desired
	}
	return out
}

func v(xs ...float64) []float64 { return xs }

// withBehavior is a config with default HPA behavior and a wide range.
func withBehavior(b Behavior) Config {
	return Config{MinReplicas: 1, MaxReplicas: 100, Behavior: &b}
}

func TestHPA(t *testing.T) {
	def := withBehavior(Behavior{})
	downNow := withBehavior(Behavior{ScaleDown: &Rules{StabilizationWindow: dur(0)}})
	pct := Target{Type: Value, Value: 50}
	cases := []scenario{
		// Tolerance band: (1−0.1) ≤ ratio ≤ (1+0.1) keeps current, inclusive.
		{name: "tolerance/upper edge holds", cfg: def, start: 10, steps: []step{{v: v(11), want: 10, reason: ReasonWithinRange}}},
		{name: "tolerance/above band scales", cfg: def, start: 10, steps: []step{{v: v(11.1), want: 12}}},
		{name: "tolerance/lower edge holds", cfg: def, start: 10, steps: []step{{v: v(9), want: 10}}},
		{name: "tolerance/below band scales", cfg: def, start: 10, steps: []step{{v: v(8.9), want: 9}}},
		{name: "tolerance/zero tolerance", cfg: Config{MinReplicas: 1, MaxReplicas: 100, Tolerance: f64(0), Behavior: &Behavior{}},
			start: 10, steps: []step{{v: v(10.5), want: 11}}},
		{name: "tolerance/per-direction override", cfg: withBehavior(Behavior{ScaleUp: &Rules{Tolerance: f64(0.5)}}),
			start: 10, steps: []step{{v: v(14), want: 10}, {after: time.Second, v: v(16), want: 16}, {after: time.Second, v: v(8), want: 16}}},
		// Derived vectors from autoscaling.md §1.6.
		{name: "vector/ratio 1.8 from 4 to 8", cfg: def, targets: []Target{pct}, start: 4, steps: []step{{v: v(90), want: 8}}},
		{name: "vector/ratio 1.05 holds 10", cfg: def, targets: []Target{{Type: Value, Value: 100}}, start: 10, steps: []step{{v: v(105), want: 10}}},
		{name: "vector/proposal 20 from 1 capped at 5", cfg: def, start: 1, steps: []step{{v: v(20), want: 5, reason: ReasonScaleUpLimit}}},
		{name: "vector/legacy proposal 20 from 1 capped at 4", cfg: Config{MinReplicas: 1, MaxReplicas: 100}, start: 1,
			steps: []step{{v: v(20), want: 4, reason: ReasonScaleUpLimit}}},
		{name: "vector/down window keeps 8", cfg: def, start: 10, steps: []step{
			{v: v(8), want: 8}, {after: time.Minute, cur: ptr(10), v: v(3), want: 8}}},
		// Milli-precision arithmetic: 1.1/0.1 is 11, float division gives 12.
		{name: "proposal/milli precision", cfg: def, targets: []Target{avg(0.1)}, start: 8, steps: []step{{v: v(1.1), want: 11}}},
		{name: "proposal/value metric scales current", cfg: def, targets: []Target{{Type: Value, Value: 10}}, start: 2,
			steps: []step{{v: v(25), want: 5}}},
		// Stabilisation windows.
		{name: "stabilize/up window holds until old low sample leaves", cfg: withBehavior(Behavior{ScaleUp: &Rules{StabilizationWindow: dur(time.Minute)}}),
			start: 2, steps: []step{
				{v: v(2), want: 2},
				{after: 15 * time.Second, v: v(6), want: 2},
				{after: 15 * time.Second, v: v(6), want: 2},
				{after: 31 * time.Second, v: v(6), want: 6}}},
		{name: "stabilize/down window 300s", cfg: def, start: 6, steps: []step{
			{v: v(6), want: 6},
			{after: time.Minute, v: v(2), want: 6},
			{after: 239 * time.Second, v: v(2), want: 6},
			{after: time.Second, v: v(2), want: 2}}},
		{name: "stabilize/legacy down window keeps the boundary sample", cfg: Config{MinReplicas: 1, MaxReplicas: 100}, start: 6, steps: []step{
			{v: v(6), want: 6},
			{after: 300 * time.Second, v: v(2), want: 6},
			{after: time.Second, v: v(2), want: 2}}},
		{name: "stabilize/custom down window", cfg: withBehavior(Behavior{ScaleDown: &Rules{StabilizationWindow: dur(time.Minute)}}), start: 6, steps: []step{
			{v: v(6), want: 6},
			{after: 30 * time.Second, v: v(2), want: 6},
			{after: 31 * time.Second, v: v(2), want: 2}}},
		// Rate limits.
		{name: "rate/pods up per period", cfg: withBehavior(Behavior{ScaleUp: &Rules{Policies: []Policy{{Pods, 2, time.Minute}}}}), start: 1, steps: []step{
			{v: v(100), want: 3, reason: ReasonScaleUpLimit},
			{after: 15 * time.Second, v: v(100), want: 3, reason: ReasonScaleUpLimit},
			{after: 46 * time.Second, v: v(100), want: 5}}},
		{name: "rate/percent up rounds up", cfg: withBehavior(Behavior{ScaleUp: &Rules{Policies: []Policy{{Percent, 50, time.Minute}}}}), start: 3, steps: []step{
			{v: v(100), want: 5},
			{after: 10 * time.Second, v: v(100), want: 5}}},
		{name: "rate/percent down truncates", cfg: withBehavior(Behavior{ScaleDown: &Rules{StabilizationWindow: dur(0), Policies: []Policy{{Percent, 50, time.Minute}}}}),
			start: 5, steps: []step{{v: v(0), want: 2, reason: ReasonScaleDownLimit}}},
		{name: "rate/pods down per period", cfg: withBehavior(Behavior{ScaleDown: &Rules{StabilizationWindow: dur(0), Policies: []Policy{{Pods, 1, time.Minute}}}}),
			start: 5, steps: []step{
				{v: v(0), want: 4},
				{after: 10 * time.Second, v: v(0), want: 4},
				{after: 51 * time.Second, v: v(0), want: 3}}},
		{name: "rate/select max takes the larger step", cfg: def, start: 10, steps: []step{{v: v(100), want: 20}}},
		{name: "rate/select min takes the smaller step", cfg: withBehavior(Behavior{ScaleUp: &Rules{SelectPolicy: SelectMin}}), start: 10,
			steps: []step{{v: v(100), want: 14}}},
		{name: "rate/select min down keeps more", cfg: withBehavior(Behavior{ScaleDown: &Rules{StabilizationWindow: dur(0), SelectPolicy: SelectMin,
			Policies: []Policy{{Pods, 1, time.Minute}, {Percent, 50, time.Minute}}}}), start: 5, steps: []step{{v: v(0), want: 4}}},
		{name: "rate/select max down removes more", cfg: withBehavior(Behavior{ScaleDown: &Rules{StabilizationWindow: dur(0),
			Policies: []Policy{{Pods, 1, time.Minute}, {Percent, 50, time.Minute}}}}), start: 5, steps: []step{{v: v(0), want: 2}}},
		{name: "rate/disabled up freezes", cfg: withBehavior(Behavior{ScaleUp: &Rules{SelectPolicy: SelectDisabled}}), start: 3,
			steps: []step{{v: v(100), want: 3, reason: ReasonScalingDisabled}}},
		{name: "rate/disabled down freezes", cfg: withBehavior(Behavior{ScaleDown: &Rules{StabilizationWindow: dur(0), SelectPolicy: SelectDisabled}}), start: 5,
			steps: []step{{v: v(0), want: 5, reason: ReasonScalingDisabled}, {after: time.Hour, v: v(100), want: 10}}},
		{name: "rate/period start counts both directions", cfg: withBehavior(Behavior{
			ScaleUp:   &Rules{Policies: []Policy{{Pods, 4, time.Minute}}},
			ScaleDown: &Rules{StabilizationWindow: dur(0)}}), start: 2, steps: []step{
			{v: v(10), want: 6},
			{after: 5 * time.Second, v: v(1), want: 1},
			{after: 5 * time.Second, v: v(10), want: 6}}},
		// Several triggers: the maximum proposal wins; failures hold only when
		// the valid ones would scale down.
		{name: "multi/max proposal wins", cfg: def, targets: []Target{avg(1), avg(1)}, start: 4, steps: []step{{v: v(3, 8), want: 8}}},
		{name: "multi/value and average mixed", cfg: def, targets: []Target{pct, avg(2)}, start: 5, steps: []step{{v: v(60, 20), want: 10}}},
		{name: "multi/one failed others scale up", cfg: def, targets: []Target{avg(1), avg(1)}, start: 4, steps: []step{{v: v(errV, 8), want: 8}}},
		{name: "multi/one failed others would scale down", cfg: downNow, targets: []Target{avg(1), avg(1)}, start: 4,
			steps: []step{{v: v(errV, 1), want: 4, reason: ReasonMetricsFailed}}},
		{name: "multi/all failed holds", cfg: downNow, targets: []Target{avg(1), avg(1)}, start: 4,
			steps: []step{{v: v(errV, errV), want: 4, reason: ReasonMetricsFailed}}},
		// Clamps.
		{name: "clamp/above max goes to max", cfg: Config{MinReplicas: 1, MaxReplicas: 5, Behavior: &Behavior{}}, start: 8,
			steps: []step{{v: v(100), want: 5, reason: ReasonAboveMax}}},
		{name: "clamp/below min goes to min", cfg: Config{MinReplicas: 3, MaxReplicas: 5, Behavior: &Behavior{}}, start: 1,
			steps: []step{{v: v(0), want: 3, reason: ReasonBelowMin}}},
		{name: "clamp/proposal over max", cfg: Config{MinReplicas: 1, MaxReplicas: 5, Behavior: &Behavior{}}, start: 4,
			steps: []step{{v: v(100), want: 5, reason: ReasonTooManyReplicas}}},
		{name: "clamp/proposal under min", cfg: Config{MinReplicas: 2, MaxReplicas: 5, Behavior: &Behavior{ScaleDown: &Rules{StabilizationWindow: dur(0)}}}, start: 4,
			steps: []step{{v: v(0), want: 2, reason: ReasonTooFewReplicas}}},
		{name: "clamp/legacy proposal under min", cfg: Config{MinReplicas: 2, MaxReplicas: 5}, start: 4,
			steps: []step{{v: v(0), want: 2, reason: ReasonTooFewReplicas}}},
		{name: "clamp/hyperpod defaults cap at 5", cfg: HyperPodDefaults(), start: 1,
			steps: []step{{v: v(50), want: 5, reason: ReasonTooManyReplicas}}},
	}
	for _, sc := range cases {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, sc) })
	}
}

func TestKEDA(t *testing.T) {
	keda := KEDADefaults()
	act := func(a float64) Target { return Target{Type: AverageValue, Value: 1, Activation: a} }
	initial := KEDADefaults()
	initial.InitialCooldownPeriod = 300 * time.Second
	initial.CooldownPeriod = time.Minute
	minTwo := KEDADefaults()
	minTwo.MinReplicas = 2
	fb := func(threshold, replicas int, b FallbackBehavior) Config {
		c := KEDADefaults()
		c.Fallback = &Fallback{FailureThreshold: threshold, Replicas: replicas, Behavior: b}
		return c
	}
	noCooldown := KEDADefaults()
	noCooldown.CooldownPeriod = 0
	noCooldownFB := noCooldown
	noCooldownFB.Fallback = &Fallback{FailureThreshold: 0, Replicas: 0}
	cases := []scenario{
		// Activation: strictly greater than the activation target.
		{name: "activation/equal to threshold stays at zero", cfg: keda, targets: []Target{act(5)}, start: 0,
			steps: []step{{v: v(5), want: 0, reason: ReasonIdleAtZero}}},
		{name: "activation/above threshold goes to one", cfg: keda, targets: []Target{act(5)}, start: 0,
			steps: []step{{v: v(5.001), want: 1, reason: ReasonActivated}}},
		{name: "activation/then HPA scales 1 to N", cfg: keda, targets: []Target{act(0)}, start: 0,
			steps: []step{{v: v(10), want: 1, reason: ReasonActivated}, {after: 30 * time.Second, v: v(10), want: 4, reason: ReasonScaleUpLimit}}},
		{name: "activation/any trigger activates", cfg: keda, targets: []Target{act(5), act(5)}, start: 0,
			steps: []step{{v: v(0, 6), want: 1, reason: ReasonActivated}}},
		{name: "activation/min above zero activates to min", cfg: minTwo, targets: []Target{act(0)}, start: 0,
			steps: []step{{v: v(1), want: 2, reason: ReasonActivated}}},
		{name: "activation/min above zero lifts inactive zero to min", cfg: minTwo, start: 0,
			steps: []step{{v: v(0), want: 2, reason: ReasonBelowMin}}},
		// Cooldown before N → 0, strictly after lastActive + cooldown.
		{name: "cooldown/scale to zero after cooldown", cfg: keda, start: 0, steps: []step{
			{v: v(1), want: 1, reason: ReasonActivated},
			{after: 30 * time.Second, v: v(0), want: 1, reason: ReasonTooFewReplicas},
			{after: 270 * time.Second, v: v(0), want: 1},
			{after: time.Second, v: v(0), want: 0, reason: ReasonScaledToZero},
			{after: 30 * time.Second, v: v(0), want: 0, reason: ReasonIdleAtZero}}},
		{name: "cooldown/activity refreshes last active", cfg: keda, start: 0, steps: []step{
			{v: v(1), want: 1},
			{after: 200 * time.Second, v: v(1), want: 1},
			{after: 250 * time.Second, v: v(0), want: 1},
			{after: 51 * time.Second, v: v(0), want: 0, reason: ReasonScaledToZero}}},
		{name: "cooldown/min above zero never goes to zero", cfg: minTwo, start: 3, steps: []step{
			{v: v(0), want: 2, reason: ReasonTooFewReplicas}, {after: time.Hour, v: v(0), want: 2}}},
		// Initial cooldown: never active since creation.
		{name: "initial cooldown/waits from creation", cfg: initial, start: 2, steps: []step{
			{v: v(0), want: 1},
			{after: 60 * time.Second, v: v(0), want: 1},
			{after: 240 * time.Second, v: v(0), want: 1},
			{after: time.Second, v: v(0), want: 0, reason: ReasonScaledToZero}}},
		{name: "initial cooldown/zero default scales down at once", cfg: keda, start: 2, steps: []step{
			{v: v(0), want: 1}, {after: time.Second, v: v(0), want: 0, reason: ReasonScaledToZero}}},
		{name: "initial cooldown/activity switches to the cooldown", cfg: initial, start: 0, steps: []step{
			{after: 10 * time.Second, v: v(1), want: 1},
			{after: 61 * time.Second, v: v(0), want: 0, reason: ReasonScaledToZero}}},
		// Fallback: strictly more failures than the threshold.
		{name: "fallback/after threshold lands on replicas", cfg: fb(2, 5, ""), start: 2, steps: []step{
			{v: v(2), want: 2},
			{after: 30 * time.Second, v: v(errV), want: 2, reason: ReasonMetricsFailed},
			{after: 30 * time.Second, v: v(errV), want: 2, reason: ReasonMetricsFailed},
			{after: 30 * time.Second, v: v(errV), want: 4, reason: ReasonScaleUpLimit},
			{after: 30 * time.Second, v: v(errV), want: 5},
			{after: 30 * time.Second, v: v(5), want: 5},
			{after: 30 * time.Second, v: v(errV), want: 5, reason: ReasonMetricsFailed}}},
		{name: "fallback/static", cfg: fb(0, 3, FallbackStatic), start: 6, steps: []step{{v: v(errV), want: 3}}},
		{name: "fallback/current replicas", cfg: fb(0, 3, FallbackCurrentReplicas), start: 6, steps: []step{{v: v(errV), want: 6}}},
		{name: "fallback/if higher keeps higher current", cfg: fb(0, 3, FallbackCurrentReplicasIfHigher), start: 6, steps: []step{{v: v(errV), want: 6}}},
		{name: "fallback/if higher raises lower current", cfg: fb(0, 3, FallbackCurrentReplicasIfHigher), start: 2, steps: []step{{v: v(errV), want: 3}}},
		{name: "fallback/if lower keeps lower current", cfg: fb(0, 3, FallbackCurrentReplicasIfLower), start: 2, steps: []step{{v: v(errV), want: 2}}},
		{name: "fallback/if lower lowers higher current", cfg: fb(0, 3, FallbackCurrentReplicasIfLower), start: 6, steps: []step{{v: v(errV), want: 3}}},
		{name: "fallback/value metric divides by current", cfg: fb(0, 3, ""), targets: []Target{{Type: Value, Value: 10}}, start: 2,
			steps: []step{{v: v(errV), want: 3}}},
		{name: "fallback/value metric at zero fails and stays", cfg: fb(0, 3, ""), targets: []Target{{Type: Value, Value: 10}}, start: 0,
			steps: []step{{v: v(errV), want: 0, reason: ReasonIdleAtZero}}},
		// A failing trigger never scales to zero.
		{name: "error/no fallback holds for an hour", cfg: noCooldown, start: 3, steps: []step{
			{v: v(errV), want: 3, reason: ReasonMetricsFailed},
			{after: 30 * time.Minute, v: v(errV), want: 3, reason: ReasonMetricsFailed},
			{after: 30 * time.Minute, v: v(errV), want: 3, reason: ReasonMetricsFailed}}},
		{name: "error/fallback replicas zero floors at one", cfg: noCooldownFB, start: 3, steps: []step{
			{v: v(errV), want: 1}, {after: time.Hour, v: v(errV), want: 1}}},
		{name: "error/one failing one idle trigger", cfg: noCooldown, targets: []Target{avg(1), avg(1)}, start: 3, steps: []step{
			{after: time.Hour, v: v(errV, 0), want: 3, reason: ReasonMetricsFailed}}},
		{name: "error/at zero stays at zero", cfg: noCooldown, start: 0, steps: []step{{v: v(errV), want: 0, reason: ReasonIdleAtZero}}},
	}
	for _, sc := range cases {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, sc) })
	}
}

func TestDecisionDetails(t *testing.T) {
	clk := clock.NewFake(epoch)
	a := NewFakeTrigger("queue", Target{Type: AverageValue, Value: 5, Activation: 1})
	b := NewFakeTrigger("kv", Target{Type: Value, Value: 0.8})
	s, err := New(KEDADefaults(), clk, a, b)
	if err != nil {
		t.Fatal(err)
	}
	a.Set(30)
	b.Fail(errSource)
	d, err := s.Reconcile(context.Background(), 2)
	if !errors.Is(err, errSource) {
		t.Fatalf("err = %v, want it to wrap the trigger error", err)
	}
	if d.Desired != 4 || !d.Active || d.Fallback || !d.Changed() || d.Recommendation != 6 || d.Stabilized != 6 || !d.Time.Equal(epoch) {
		t.Fatalf("decision = %+v", d)
	}
	if len(d.Inputs) != 2 || d.Inputs[0].Name != "queue" || d.Inputs[0].Value != 30 || d.Inputs[0].Proposal != 6 || !d.Inputs[0].Active {
		t.Fatalf("input 0 = %+v", d.Inputs[0])
	}
	if in := d.Inputs[1]; in.Name != "kv" || in.Err == nil || in.Failures != 1 || in.Proposal != -1 || in.Active {
		t.Fatalf("input 1 = %+v", in)
	}
	if a.Calls() != 1 || b.Calls() != 1 {
		t.Fatalf("calls = %d, %d; want each trigger read once", a.Calls(), b.Calls())
	}
}

func TestCancelledContextCountsNoFailure(t *testing.T) {
	clk := clock.NewFake(epoch)
	tr := NewFakeTrigger("q", avg(1))
	cfg := KEDADefaults()
	cfg.Fallback = &Fallback{FailureThreshold: 1, Replicas: 7}
	s, err := New(cfg, clk, tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		d, err := s.Reconcile(ctx, 3)
		if !errors.Is(err, context.Canceled) || d.Desired != 3 {
			t.Fatalf("cancelled reconcile = %+v, %v", d, err)
		}
	}
	tr.Fail(errSource)
	d, _ := s.Reconcile(context.Background(), 3)
	if d.Fallback || d.Desired != 3 || d.Inputs[0].Failures != 1 {
		t.Fatalf("first real failure = %+v; cancelled polls must not count", d)
	}
}

func TestNonFiniteValueIsAnError(t *testing.T) {
	tr := NewFakeTrigger("q", avg(1))
	s, err := New(KEDADefaults(), clock.NewFake(epoch), tr)
	if err != nil {
		t.Fatal(err)
	}
	for _, val := range []float64{math.NaN(), math.Inf(1), 2e15} {
		tr.Set(val)
		d, err := s.Reconcile(context.Background(), 2)
		if err == nil || d.Desired != 2 || d.Inputs[0].Err == nil {
			t.Fatalf("value %g: decision %+v, err %v; want held with an error", val, d, err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	good := func() Config { return Config{MinReplicas: 0, MaxReplicas: 3} }
	tg := func() []Trigger { return []Trigger{NewFakeTrigger("a", avg(1))} }
	cases := []struct {
		name  string
		cfg   func() Config
		trigs func() []Trigger
	}{
		{"negative min", func() Config { c := good(); c.MinReplicas = -1; return c }, tg},
		{"max zero", func() Config { c := good(); c.MaxReplicas = 0; return c }, tg},
		{"max below min", func() Config { c := good(); c.MinReplicas = 4; return c }, tg},
		{"negative cooldown", func() Config { c := good(); c.CooldownPeriod = -time.Second; return c }, tg},
		{"negative tolerance", func() Config { c := good(); c.Tolerance = f64(-0.1); return c }, tg},
		{"bad policy type", func() Config {
			c := good()
			c.Behavior = &Behavior{ScaleUp: &Rules{Policies: []Policy{{"Pods%", 1, time.Second}}}}
			return c
		}, tg},
		{"zero policy value", func() Config {
			c := good()
			c.Behavior = &Behavior{ScaleDown: &Rules{Policies: []Policy{{Pods, 0, time.Second}}}}
			return c
		}, tg},
		{"zero policy period", func() Config {
			c := good()
			c.Behavior = &Behavior{ScaleUp: &Rules{Policies: []Policy{{Percent, 10, 0}}}}
			return c
		}, tg},
		{"unknown select policy", func() Config { c := good(); c.Behavior = &Behavior{ScaleUp: &Rules{SelectPolicy: "Avg"}}; return c }, tg},
		{"window over an hour", func() Config {
			c := good()
			c.Behavior = &Behavior{ScaleDown: &Rules{StabilizationWindow: dur(2 * time.Hour)}}
			return c
		}, tg},
		{"negative fallback", func() Config { c := good(); c.Fallback = &Fallback{FailureThreshold: -1}; return c }, tg},
		{"unknown fallback behavior", func() Config { c := good(); c.Fallback = &Fallback{Behavior: "sometimes"}; return c }, tg},
		{"no triggers", good, func() []Trigger { return nil }},
		{"duplicate trigger names", good, func() []Trigger {
			return []Trigger{NewFakeTrigger("a", avg(1)), NewFakeTrigger("a", avg(1))}
		}},
		{"zero target", good, func() []Trigger { return []Trigger{NewFakeTrigger("a", avg(0))} }},
		{"utilization rejected", good, func() []Trigger {
			return []Trigger{NewFakeTrigger("a", Target{Type: "Utilization", Value: 50})}
		}},
		{"negative activation", good, func() []Trigger {
			return []Trigger{NewFakeTrigger("a", Target{Type: AverageValue, Value: 1, Activation: -1})}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg(), clock.NewFake(epoch), tc.trigs()...)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	t.Run("defaults are valid", func(t *testing.T) {
		for _, c := range []Config{KEDADefaults(), HyperPodDefaults(), good()} {
			if _, err := New(c, clock.NewFake(epoch), tg()...); err != nil {
				t.Fatalf("New(%+v): %v", c, err)
			}
		}
	})
	t.Run("negative current", func(t *testing.T) {
		s, err := New(good(), clock.NewFake(epoch), tg()...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reconcile(context.Background(), -1); err == nil {
			t.Fatal("Reconcile(-1) succeeded")
		}
	})
}

// peekable makes a FakeTrigger a Peeker; it counts peeks apart from polls.
type peekable struct {
	*FakeTrigger
	peeks int
}

func (p *peekable) Peek(ctx context.Context) (float64, error) {
	p.peeks++
	return p.FakeTrigger.Value(ctx)
}

func TestPressure(t *testing.T) {
	val := func(target float64) Target { return Target{Type: Value, Value: target} }
	type trig struct {
		target Target
		v      float64 // errV fails
		peek   bool
	}
	cases := []struct {
		name    string
		trigs   []trig
		current int
		want    string // "" = no pressure
	}{
		{"AverageValue within tolerance", []trig{{avg(4), 4.4, true}}, 1, ""},
		{"AverageValue beyond tolerance", []trig{{avg(4), 4.5, true}}, 1, "t0"},
		{"Value within tolerance", []trig{{val(10), 11, true}}, 2, ""},
		{"Value beyond tolerance", []trig{{val(10), 11.5, true}}, 2, "t0"},
		{"scale-in is not pressure", []trig{{avg(4), 0, true}}, 3, ""},
		{"at the maximum", []trig{{avg(1), 100, true}}, 5, ""},
		{"at zero the activator wakes it", []trig{{avg(1), 100, true}}, 0, ""},
		{"a trigger that cannot be peeked is left to the polls", []trig{{avg(1), 100, false}}, 1, ""},
		{"a failing peek is skipped", []trig{{avg(1), errV, true}, {avg(1), 3, true}}, 1, "t1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			var trigs []Trigger
			var fakes []*FakeTrigger
			for i, tr := range c.trigs {
				f := NewFakeTrigger(fmt.Sprintf("t%d", i), tr.target)
				if tr.v == errV {
					f.Fail(errSource)
				} else {
					f.Set(tr.v)
				}
				fakes = append(fakes, f)
				if tr.peek {
					trigs = append(trigs, &peekable{FakeTrigger: f})
				} else {
					trigs = append(trigs, f)
				}
			}
			s, err := New(Config{MinReplicas: 0, MaxReplicas: 5}, clk, trigs...)
			if err != nil {
				t.Fatal(err)
			}
			name, ok := s.Pressure(context.Background(), c.current)
			if name != c.want || ok != (c.want != "") {
				t.Fatalf("Pressure = %q, %v; want %q", name, ok, c.want)
			}
			// Pressure leaves the scaler's state alone: a failed peek is not
			// one of the poll's consecutive failures.
			d, _ := s.Reconcile(context.Background(), max(c.current, 1))
			for _, in := range d.Inputs {
				if in.Err != nil && in.Failures != 1 {
					t.Fatalf("%s: %d consecutive failures after one poll", in.Name, in.Failures)
				}
			}
			for i, tr := range c.trigs {
				if !tr.peek && fakes[i].Calls() != 1 {
					t.Fatalf("trigger %d without Peek was read %d times, want once (the poll)", i, fakes[i].Calls())
				}
			}
		})
	}
}
