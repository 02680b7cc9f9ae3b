package autoscale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// Reason says which rule produced a Decision.
type Reason string

const (
	ReasonActivated       Reason = "Activated"          // KEDA: 0 → max(min, 1) on an active trigger
	ReasonIdleAtZero      Reason = "IdleAtZero"         // at 0, inactive: stay
	ReasonScaledToZero    Reason = "ScaledToZero"       // KEDA: cooldown passed, → 0
	ReasonBelowMin        Reason = "BelowMinReplicas"   // current < min: → min without metrics
	ReasonAboveMax        Reason = "AboveMaxReplicas"   // current > max: → max without metrics
	ReasonMetricsFailed   Reason = "FailedGetMetrics"   // HPA holds: all metrics failed, or some failed and the rest would scale down
	ReasonWithinRange     Reason = "DesiredWithinRange" // HPA result unchanged by limits
	ReasonScaleUpLimit    Reason = "ScaleUpLimit"       // capped by a rate policy / legacy 2× rule
	ReasonScaleDownLimit  Reason = "ScaleDownLimit"     // floored by a rate policy
	ReasonTooManyReplicas Reason = "TooManyReplicas"    // capped at maxReplicas
	ReasonTooFewReplicas  Reason = "TooFewReplicas"     // floored at minReplicas
	ReasonScalingDisabled Reason = "ScalingDisabled"    // selectPolicy Disabled in the proposed direction
)

// Input is one trigger's reading within a Decision.
type Input struct {
	Name   string
	Target Target
	// Value is the metric value used (the synthetic one under fallback).
	Value float64
	// Err is the trigger's error, if the read failed.
	Err error
	// Failures is the consecutive failure count after this read.
	Failures int
	// Fallback reports that Value is KEDA's synthetic fallback value.
	Fallback bool
	// Active reports value > activation (strict); false on error.
	Active bool
	// Proposal is this trigger's HPA replica proposal; -1 when none.
	Proposal int
}

// Decision is the outcome of one Reconcile.
type Decision struct {
	Time    time.Time
	Current int
	// Desired is what the controller should set; always within reason even
	// when Reconcile also returns an error.
	Desired int
	Reason  Reason
	// Active is KEDA's object activity: any trigger active.
	Active bool
	// Fallback reports that at least one trigger is over its failure threshold.
	Fallback bool
	// Recommendation is the HPA's raw max-over-metrics proposal (-1 when the
	// HPA did not compute one); Stabilized is it after the windows.
	Recommendation int
	Stabilized     int
	Inputs         []Input
}

// Changed reports whether the controller has to act.
func (d Decision) Changed() bool { return d.Desired != d.Current }

var _ slog.LogValuer = Decision{}

// LogValue renders the decision as one structured log group, inputs included.
func (d Decision) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Int("current", d.Current),
		slog.Int("desired", d.Desired),
		slog.String("reason", string(d.Reason)),
		slog.Bool("active", d.Active),
		slog.Bool("fallback", d.Fallback),
		slog.Int("recommendation", d.Recommendation),
		slog.Int("stabilized", d.Stabilized),
	}
	for _, in := range d.Inputs {
		a := []any{slog.Float64("value", in.Value), slog.Float64("target", in.Target.Value), slog.Int("proposal", in.Proposal)}
		if in.Err != nil {
			a = append(a, slog.String("error", in.Err.Error()), slog.Int("failures", in.Failures))
		}
		attrs = append(attrs, slog.Group("trigger."+in.Name, a...))
	}
	return slog.GroupValue(attrs...)
}

// Scaler holds one deployment's autoscaling state. It is not safe for
// concurrent use: one controller goroutine owns it and calls Reconcile every
// polling interval. Reconcile assumes the controller applies each Decision;
// scale events feed the rate limits.
type Scaler struct {
	cfg      resolved
	clk      clock.Clock
	triggers []Trigger
	created  time.Time

	failures   []int
	lastActive *time.Time
	recs       []timedInt // raw HPA recommendations
	upEvents   []timedInt // replicas added per HPA rescale
	downEvents []timedInt // replicas removed per HPA rescale
}

