package appautoscaling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/store"
)

// metricPeriod is the CloudWatch period target tracking reads (one-minute
// datapoints, as AWS's target-tracking alarms use).
const metricPeriod = time.Minute

// Controller evaluates target-tracking policies and sets variant capacity.
// Reconcile is one synchronous evaluation (one datapoint); Run calls it every
// Interval and enforces [Min, Max] as soon as a target is (re)registered.
type Controller struct {
	st   *store.Store
	v    Variants
	opts Options
	log  *slog.Logger
	clk  clock.Clock
	m    *metrics

	mu        sync.Mutex
	readers   map[string]Reader
	state     map[string]*alarmState // by policy key
	notScaled map[string]string      // by target key: the last not-scaled reason recorded
}

// alarmState counts consecutive breaching datapoints of a policy's two alarms.
type alarmState struct {
	high, low int
	lastErr   string // the last read error, to log each distinct one once
}

func newController(st *store.Store, v Variants, o Options) *Controller {
	return &Controller{
		st: st, v: v, opts: o, log: o.Logger, clk: o.Clock, m: newMetrics(o.Registerer),
		readers: map[string]Reader{}, state: map[string]*alarmState{}, notScaled: map[string]string{},
	}
}

// Run evaluates every Interval until ctx is done. Changes to registered
// targets trigger an immediate range check (no metric datapoint), so a new
// MinCapacity above the current count takes effect at once, as in AWS.
func (c *Controller) Run(ctx context.Context) {
	t := c.clk.NewTicker(c.opts.Interval)
	defer t.Stop()
	watch := c.st.Watch(ctx)
	_ = c.reconcile(ctx, false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("application autoscaling evaluation", "err", err)
			}
		case k, ok := <-watch:
			if !ok {
				watch = nil
				continue
			}
			if k.Kind == bucketTargets {
				_ = c.reconcile(ctx, false)
			}
		}
	}
}

// Reconcile evaluates every scalable target once: it reads each policy's
// metric (one datapoint), advances the alarms and scales where they say so.
// Errors of individual targets are joined; the others are still evaluated.
func (c *Controller) Reconcile(ctx context.Context) error { return c.reconcile(ctx, true) }

// policyEval is one policy's reading in one evaluation.
type policyEval struct {
	p        policyRecord
	metric   string // what the logs and details call it
	value    float64
	ok       bool
	target   float64
	proposal int
	out, in  bool // the high / low alarm is in ALARM
	noIn     bool // DisableScaleIn
	high     int
	low      int
}

type readKey struct {
	endpoint, variant, metric, stat string
}

type readResult struct {
	v   float64
	err error
}

