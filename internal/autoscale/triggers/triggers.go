package triggers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// Source is where cloudWatch-style and built-in triggers read live numbers:
// the endpoint's variants from Snapshot, the metrics from the store of a
// MetricSource. *gateway.Gateway satisfies both.
type Source interface {
	Snapshot(endpoint string) gateway.EndpointSnapshot
}

var _ Source = (*gateway.Gateway)(nil)

// Env is what Build needs besides the spec.
type Env struct {
	// Endpoint is the gateway route name of the deployment.
	Endpoint string
	Source   Source
	Clock    clock.Clock
	// HTTPClient is used for Prometheus queries; nil means a default client
	// with a 5 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// The trigger used when a spec names none: requests at the endpoint (in
// flight plus queued) per replica, target 4, compared as a ratio (Value), so
// that desired = ceil(current × value / 4). The window is the polling
// interval, so every poll sees fresh numbers.
const (
	DefaultTriggerMetric = MetricInFlightPerReplica
	DefaultTriggerTarget = 4.0
)

// Fallback defaults: after more than DefaultFailureThreshold consecutive
// failures a trigger reports KEDA's synthetic value for
// max(current, max(minReplicas, 1)) replicas (currentReplicasIfHigher), so a
// failing source holds the deployment where it is and never scales it down
// — in particular never to zero — while it is broken.
const DefaultFailureThreshold = 3

// defaultHTTPTimeout bounds one Prometheus query when Env.HTTPClient is nil.
const defaultHTTPTimeout = 5 * time.Second

// Build turns a manifest autoScalingSpec into the scaler config and its
// triggers. spec may be undefaulted (Build applies the HyperPod defaults to a
// copy) or nil (all defaults). No trigger in the spec → one built-in default
// trigger (DefaultTriggerMetric). The *List form of a trigger wins over the
// single form, as in HyperPod.
func Build(spec *manifest.AutoScalingSpec, env Env) (autoscale.Config, []autoscale.Trigger, error) {
	if env.Clock == nil {
		return autoscale.Config{}, nil, fmt.Errorf("triggers: Env.Clock is required")
	}
	s := copySpec(spec)
	s.Default(env.Endpoint)

	cfg := autoscale.Config{
		MinReplicas:           int(*s.MinReplicaCount),
		MaxReplicas:           int(*s.MaxReplicaCount),
		PollingInterval:       seconds(*s.PollingInterval),
		CooldownPeriod:        seconds(*s.CooldownPeriod),
		InitialCooldownPeriod: seconds(*s.InitialCooldownPeriod),
	}
	up, down := seconds(*s.ScaleUpStabilizationTime), seconds(*s.ScaleDownStabilizationTime)
	cfg.Behavior = &autoscale.Behavior{
		ScaleUp:   &autoscale.Rules{StabilizationWindow: &up},
		ScaleDown: &autoscale.Rules{StabilizationWindow: &down},
	}
	cfg.Fallback = &autoscale.Fallback{
		FailureThreshold: DefaultFailureThreshold,
		Replicas:         max(cfg.MinReplicas, 1),
		Behavior:         autoscale.FallbackCurrentReplicasIfHigher,
	}

	cws := s.CloudWatchTriggerList
	cwPath := "autoScalingSpec.cloudWatchTriggerList"
	if len(cws) == 0 && s.CloudWatchTrigger != nil {
		cws, cwPath = []manifest.CloudWatchTrigger{*s.CloudWatchTrigger}, "autoScalingSpec.cloudWatchTrigger"
	}
	proms := s.PrometheusTriggerList
	pPath := "autoScalingSpec.prometheusTriggerList"
	if len(proms) == 0 && s.PrometheusTrigger != nil {
		proms, pPath = []manifest.PrometheusTrigger{*s.PrometheusTrigger}, "autoScalingSpec.prometheusTrigger"
	}

	var out []autoscale.Trigger
	seen := map[string]string{}
	add := func(t autoscale.Trigger, field string) error {
		if prev, dup := seen[t.Name()]; dup {
			return fmt.Errorf("triggers: %s.name: %q is also the name of %s", field, t.Name(), prev)
		}
		seen[t.Name()] = field
		out = append(out, t)
		return nil
	}
	for i := range cws {
		field := cwPath
		if len(s.CloudWatchTriggerList) > 0 {
			field += "[" + strconv.Itoa(i) + "]"
		}
		t, err := newCloudWatchTrigger(&cws[i], cfg.PollingInterval, env, field)
		if err != nil {
			return cfg, nil, err
		}
		if err := add(t, field); err != nil {
			return cfg, nil, err
		}
	}
	for i := range proms {
		field := pPath
		if len(s.PrometheusTriggerList) > 0 {
			field += "[" + strconv.Itoa(i) + "]"
		}
		t, err := newPrometheusTrigger(&proms[i], cfg.PollingInterval, env, field)
		if err != nil {
			return cfg, nil, err
		}
		if err := add(t, field); err != nil {
			return cfg, nil, err
		}
	}
	if len(out) == 0 {
		t, err := defaultTrigger(cfg.PollingInterval, env)
		if err != nil {
			return cfg, nil, err
		}
		out = append(out, t)
	}
	// Let the scaler's own validation speak now rather than at first use.
	if _, err := autoscale.New(cfg, env.Clock, out...); err != nil {
		return cfg, nil, fmt.Errorf("triggers: %w", err)
	}
	names := make([]string, len(out))
	for i, t := range out {
		names[i] = t.Name()
	}
	env.logger().Debug("autoscaling triggers built", "endpoint", env.Endpoint,
		"min", cfg.MinReplicas, "max", cfg.MaxReplicas, "polling", cfg.PollingInterval, "triggers", names)
	return cfg, out, nil
}

func (e Env) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// defaultTrigger is the built-in trigger used when the spec names none.
func defaultTrigger(polling time.Duration, env Env) (autoscale.Trigger, error) {
	target, activation := DefaultTriggerTarget, 0.0
	ct := manifest.CloudWatchTrigger{
		Name:                  env.Endpoint + "-default-trigger",
		Namespace:             NamespaceCapstan,
		MetricName:            string(DefaultTriggerMetric),
		TargetValue:           &target,
		ActivationTargetValue: &activation,
		MetricType:            manifest.MetricTypeValue,
	}
	per := int32(max(1, polling/time.Second))
	ct.MetricCollectionPeriod = &per
	ct.MetricCollectionStartTime = &per
	ct.MetricStat = "Average"
	minV := 0.0
	ct.MinValue = &minV
	noCache := false
	ct.UseCachedMetrics = &noCache
	return newCloudWatchTrigger(&ct, polling, env, "autoScalingSpec (default trigger)")
}

// target maps the manifest's metricType and values onto autoscale.Target:
// HyperPod's "Average" is KEDA's AverageValue, "Value" is Value.
func target(metricType string, value, activation *float64) autoscale.Target {
	t := autoscale.Target{Type: autoscale.AverageValue}
	if metricType == manifest.MetricTypeValue {
		t.Type = autoscale.Value
	}
	if value != nil {
		t.Value = *value
	}
	if activation != nil {
		t.Activation = *activation
	}
	return t
}

func seconds(v int32) time.Duration { return time.Duration(v) * time.Second }

// copySpec deep-copies what Default mutates, so Build never writes to the
// caller's (stored) spec.
func copySpec(spec *manifest.AutoScalingSpec) *manifest.AutoScalingSpec {
	if spec == nil {
		return &manifest.AutoScalingSpec{}
	}
	s := *spec
	if spec.CloudWatchTrigger != nil {
		c := *spec.CloudWatchTrigger
		s.CloudWatchTrigger = &c
	}
	if spec.PrometheusTrigger != nil {
		c := *spec.PrometheusTrigger
		s.PrometheusTrigger = &c
	}
	s.CloudWatchTriggerList = slices.Clone(spec.CloudWatchTriggerList)
	s.PrometheusTriggerList = slices.Clone(spec.PrometheusTriggerList)
	return &s
}

// valueCache implements useCachedMetrics: a value read less than half a
// polling interval ago is served again instead of querying the source (KEDA
// serves the HPA the value of its last poll). Half, not a whole interval, so
// that the scaler's own polls — about one interval apart, give or take
// scheduling jitter — always read fresh values, while extra reads in between
// (an immediate reconcile on activation, status pages) do not hit the source.
// Without it a trigger queries its source on every Value call.
type valueCache struct {
	ttl time.Duration
	clk clock.Clock

	mu sync.Mutex
	at time.Time
	v  float64
	ok bool
}

func (c *valueCache) get(ctx context.Context, read func(context.Context) (float64, error)) (float64, error) {
	if c == nil {
		return read(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	if c.ok && now.Sub(c.at) < c.ttl {
		return c.v, nil
	}
	v, err := read(ctx)
	if err != nil {
		// Errors are never cached: the next poll retries.
		c.ok = false
		return v, err
	}
	c.at, c.v, c.ok = now, v, true
	return v, nil
}

// put records a value read outside get (a peek) as the newest reading.
func (c *valueCache) put(v float64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.v, c.ok = c.clk.Now(), v, true
}

func newCache(use *bool, ttl time.Duration, clk clock.Clock) *valueCache {
	if use == nil || !*use {
		return nil
	}
	return &valueCache{ttl: ttl / 2, clk: clk}
}