type timedInt struct {
	at time.Time
	n  int
}

// PollingInterval is how often the controller should call Reconcile.
func (s *Scaler) PollingInterval() time.Duration { return s.cfg.PollingInterval }

// New validates cfg and returns a Scaler created now (for the initial cooldown).
func New(cfg Config, clk clock.Clock, triggers ...Trigger) (*Scaler, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if len(triggers) == 0 || len(triggers) > MaxTriggers {
		return nil, invalid("triggers", "%d triggers, want 1..%d", len(triggers), MaxTriggers)
	}
	seen := map[string]bool{}
	for i, t := range triggers {
		name, tg := t.Name(), t.Target()
		if name == "" || len(name) > 253 || seen[name] {
			return nil, invalid(fmt.Sprintf("triggers[%d].name", i), "%q is empty, too long or duplicated", name)
		}
		seen[name] = true
		if tg.Type != AverageValue && tg.Type != Value {
			return nil, invalid(fmt.Sprintf("triggers[%d].metricType", i), "unknown %q (Utilization is not supported)", tg.Type)
		}
		if !(tg.Value >= 0.001) || tg.Value > maxValue {
			return nil, invalid(fmt.Sprintf("triggers[%d].target", i), "%g must be in [0.001, %g]", tg.Value, maxValue)
		}
		if math.IsNaN(tg.Activation) || tg.Activation < 0 {
			return nil, invalid(fmt.Sprintf("triggers[%d].activationTarget", i), "%g must be ≥ 0", tg.Activation)
		}
	}
	return &Scaler{
		cfg:      r,
		clk:      clk,
		triggers: triggers,
		created:  clk.Now(),
		failures: make([]int, len(triggers)),
	}, nil
}

// Reconcile reads every trigger and decides the replica count, the way KEDA's
// executor (RequestScale) and the HPA it manages would between them.
//
// The returned error joins the trigger errors that reached the HPA (those not
// replaced by a fallback value); Decision is valid either way, and a failing
// trigger never causes a scale to zero.
func (s *Scaler) Reconcile(ctx context.Context, current int) (Decision, error) {
	if current < 0 {
		return Decision{}, fmt.Errorf("autoscale: current replicas %d is negative", current)
	}
	if err := ctx.Err(); err != nil {
		// A cancelled poll must not count as trigger failures.
		return Decision{Current: current, Desired: current, Recommendation: -1, Stabilized: -1}, fmt.Errorf("autoscale: %w", err)
	}
	now := s.clk.Now()
	d := Decision{Time: now, Current: current, Desired: current, Recommendation: -1, Stabilized: -1}
	var errs []error
	anyError := false
	for i, t := range s.triggers {
		in := s.read(ctx, i, t, current)
		if in.Err != nil {
			anyError = true
			if !in.Fallback {
				errs = append(errs, fmt.Errorf("trigger %s: %w", in.Name, in.Err))
			}
		}
		d.Active = d.Active || in.Active
		d.Fallback = d.Fallback || in.Fallback
		d.Inputs = append(d.Inputs, in)
	}
	err := errors.Join(errs...)
	if d.Active {
		t := now
		s.lastActive = &t
	}

	// KEDA executor (RequestScale).
	minR := s.cfg.MinReplicas
	switch {
	case d.Active && current == 0:
		d.Desired, d.Reason = max(minR, 1), ReasonActivated
		return d, err
	case d.Active:
		// Refreshing lastActiveTime (done above); the HPA decides 1 ↔ N.
	case anyError:
		// Inactive with an error: KEDA never scales to zero here, with or
		// without fallback; the HPA (with fallback values) decides.
	case current > 0 && minR == 0:
		if s.cooldownOver(now) {
			d.Desired, d.Reason = 0, ReasonScaledToZero
			return d, err
		}
	case current < minR:
		d.Desired, d.Reason = minR, ReasonBelowMin
		return d, err
	}
	if current == 0 {
		// The HPA is disabled at zero (ScalingDisabled, HPAScaleToZero off).
		d.Reason = ReasonIdleAtZero
		return d, err
	}
	s.hpa(&d, max(minR, 1))
	return d, err
}