func (c *Controller) reconcile(ctx context.Context, evaluate bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var targets []targetRecord
	var pols []policyRecord
	err := c.st.View(func(tx *store.Tx) error {
		var err error
		if targets, err = store.List[targetRecord](tx, bucketTargets); err != nil {
			return err
		}
		pols, err = store.List[policyRecord](tx, bucketPolicies)
		return err
	})
	if err != nil {
		return fmt.Errorf("application autoscaling: load: %w", err)
	}
	byTarget := map[targetKey][]policyRecord{}
	livePolicies := map[string]bool{}
	for _, p := range pols {
		byTarget[p.Target] = append(byTarget[p.Target], p)
		livePolicies[p.key()] = true
	}
	for k := range c.state {
		if !livePolicies[k] {
			delete(c.state, k)
		}
	}
	liveT := map[[2]string]bool{}
	liveP := map[[3]string]bool{}
	liveTargetKeys := map[string]bool{}
	liveEndpoints := map[string]bool{}
	for _, t := range targets {
		liveT[[2]string{t.Endpoint, t.Variant}] = true
		liveTargetKeys[t.Key.String()] = true
		liveEndpoints[t.Endpoint] = true
		for _, p := range byTarget[t.Key] {
			liveP[[3]string{t.Endpoint, t.Variant, p.Name}] = true
			if cus := p.Config.CustomizedMetricSpecification; cus != nil {
				ep, _ := customTarget(t, cus)
				liveEndpoints[ep] = true
			}
		}
	}
	for k := range c.notScaled {
		if !liveTargetKeys[k] {
			delete(c.notScaled, k)
		}
	}
	for ep := range c.readers {
		if !liveEndpoints[ep] {
			delete(c.readers, ep)
		}
	}
	c.m.prune(liveT, liveP)

	cache := map[readKey]readResult{}
	var errs []error
	for _, t := range targets {
		if err := c.reconcileTarget(ctx, t, byTarget[t.Key], evaluate, cache); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) reconcileTarget(ctx context.Context, t targetRecord, pols []policyRecord, evaluate bool, cache map[readKey]readResult) error {
	cur, limit, err := c.v.Variant(ctx, t.Endpoint, t.Variant)
	if err != nil {
		return fmt.Errorf("%s: %w", t.Key.ResourceID, err)
	}
	c.m.setDesired(t.Endpoint, t.Variant, cur)
	hi, capNote := t.Max, fmt.Sprintf("maximum capacity %d", t.Max)
	if limit > 0 && limit < hi {
		hi, capNote = limit, fmt.Sprintf("reservation limit %d", limit)
	}
	lo := min(t.Min, hi)
	now := c.clk.Now()

	// The registered range (and the reservation) win over any policy.
	switch {
	case cur < lo:
		return c.scale(ctx, t, cur, lo, dirNone, fmt.Sprintf("minimum capacity was set to %d", t.Min),
			fmt.Sprintf("current %d < minimum capacity %d", cur, lo))
	case cur > hi:
		cause := fmt.Sprintf("maximum capacity was set to %d", t.Max)
		if hi < t.Max {
			cause = fmt.Sprintf("the variant's reservation allows at most %d instances", hi)
		}
		return c.scale(ctx, t, cur, hi, dirNone, cause, fmt.Sprintf("current %d > %s", cur, capNote))
	}
	if !evaluate || len(pols) == 0 {
		return nil
	}

	evals := make([]policyEval, 0, len(pols))
	for _, p := range pols {
		evals = append(evals, c.evaluate(ctx, t, p, cur, cache))
	}

	// Scale out when any policy's high alarm fires; the largest proposal wins.
	var best *policyEval
	for i := range evals {
		if e := &evals[i]; e.out && (best == nil || e.proposal > best.proposal) {
			best = e
		}
	}
	if best != nil {
		if t.SuspendOut {
			c.log.Debug("application autoscaling: scale-out suspended", "resource", t.Key.ResourceID, "policy", best.p.Name)
			return nil
		}
		cd := c.cooldown(best.p.Config.ScaleOutCooldown)
		if !t.LastScaleOut.IsZero() && now.Before(t.LastScaleOut.Add(cd)) {
			c.log.Debug("application autoscaling: in scale-out cooldown", "resource", t.Key.ResourceID, "policy", best.p.Name,
				"until", t.LastScaleOut.Add(cd), "value", best.value, "target", best.target)
			return nil
		}
		want := min(best.proposal, hi)
		details := best.details(cur, hi, capNote)
		if want <= cur {
			return c.notScaledActivity(t, cur, "AlreadyAtMaxCapacity", best.proposal, alarmCause(best.p, true), details, lo, hi)
		}
		return c.scale(ctx, t, cur, want, dirOut, alarmCause(best.p, true), details)
	}

	// Scale in only when every policy that may scale in agrees (a policy
	// without data, or at target, vetoes); the largest proposal wins, so the
	// least capacity is removed.
	var voters []*policyEval
	for i := range evals {
		if !evals[i].noIn {
			voters = append(voters, &evals[i])
		}
	}
	if len(voters) == 0 {
		return nil
	}
	best = nil
	var cd time.Duration
	for _, e := range voters {
		if !e.in {
			return nil
		}
		if best == nil || e.proposal > best.proposal {
			best = e
		}
		cd = max(cd, c.cooldown(e.p.Config.ScaleInCooldown))
	}
	if t.SuspendIn {
		c.log.Debug("application autoscaling: scale-in suspended", "resource", t.Key.ResourceID)
		return nil
	}
	// Scale-in waits ScaleInCooldown after any scaling activity: capacity
	// just added must serve a while before it is judged idle.
	last := t.LastScaleIn
	if t.LastScaleOut.After(last) {
		last = t.LastScaleOut
	}
	if !last.IsZero() && now.Before(last.Add(cd)) {
		c.log.Debug("application autoscaling: in scale-in cooldown", "resource", t.Key.ResourceID, "until", last.Add(cd))
		return nil
	}
	want := max(best.proposal, lo)
	details := best.details(cur, hi, capNote)
	if want >= cur {
		return c.notScaledActivity(t, cur, "AlreadyAtMinCapacity", best.proposal, alarmCause(best.p, false), details, lo, hi)
	}
	return c.scale(ctx, t, cur, want, dirIn, alarmCause(best.p, false), details)
}

// evaluate reads one policy's metric and advances its alarms.
func (c *Controller) evaluate(ctx context.Context, t targetRecord, p policyRecord, cur int, cache map[readKey]readResult) policyEval {
	cfg := p.Config
	e := policyEval{p: p, target: *cfg.TargetValue, noIn: cfg.DisableScaleIn != nil && *cfg.DisableScaleIn}
	rk := readKey{t.Endpoint, t.Variant, "InvocationsPerInstance", "Sum"}
	e.metric = PredefinedInvocationsPerInstance
	if cus := cfg.CustomizedMetricSpecification; cus != nil {
		ep, variant := customTarget(t, cus)
		rk = readKey{ep, variant, *cus.MetricName, *cus.Statistic}
		e.metric = fmt.Sprintf("%s/%s %s", *cus.Namespace, *cus.MetricName, *cus.Statistic)
	}
	res, ok := cache[rk]
	if !ok {
		res = c.read(ctx, rk)
		cache[rk] = res
	}
	st := c.state[p.key()]
	if st == nil {
		st = &alarmState{}
		c.state[p.key()] = st
	}
	if res.err != nil {
		// Missing data breaks the run of breaching datapoints: the alarms
		// never fire on data they did not see.
		st.high, st.low = 0, 0
		level := slog.LevelDebug
		if st.lastErr != res.err.Error() { // warn once per distinct failure
			level = slog.LevelWarn
			st.lastErr = res.err.Error()
		}
		c.log.Log(ctx, level, "application autoscaling: metric unavailable", "resource", t.Key.ResourceID, "policy", p.Name, "metric", e.metric, "err", res.err)
		return e
	}
	st.lastErr = ""
	e.ok, e.value = true, res.v
	c.m.setValue(t.Endpoint, t.Variant, p.Name, res.v)
	switch {
	case res.v > e.target:
		st.high++
		st.low = 0
	case res.v < c.opts.ScaleInRatio*e.target:
		st.low++
		st.high = 0
	default:
		st.high, st.low = 0, 0
	}
	e.high, e.low = st.high, st.low
	// The capacity that would bring the metric back to the target, assuming
	// it scales inversely with capacity. The epsilon keeps float noise
	// (3.0000000004) from adding an instance.
	// Converted only once within [0, endpoint.MaxInstancesPerVariant]: a
	// float past an int's range converts to an implementation-defined value
	// (a negative one on amd64).
	switch f := math.Ceil(float64(cur)*res.v/e.target - 1e-9); {
	case f >= endpoint.MaxInstancesPerVariant:
		e.proposal = endpoint.MaxInstancesPerVariant
	case f > 0:
		e.proposal = int(f)
	default:
		e.proposal = 0
	}
	if cur == 0 && res.v > 0 {
		e.proposal = 1
	}
	e.out = st.high >= c.opts.ScaleOutDatapoints
	e.in = st.low >= c.opts.ScaleInDatapoints && !e.noIn
	return e
}

func (c *Controller) read(ctx context.Context, k readKey) readResult {
	if c.opts.NewReader == nil {
		return readResult{err: errors.New("no metric reader is configured")}
	}
	r := c.readers[k.endpoint]
	if r == nil {
		r = c.opts.NewReader(k.endpoint)
		c.readers[k.endpoint] = r
	}
	v, err := r.Read(ctx, k.variant, k.metric, k.stat, metricPeriod)
	if errors.Is(err, triggers.ErrNoData) && countsZero(k.metric, k.stat) {
		// CloudWatch publishes no datapoint for a minute without
		// invocations, so on AWS an idle endpoint never scales in; capstan's
		// gateway knows that no request arrived, and a count of nothing is 0.
		return readResult{0, nil}
	}
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = fmt.Errorf("metric %s is %v", k.metric, v)
	}
	return readResult{v, err}
}

