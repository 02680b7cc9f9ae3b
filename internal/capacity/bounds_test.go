package capacity

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// TestSetRefusesHugeCounts: a count past any fleet (MaxInt64, as two wrapped
// variant counts would give) is a limit error and writes nothing, for
// on-demand and plan sources alike.
func TestSetRefusesHugeCounts(t *testing.T) {
	cal, _, st := newCal(t, fleet.Capacity{p5: {"a": 4}})
	plan := placement.OnPlan(placement.PlanRef{Key: "plan"})
	for _, want := range []placement.Want{
		{placement.OnDemand(p5): math.MaxInt},
		{placement.OnDemand(p5): placement.MaxInstancesPerOwner + 1},
		{plan: math.MaxInt},
	} {
		err := st.Update(func(tx *store.Tx) error { return cal.Set(tx, "ep", want) })
		var le *fleet.LimitError
		var pe *placement.LimitError
		if !errors.As(err, &le) && !errors.As(err, &pe) {
			t.Fatalf("Set(%v) = %v, want a limit error", want, err)
		}
		_ = st.View(func(tx *store.Tx) error {
			if tx.Exists(KindHoldings, "ep") {
				t.Fatalf("Set(%v) wrote a holding", want)
			}
			return nil
		})
	}
}

func TestAddHeldSaturates(t *testing.T) {
	for _, tt := range []struct{ a, b, want int }{
		{1, 2, 3},
		{math.MaxInt, math.MaxInt, math.MaxInt32},
		{-5, 3, 3},
		{math.MaxInt32, 1, math.MaxInt32},
	} {
		if got := addHeld(tt.a, tt.b); got != tt.want {
			t.Errorf("addHeld(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestSearchBounds: counts and durations outside SageMaker's ranges, and a
// window that has already closed, are refused, and times past the calendar's int64-nanosecond range neither wrap
// nor loop.
func TestSearchBounds(t *testing.T) {
	cal, _, _ := newCal(t, fleet.Capacity{p5: {"a": 4}})
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		mod     func(q *Query)
		invalid bool
		offers  bool
	}{
		{"count 0", func(q *Query) { q.Count = 0 }, true, false},
		{"count 257", func(q *Query) { q.Count = MaxPlanInstances + 1 }, true, false},
		{"count MaxInt", func(q *Query) { q.Count = math.MaxInt }, true, false},
		{"duration 0", func(q *Query) { q.Duration = 0 }, true, false},
		{"duration over ten years", func(q *Query) { q.Duration = MaxPlanDuration + time.Hour }, true, false},
		{"start in year 9999", func(q *Query) { q.StartAfter, q.EndBefore = far, time.Time{} }, false, false},
		{"end in year 9999", func(q *Query) { q.EndBefore = far }, false, true},
		{"ten-year plan, no end", func(q *Query) { q.Duration, q.EndBefore = MaxPlanDuration, time.Time{} }, false, true},
		{"window already closed", func(q *Query) { q.StartAfter, q.EndBefore = t0.Add(-72*time.Hour), t0.Add(-time.Hour) }, true, false},
		{"window ends now", func(q *Query) { q.StartAfter, q.EndBefore = t0.Add(-72*time.Hour), t0 }, true, false},
		{"start in the past, end ahead", func(q *Query) { q.StartAfter = t0.Add(-72 * time.Hour) }, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := week(1)
			tt.mod(&q)
			offers, err := cal.Search(q)
			if e, ok := AsError(err); tt.invalid != (ok && e.Kind == ErrInvalid) {
				t.Fatalf("err = %v, want invalid=%v", err, tt.invalid)
			}
			if (len(offers) > 0) != tt.offers {
				t.Fatalf("%d offerings, want some=%v", len(offers), tt.offers)
			}
			for _, o := range offers {
				if !o.End.After(o.Start) || o.Start.Before(t0) {
					t.Fatalf("offering %v..%v", o.Start, o.End)
				}
			}
		})
	}
}