// cooldownOver mirrors scaleToZeroOrIdle: strictly after lastActive+cooldown,
// or creation+initialCooldown while never active.
func (s *Scaler) cooldownOver(now time.Time) bool {
	if s.lastActive == nil {
		return now.After(s.created.Add(s.cfg.InitialCooldownPeriod))
	}
	return now.After(s.lastActive.Add(s.cfg.CooldownPeriod))
}

// Pressure reports whether a Peeker trigger asks, right now, for more
// replicas than current, by the same target arithmetic and tolerance as a
// poll, and names the first one that does. A controller uses it to run the
// next poll at once when a burst begins rather than up to a polling interval
// later; the poll still decides, with every trigger, the stabilization
// windows and the scale-up limits. At zero replicas the activator wakes the
// deployment instead, and at the maximum there is nothing to ask for.
// Pressure reads only the configuration and the triggers, so it is safe to
// call concurrently with Reconcile.
func (s *Scaler) Pressure(ctx context.Context, current int) (string, bool) {
	if current < 1 || current >= s.cfg.MaxReplicas {
		return "", false
	}
	for _, t := range s.triggers {
		p, ok := t.(Peeker)
		if !ok {
			continue
		}
		v, err := p.Peek(ctx)
		if err != nil || math.IsNaN(v) || math.Abs(v) > maxValue {
			continue // a failing trigger is the polls' business
		}
		in := Input{Value: v, Target: t.Target()}
		if s.propose(&in, current) > current {
			return t.Name(), true
		}
	}
	return "", false
}

// read polls one trigger and applies fallback (pkg/fallback).
func (s *Scaler) read(ctx context.Context, i int, t Trigger, current int) Input {
	in := Input{Name: t.Name(), Target: t.Target(), Proposal: -1}
	v, err := t.Value(ctx)
	if err == nil && (math.IsNaN(v) || math.Abs(v) > maxValue) {
		err = fmt.Errorf("value %g is not a finite number within ±%g", v, maxValue)
	}
	if err == nil {
		s.failures[i] = 0
		in.Value = v
		in.Active = v > in.Target.Activation
		return in
	}
	s.failures[i]++
	in.Err, in.Failures = err, s.failures[i]
	fb := s.cfg.Fallback
	if fb == nil || s.failures[i] <= fb.FailureThreshold {
		return in
	}
	replicas := fb.Replicas
	switch fb.Behavior {
	case FallbackCurrentReplicas:
		replicas = current
	case FallbackCurrentReplicasIfHigher:
		replicas = max(replicas, current)
	case FallbackCurrentReplicasIfLower:
		replicas = min(replicas, current)
	}
	// KEDA sends target × replicas in milli-precision.
	synthetic := float64(targetMilli(in.Target.Value)*int64(replicas)) / 1000
	if in.Target.Type == Value {
		if current == 0 {
			return in // no ready pods: fallback fails, the error stands
		}
		synthetic /= float64(current)
	}
	in.Value, in.Fallback = synthetic, true
	return in
}