// countsZero says whether "no datapoint" of a metric and statistic means 0:
// sums and counts of per-invocation samples.
func countsZero(metric, stat string) bool {
	switch triggers.Metric(metric) {
	case triggers.MetricInvocations, triggers.MetricInvocationsPerInstance, triggers.MetricInvocation4XXErrors,
		triggers.MetricInvocation5XXErrors, triggers.MetricInvocationModelErrors:
		return stat == "Sum" || stat == "SampleCount"
	}
	return false
}

// customTarget is the endpoint and variant a customized metric's dimensions
// name; without dimensions it is the target's own variant, with an
// EndpointName but no VariantName the whole endpoint.
func customTarget(t targetRecord, cus *CustomizedMetricSpecification) (ep, variant string) {
	if len(cus.Dimensions) == 0 {
		return t.Endpoint, t.Variant
	}
	ep = t.Endpoint
	for _, d := range cus.Dimensions {
		switch d.Name {
		case "EndpointName":
			ep = d.Value
		case "VariantName":
			variant = d.Value
		}
	}
	return ep, variant
}

func (c *Controller) cooldown(s *int) time.Duration {
	if s == nil {
		return c.opts.DefaultCooldown
	}
	return time.Duration(*s) * time.Second
}

func alarmCause(p policyRecord, high bool) string {
	name := ""
	for _, a := range p.Alarms {
		if high == strings.Contains(a.AlarmName, "-AlarmHigh-") {
			name = a.AlarmName
			break
		}
	}
	return fmt.Sprintf("monitor alarm %s in state ALARM triggered policy %s", name, p.Name)
}

