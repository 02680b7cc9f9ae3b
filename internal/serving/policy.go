package serving

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy says how an update moves from one revision to the next. The zero
// value is blue/green all at once with no termination wait (SageMaker's
// default for UpdateEndpoint). At most one of BlueGreen and Rolling is set.
type Policy struct {
	BlueGreen *BlueGreen `json:"blueGreen,omitempty"`
	Rolling   *Rolling   `json:"rolling,omitempty"`
	// MaxDuration bounds the whole rollout; past it the rollout is rolled
	// back (0: no bound beyond the start timeout of each replica).
	MaxDuration time.Duration `json:"maxDuration,omitempty"`
	// Alarms are names of alarms (internal/alarm) checked while the rollout
	// runs; one firing rolls it back.
	Alarms []string `json:"alarms,omitempty"`
}

// Traffic is how blue/green shifts traffic to the new side.
type Traffic string

const (
	AllAtOnce Traffic = "ALL_AT_ONCE"
	Canary    Traffic = "CANARY"
	Linear    Traffic = "LINEAR"
)

// SizeUnit is what a Size counts.
type SizeUnit string

const (
	Instances SizeUnit = "INSTANCE_COUNT"
	Percent   SizeUnit = "CAPACITY_PERCENT"
)

// Size is a number of replicas, absolute or as a percentage of the target.
type Size struct {
	Unit  SizeUnit `json:"unit"`
	Value int      `json:"value"`
}

// Of is the size in replicas for a target of n: at least 1, at most n.
func (s Size) Of(n int) int {
	if n <= 0 {
		return 0
	}
	k := s.Value
	if s.Unit == Percent {
		k = int(math.Ceil(float64(n) * float64(s.Value) / 100))
	}
	return min(max(k, 1), n)
}

// BlueGreen brings the whole new side up next to the old one, then shifts
// traffic (at once, a canary then the rest, or in equal steps), then retires
// the old side after TerminationWait.
type BlueGreen struct {
	Traffic Traffic `json:"traffic"`
	// Step is the canary's size, or each linear step's (Canary, Linear).
	Step Size `json:"step,omitzero"`
	// Wait is how long each traffic step bakes before the next.
	Wait time.Duration `json:"wait,omitempty"`
	// TerminationWait is how long the old side stays up (out of the route)
	// after all traffic has moved, ready for a rollback.
	TerminationWait time.Duration `json:"terminationWait,omitempty"`
}

// Rolling replaces replicas in batches: a new batch starts, and once it is
// healthy an old batch retires. When capacity has no room for a new batch
// (a plan exactly the endpoint's size), the old batch retires first and
// requests wait for the new one instead of failing.
type Rolling struct {
	Batch Size          `json:"batch"`
	Wait  time.Duration `json:"wait,omitempty"`
	// RollbackBatch is the batch size of a rollback (default: Batch).
	RollbackBatch *Size `json:"rollbackBatch,omitempty"`
}

// Limits on policy numbers (SageMaker's, where it has them).
const (
	MaxWait        = time.Hour
	MaxTermination = time.Hour
	MaxDuration    = 28800 * time.Second
	MinDuration    = 600 * time.Second
)

// FieldError names the policy field that is wrong, as a path of the
// protocol's own field names supplied by the caller's translation.
type FieldError struct {
	Field   string // e.g. "rolling.batch.value"
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate checks the policy's numbers and combinations.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	size := func(field string, s Size) {
		switch s.Unit {
		case Instances:
			if s.Value < 1 || s.Value > 1000 {
				bad(field+".value", "must be between 1 and 1000 instances, got %d", s.Value)
			}
		case Percent:
			if s.Value < 1 || s.Value > 100 {
				bad(field+".value", "must be between 1 and 100 percent, got %d", s.Value)
			}
		default:
			bad(field+".unit", "must be %s or %s, got %q", Instances, Percent, s.Unit)
		}
	}
	dur := func(field string, d, hi time.Duration) {
		if d < 0 || d > hi {
			bad(field, "must be between 0 and %d seconds, got %d", int64(hi/time.Second), int64(d/time.Second))
		}
	}
	if p.BlueGreen != nil && p.Rolling != nil {
		bad("blueGreen", "only one of blueGreen and rolling may be set")
	}
	if b := p.BlueGreen; b != nil {
		switch b.Traffic {
		case AllAtOnce:
		case Canary, Linear:
			size("blueGreen.step", b.Step)
			if b.Traffic == Linear && b.Step.Unit == Percent && b.Step.Value > 50 {
				bad("blueGreen.step.value", "a linear step may be at most 50 percent, got %d", b.Step.Value)
			}
		default:
			bad("blueGreen.traffic", "must be %s, %s or %s, got %q", AllAtOnce, Canary, Linear, b.Traffic)
		}
		dur("blueGreen.wait", b.Wait, MaxWait)
		dur("blueGreen.terminationWait", b.TerminationWait, MaxTermination)
	}
	if r := p.Rolling; r != nil {
		size("rolling.batch", r.Batch)
		dur("rolling.wait", r.Wait, MaxWait)
		if r.RollbackBatch != nil {
			size("rolling.rollbackBatch", *r.RollbackBatch)
		}
	}
	if p.MaxDuration != 0 && (p.MaxDuration < MinDuration || p.MaxDuration > MaxDuration) {
		bad("maxDuration", "must be between %d and %d seconds, got %d",
			int64(MinDuration/time.Second), int64(MaxDuration/time.Second), int64(p.MaxDuration/time.Second))
	}
	if len(p.Alarms) > 10 {
		bad("alarms", "at most 10 alarms, got %d", len(p.Alarms))
	}
	return errors.Join(errs...)
}

// Strategy is the policy's rollout strategy.
func (p Policy) Strategy() Strategy {
	switch {
	case p.Rolling != nil:
		return RollingStrategy{Batch: p.Rolling.Batch, Wait: p.Rolling.Wait}
	case p.BlueGreen != nil:
		return BlueGreenStrategy{*p.BlueGreen}
	default:
		return BlueGreenStrategy{BlueGreen{Traffic: AllAtOnce}}
	}
}

// RollbackStrategy is the strategy that takes a failed rollout back to the
// old revision: a rolling policy rolls back in RollbackBatch batches (the old
// side may have been partly retired); blue/green still has its old side and
// moves all traffic back at once.
func (p Policy) RollbackStrategy() Strategy {
	if r := p.Rolling; r != nil {
		b := r.Batch
		if r.RollbackBatch != nil {
			b = *r.RollbackBatch
		}
		return RollingStrategy{Batch: b}
	}
	return BlueGreenStrategy{BlueGreen{Traffic: AllAtOnce}}
}