// hpa runs one HPA sync (reconcileAutoscaler) for current ≥ 1.
func (s *Scaler) hpa(d *Decision, minR int) {
	now, current, maxR := d.Time, d.Current, s.cfg.MaxReplicas
	switch {
	case current > maxR:
		d.Desired, d.Reason = maxR, ReasonAboveMax
		s.recordEvent(now, current, d.Desired)
		return
	case current < minR:
		d.Desired, d.Reason = minR, ReasonBelowMin
		s.recordEvent(now, current, d.Desired)
		return
	}
	// computeReplicasForMetrics: max over valid proposals; hold when all
	// failed or some failed and the valid max would scale down.
	rec, invalid := 0, 0
	for i := range d.Inputs {
		in := &d.Inputs[i]
		if in.Err != nil && !in.Fallback {
			invalid++
			continue
		}
		in.Proposal = s.propose(in, current)
		rec = max(rec, in.Proposal)
	}
	if invalid == len(d.Inputs) || (invalid > 0 && rec < current) {
		d.Reason = ReasonMetricsFailed
		return
	}
	d.Recommendation = rec
	if s.cfg.Behavior == nil {
		s.legacy(d, minR)
	} else {
		s.withBehavior(d, minR)
	}
	s.recordEvent(now, current, d.Desired)
}

// propose is the External-metric arm of replica_calculator.go.
// KEDA hands values to the HPA as milli-quantities (truncated) and the HPA
// divides milli-values, so the arithmetic is done in millis to land on the
// same integers (1.1/0.1 is 11 here, not 12).
func (s *Scaler) propose(in *Input, current int) int {
	usage, target := valueMilli(in.Value), targetMilli(in.Target.Value)
	var ratio float64
	if in.Target.Type == AverageValue {
		ratio = float64(usage) / (float64(target) * float64(current))
	} else {
		ratio = float64(usage) / float64(target)
	}
	if 1-s.cfg.downTol <= ratio && ratio <= 1+s.cfg.upTol {
		return current
	}
	if in.Target.Type == AverageValue {
		return int(math.Ceil(float64(usage) / float64(target)))
	}
	return int(math.Ceil(ratio * float64(current)))
}

// maxValue bounds trigger values so milli-values fit in an int64.
const maxValue = 1e15

func valueMilli(v float64) int64 { return int64(v * 1000) }

func targetMilli(v float64) int64 { return int64(math.Round(v * 1000)) }

// legacy is normalizeDesiredReplicas: max over the down window, then
// convertDesiredReplicasWithRules (up cap max(2×current, 4), clamp).
func (s *Scaler) legacy(d *Decision, minR int) {
	cutoff := d.Time.Add(-s.cfg.down.window)
	stab := d.Recommendation
	kept := s.recs[:0]
	for _, r := range s.recs {
		// stabilizeRecommendation drops only samples strictly before the cutoff.
		if !r.at.Before(cutoff) {
			stab = max(stab, r.n)
			kept = append(kept, r)
		}
	}
	s.recs = append(kept, timedInt{d.Time, d.Recommendation})
	d.Stabilized = stab

	upLimit := max(2*d.Current, 4)
	maxAllowed, capReason := s.cfg.MaxReplicas, ReasonTooManyReplicas
	if upLimit < maxAllowed {
		maxAllowed, capReason = upLimit, ReasonScaleUpLimit
	}
	switch {
	case stab < minR:
		d.Desired, d.Reason = minR, ReasonTooFewReplicas
	case stab > maxAllowed:
		d.Desired, d.Reason = maxAllowed, capReason
	default:
		d.Desired, d.Reason = stab, ReasonWithinRange
	}
}