func (e *policyEval) details(cur, hi int, capNote string) string {
	return fmt.Sprintf("policy %s: %s = %g (target %g; %d consecutive datapoints above target, %d below the scale-in threshold); current %d; ceil(%d × %g / %g) = %d; %s",
		e.p.Name, e.metric, e.value, e.target, e.high, e.low, cur, cur, e.value, e.target, e.proposal, capNote)
}

type direction int

const (
	dirNone direction = iota
	dirOut
	dirIn
)

// scale sets the variant to want and records the activity.
func (c *Controller) scale(ctx context.Context, t targetRecord, cur, want int, dir direction, cause, details string) error {
	now := c.clk.Now()
	err := c.v.SetDesired(ctx, t.Endpoint, t.Variant, want)
	if e, ok := endpoint.AsError(err); ok && e.Kind == endpoint.ErrInProgress {
		// The endpoint is mid-update; the alarm is still in ALARM at the
		// next evaluation, which retries.
		c.log.Info("application autoscaling: endpoint busy, will retry", "resource", t.Key.ResourceID, "current", cur, "desired", want)
		return nil
	}
	act := ScalingActivity{
		ActivityId: c.opts.NewID(), ServiceNamespace: t.Key.Namespace, ResourceId: t.Key.ResourceID, ScalableDimension: t.Key.Dimension,
		Description: fmt.Sprintf("Setting desired instance count to %d.", want),
		Cause:       cause, StartTime: awsjson.EpochOf(now), EndTime: awsjson.EpochOf(now), Details: details,
	}
	level := slog.LevelInfo
	if err != nil {
		act.StatusCode = StatusFailed
		act.StatusMessage = fmt.Sprintf("Failed to set desired instance count to %d. Reason: %v", want, err)
		level = slog.LevelWarn
	} else {
		act.StatusCode = StatusSuccessful
		act.StatusMessage = fmt.Sprintf("Successfully set desired instance count to %d. Change successfully fulfilled by sagemaker.", want)
		c.m.setDesired(t.Endpoint, t.Variant, want)
		delete(c.notScaled, t.Key.String())
	}
	c.log.Log(ctx, level, "application autoscaling: scaling", "resource", t.Key.ResourceID, "endpoint", t.Endpoint, "variant", t.Variant,
		"current", cur, "desired", want, "cause", cause, "details", details, "status", act.StatusCode, "err", err)
	// Only a successful policy action touches the target record: a write
	// there wakes Run's range check, which must not loop on a failing
	// SetDesired.
	var mutate func(*targetRecord)
	if err == nil && dir == dirOut {
		mutate = func(r *targetRecord) { r.LastScaleOut = now }
	} else if err == nil && dir == dirIn {
		mutate = func(r *targetRecord) { r.LastScaleIn = now }
	}
	if serr := c.record(t.Key, act, mutate); serr != nil {
		return serr
	}
	if err != nil {
		return fmt.Errorf("%s: set desired %d: %w", t.Key.ResourceID, want, err)
	}
	return nil
}

