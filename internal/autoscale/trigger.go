package autoscale

import (
	"context"
	"fmt"
	"sync"
)

// MetricType says how a trigger's value is turned into a replica proposal,
// as in KEDA's trigger metricType (HPA External metric target types).
type MetricType string

const (
	// AverageValue: the value is a total; the proposal is ceil(value/target).
	// KEDA's default and the one HyperPod calls "Average".
	AverageValue MetricType = "AverageValue"
	// Value: the value is compared with the target as a ratio; the proposal
	// is ceil(current × value/target).
	Value MetricType = "Value"
)

// Target is what a trigger's value is compared with.
type Target struct {
	Type MetricType
	// Value is the HPA target (per replica for AverageValue); must be > 0.
	Value float64
	// Activation is KEDA's activation threshold: the trigger is active when
	// its value is strictly greater than this. Only matters at min = 0.
	Activation float64
}

// Trigger is one metric source the scaler polls. Implementations wrap a
// Prometheus query, a CloudWatch-style statistic or a built-in gauge.
//
// Error contract: Value returns a non-nil error when no trustworthy value
// could be read (source down, more than one series, NaN when nulls are not
// ignored); the scaler then counts a failure for that trigger and never treats
// the missing value as zero. A source that maps "no data" to a default value
// (KEDA's ignoreNullValues / minMetricValue) must do so itself and return nil.
type Trigger interface {
	// Name identifies the trigger in decisions, logs and metrics; it must be
	// unique within one Scaler.
	Name() string
	// Value reads the metric now.
	Value(ctx context.Context) (float64, error)
	// Target returns the target, activation threshold and metric type.
	Target() Target
}

// A Peeker is a Trigger whose reading is in-process and cheap (the
// gateway's own counters, not a remote query), so a controller may read it
// between polls to notice a burst early (Scaler.Pressure). Peek reads the
// source now, never a cached value (it may refresh the cache the polls
// use, so that a poll it causes sees what it saw); it must be safe for
// concurrent use with Value.
type Peeker interface {
	Trigger
	Peek(ctx context.Context) (float64, error)
}

// FakeTrigger is a hand-written, thread-safe Trigger for tests: it returns
// the value or error last set and counts calls.
type FakeTrigger struct {
	name   string
	target Target

	mu    sync.Mutex
	value float64
	err   error
	calls int
}

var _ Trigger = (*FakeTrigger)(nil)

// NewFakeTrigger returns a FakeTrigger reporting value 0.
func NewFakeTrigger(name string, target Target) *FakeTrigger {
	return &FakeTrigger{name: name, target: target}
}

// Set makes Value return v and no error.
func (f *FakeTrigger) Set(v float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.value, f.err = v, nil
}

// Fail makes Value return err.
func (f *FakeTrigger) Fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Calls reports how many times Value was called.
func (f *FakeTrigger) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Name implements Trigger.
func (f *FakeTrigger) Name() string { return f.name }

// Target implements Trigger.
func (f *FakeTrigger) Target() Target { return f.target }

// Value implements Trigger.
func (f *FakeTrigger) Value(ctx context.Context) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("fake trigger %s: %w", f.name, err)
	}
	if f.err != nil {
		return 0, f.err
	}
	return f.value, nil
}