// withBehavior is normalizeDesiredReplicasWithBehaviors: stabilise
// (stabilizeRecommendationWithBehaviors), then rate-limit
// (convertDesiredReplicasWithBehaviorRate).
func (s *Scaler) withBehavior(d *Decision, minR int) {
	upCut, downCut := d.Time.Add(-s.cfg.up.window), d.Time.Add(-s.cfg.down.window)
	upRec, downRec := d.Recommendation, d.Recommendation
	kept := s.recs[:0]
	for _, r := range s.recs {
		inUp, inDown := r.at.After(upCut), r.at.After(downCut)
		if inUp {
			upRec = min(upRec, r.n)
		}
		if inDown {
			downRec = max(downRec, r.n)
		}
		if inUp || inDown {
			kept = append(kept, r)
		}
	}
	s.recs = append(kept, timedInt{d.Time, d.Recommendation})
	stab := d.Current
	if stab < upRec {
		stab = upRec
	}
	if stab > downRec {
		stab = downRec
	}
	d.Stabilized = stab
	d.Desired, d.Reason = stab, ReasonWithinRange

	switch {
	case stab > d.Current:
		limit, limited := s.scaleUpLimit(d.Time, d.Current)
		maxAllowed, why := s.cfg.MaxReplicas, ReasonTooManyReplicas
		if limit < maxAllowed {
			maxAllowed, why = limit, limited
		}
		if stab > maxAllowed {
			d.Desired, d.Reason = maxAllowed, why
		}
	case stab < d.Current:
		limit, limited := s.scaleDownLimit(d.Time, d.Current)
		minAllowed, why := minR, ReasonTooFewReplicas
		if limit > minAllowed {
			minAllowed, why = limit, limited
		}
		if stab < minAllowed {
			d.Desired, d.Reason = minAllowed, why
		}
	}
}

// changeInPeriod is getReplicasChangePerPeriod.
func changeInPeriod(now time.Time, period time.Duration, events []timedInt) int {
	cutoff, n := now.Add(-period), 0
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.n
		}
	}
	return n
}

// scaleUpLimit is calculateScaleUpLimitWithScalingRules, floored at current.
func (s *Scaler) scaleUpLimit(now time.Time, current int) (int, Reason) {
	r := s.cfg.up
	if r.sel == SelectDisabled {
		return current, ReasonScalingDisabled
	}
	result := math.MinInt
	pick := func(a, b int) int { return max(a, b) }
	if r.sel == SelectMin {
		result, pick = math.MaxInt, func(a, b int) int { return min(a, b) }
	}
	for _, p := range r.policies {
		start := current - changeInPeriod(now, p.Period, s.upEvents) + changeInPeriod(now, p.Period, s.downEvents)
		var proposed int
		if p.Type == Pods {
			proposed = start + p.Value
		} else {
			proposed = int(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return max(result, current), ReasonScaleUpLimit
}

// scaleDownLimit is calculateScaleDownLimitWithBehaviors, capped at current.
func (s *Scaler) scaleDownLimit(now time.Time, current int) (int, Reason) {
	r := s.cfg.down
	if r.sel == SelectDisabled {
		return current, ReasonScalingDisabled
	}
	result := math.MaxInt
	pick := func(a, b int) int { return min(a, b) }
	if r.sel == SelectMin {
		result, pick = math.MinInt, func(a, b int) int { return max(a, b) }
	}
	for _, p := range r.policies {
		start := current - changeInPeriod(now, p.Period, s.upEvents) + changeInPeriod(now, p.Period, s.downEvents)
		var proposed int
		if p.Type == Pods {
			proposed = start - p.Value
		} else {
			proposed = int(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return min(result, current), ReasonScaleDownLimit
}

// recordEvent is storeScaleEvent: remember HPA rescales for the rate limits,
// dropping events older than the longest policy period.
func (s *Scaler) recordEvent(now time.Time, from, to int) {
	if s.cfg.Behavior == nil || from == to {
		return
	}
	prune := func(ev []timedInt) []timedInt {
		cutoff, kept := now.Add(-s.cfg.longestPeriod), ev[:0]
		for _, e := range ev {
			if e.at.After(cutoff) {
				kept = append(kept, e)
			}
		}
		return kept
	}
	s.upEvents, s.downEvents = prune(s.upEvents), prune(s.downEvents)
	if to > from {
		s.upEvents = append(s.upEvents, timedInt{now, to - from})
	} else {
		s.downEvents = append(s.downEvents, timedInt{now, from - to})
	}
}