// notScaledActivity records (once per distinct situation) that an alarm
// wanted to scale but the range stopped it.
func (c *Controller) notScaledActivity(t targetRecord, cur int, code string, proposal int, cause, details string, lo, hi int) error {
	sig := fmt.Sprintf("%s/%d", code, cur)
	if c.notScaled[t.Key.String()] == sig {
		return nil
	}
	c.notScaled[t.Key.String()] = sig
	now := c.clk.Now()
	r := NotScaledReason{Code: code, CurrentCapacity: intp(cur)}
	if code == "AlreadyAtMaxCapacity" {
		r.MaxCapacity = intp(hi)
	} else {
		r.MinCapacity = intp(lo)
	}
	act := ScalingActivity{
		ActivityId: c.opts.NewID(), ServiceNamespace: t.Key.Namespace, ResourceId: t.Key.ResourceID, ScalableDimension: t.Key.Dimension,
		Description: fmt.Sprintf("Attempting to set desired instance count to %d.", proposal),
		Cause:       cause, StartTime: awsjson.EpochOf(now), EndTime: awsjson.EpochOf(now), Details: details,
		StatusCode: StatusFailed, StatusMessage: "Not scaled: " + code,
		NotScaledReasons: []NotScaledReason{r},
	}
	c.log.Info("application autoscaling: not scaled", "resource", t.Key.ResourceID, "reason", code, "current", cur, "proposal", proposal, "details", details)
	return c.record(t.Key, act, nil)
}

// record stores an activity (pruning the target's oldest beyond the
// retention) and applies mutate to the target record, in one transaction.
func (c *Controller) record(k targetKey, act ScalingActivity, mutate func(*targetRecord)) error {
	return c.st.Update(func(tx *store.Tx) error {
		if mutate != nil {
			var t targetRecord
			found, err := tx.Get(bucketTargets, k.String(), &t)
			if err != nil {
				return err
			}
			if found { // deregistered meanwhile: keep the history, skip the state
				mutate(&t)
				if err := tx.Put(bucketTargets, k.String(), &t); err != nil {
					return err
				}
			}
		}
		if err := tx.Put(bucketActivities, activityKey(k, act.StartTime.Time, act.ActivityId), activityRecord{Target: k, ScalingActivity: act}); err != nil {
			return err
		}
		prefix := k.String() + "|"
		var keys []string
		if err := tx.Each(bucketActivities, func(name string, _ []byte) error {
			if strings.HasPrefix(name, prefix) {
				keys = append(keys, name)
			}
			return nil
		}); err != nil {
			return err
		}
		for i := 0; i < len(keys)-c.opts.MaxActivitiesRetained; i++ {
			if err := tx.Delete(bucketActivities, keys[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func sortActivitiesNewestFirst(acts []ScalingActivity) {
	sort.SliceStable(acts, func(i, j int) bool {
		a, b := acts[i].StartTime.Time, acts[j].StartTime.Time
		if !a.Equal(b) {
			return a.After(b)
		}
		return acts[i].ActivityId > acts[j].ActivityId
	})
}
