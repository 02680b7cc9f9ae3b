package serving

import (
	"testing"
	"time"
)

func TestBlueGreen(t *testing.T) {
	canary := BlueGreen{Traffic: Canary, Step: Size{Instances, 1}, Wait: time.Minute, TerminationWait: 5 * time.Minute}
	linear := BlueGreen{Traffic: Linear, Step: Size{Percent, 25}, Wait: time.Minute}
	tests := []struct {
		name string
		bg   BlueGreen
		p    Progress
		want Step
	}{
		{"green starting: blue keeps everything", BlueGreen{Traffic: AllAtOnce},
			Progress{Target: 2, New: 2, NewHealthy: 1, Old: 2}, Step{New: 2, Old: 2}},
		{"fresh: record the whole green side", BlueGreen{Traffic: AllAtOnce},
			Progress{Target: 3, Old: 3}, Step{New: 3, Old: 3}},
		{"all at once: green healthy → all traffic, blue retires", BlueGreen{Traffic: AllAtOnce},
			Progress{Target: 2, New: 2, NewHealthy: 2, Old: 2}, Step{New: 2, Share: 1, Done: true}},
		{"all at once with termination wait: blue waits", BlueGreen{Traffic: AllAtOnce, TerminationWait: time.Minute},
			Progress{Target: 2, New: 2, NewHealthy: 2, Old: 2}, Step{New: 2, Old: 2, Share: 1}},
		{"all at once, no termination wait: blue retires", BlueGreen{Traffic: AllAtOnce},
			Progress{Target: 2, New: 2, NewHealthy: 2, Old: 2, Share: 1}, Step{New: 2, Share: 1, Done: true}},
		{"canary first step", canary,
			Progress{Target: 4, New: 4, NewHealthy: 4, Old: 4}, Step{New: 4, Old: 4, Share: 0.25}},
		{"canary baking", canary,
			Progress{Target: 4, New: 4, NewHealthy: 4, Old: 4, Share: 0.25, Since: 30 * time.Second}, Step{New: 4, Old: 4, Share: 0.25}},
		{"canary baked: the rest", canary,
			Progress{Target: 4, New: 4, NewHealthy: 4, Old: 4, Share: 0.25, Since: time.Minute}, Step{New: 4, Old: 4, Share: 1}},
		{"termination wait holds blue", canary,
			Progress{Target: 4, New: 4, NewHealthy: 4, Old: 4, Share: 1, Since: time.Minute}, Step{New: 4, Old: 4, Share: 1}},
		{"termination wait over", canary,
			Progress{Target: 4, New: 4, NewHealthy: 4, Old: 4, Share: 1, Since: 5 * time.Minute}, Step{New: 4, Share: 1, Done: true}},
		{"linear step 2", linear,
			Progress{Target: 4, New: 4, NewHealthy: 4, Old: 4, Share: 0.25, Since: time.Minute}, Step{New: 4, Old: 4, Share: 0.5}},
		{"linear last step lands on 1", linear,
			Progress{Target: 3, New: 3, NewHealthy: 3, Old: 3, Share: 2.0 / 3, Since: time.Minute}, Step{New: 3, Share: 1, Done: true}},
		{"a green replica dies mid-shift: share holds", canary,
			Progress{Target: 4, New: 4, NewHealthy: 3, Old: 4, Share: 0.25, Since: time.Hour}, Step{New: 4, Old: 4, Share: 0.25}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := (BlueGreenStrategy{tc.bg}).Next(tc.p); got != tc.want {
				t.Fatalf("Next(%+v) = %+v, want %+v", tc.p, got, tc.want)
			}
		})
	}
}

func TestRolling(t *testing.T) {
	one := RollingStrategy{Batch: Size{Instances, 1}, Wait: 10 * time.Second}
	tests := []struct {
		name string
		s    RollingStrategy
		p    Progress
		want Step
	}{
		{"first batch", one, Progress{Target: 3, Old: 3}, Step{New: 1, Old: 3}},
		{"batch starting: old covers", one, Progress{Target: 3, New: 1, Old: 3, Since: time.Minute}, Step{New: 1, Old: 3}},
		{"batch healthy: one old retires, wait before the next", one,
			Progress{Target: 3, New: 1, NewHealthy: 1, Old: 3, Since: time.Second}, Step{New: 1, Old: 2}},
		{"wait over: next batch", one,
			Progress{Target: 3, New: 1, NewHealthy: 1, Old: 2, Since: 10 * time.Second}, Step{New: 2, Old: 2}},
		{"last batch healthy: done", one,
			Progress{Target: 3, New: 3, NewHealthy: 3, Old: 1}, Step{New: 3, Done: true}},
		{"no room: the old replica retires first", one,
			Progress{Target: 1, New: 1, NewBlocked: 1, Old: 1}, Step{New: 1}},
		{"no room but one is starting: wait", RollingStrategy{Batch: Size{Instances, 2}},
			Progress{Target: 2, New: 2, NewBlocked: 1, Old: 2}, Step{New: 2, Old: 2}},
		{"make room one at a time", RollingStrategy{Batch: Size{Percent, 100}, MakeRoom: 1},
			Progress{Target: 4, New: 4, NewBlocked: 4, Old: 4}, Step{New: 4, Old: 3}},
		{"percent batch", RollingStrategy{Batch: Size{Percent, 50}},
			Progress{Target: 4, Old: 4}, Step{New: 2, Old: 4}},
		{"scale-in during rollout", one,
			Progress{Target: 1, New: 2, NewHealthy: 2, Old: 1}, Step{New: 1, Done: true}},
		{"batch of the whole target: a raised target starts the rest at once", RollingStrategy{Batch: Size{Percent, 100}, MakeRoom: 1},
			Progress{Target: 3, New: 2, NewHealthy: 1, Old: 2}, Step{New: 3, Old: 2}},
		{"batch of the whole target, nothing to replace: scale-out while one starts", RollingStrategy{Batch: Size{Percent, 100}, MakeRoom: 1},
			Progress{Target: 3, New: 2, NewHealthy: 1}, Step{New: 3}},
		{"smaller batch: a raised target waits for the batch", one,
			Progress{Target: 4, New: 2, NewHealthy: 1, Old: 2, Since: time.Minute}, Step{New: 2, Old: 2}},
		{"make room retires one old replica in all, not one beyond coverage", RollingStrategy{Batch: Size{Percent, 100}, MakeRoom: 1},
			Progress{Target: 2, New: 2, NewBlocked: 2, Old: 3}, Step{New: 2, Old: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Next(tc.p); got != tc.want {
				t.Fatalf("Next(%+v) = %+v, want %+v", tc.p, got, tc.want)
			}
		})
	}
}

// TestRollingExactPlanWalk walks a one-instance rolling update on a plan with
// no spare instance to the end, as the controller would.
func TestRollingExactPlanWalk(t *testing.T) {
	s := RollingStrategy{Batch: Size{Instances, 1}}
	p := Progress{Target: 1, Old: 1}
	for i := 0; i < 10; i++ {
		st := s.Next(p)
		if st.Done {
			return
		}
		// Capacity: one instance, held by the old replica or the new one.
		p.Old, p.New = st.Old, st.New
		p.NewBlocked, p.NewHealthy = 0, 0
		if p.New > 0 {
			if p.Old > 0 {
				p.NewBlocked = 1
			} else {
				p.NewHealthy = 1
			}
		}
	}
	t.Fatalf("rolling update did not finish: %+v", p)
}

func TestSizeOf(t *testing.T) {
	for _, tc := range []struct {
		s    Size
		n    int
		want int
	}{{Size{Instances, 3}, 10, 3}, {Size{Instances, 30}, 10, 10}, {Size{Percent, 10}, 4, 1}, {Size{Percent, 50}, 5, 3}, {Size{Percent, 100}, 7, 7}, {Size{Instances, 1}, 0, 0}} {
		if got := tc.s.Of(tc.n); got != tc.want {
			t.Errorf("%+v.Of(%d) = %d, want %d", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p     Policy
		field string
	}{
		{Policy{BlueGreen: &BlueGreen{Traffic: "SIDEWAYS"}}, "blueGreen.traffic"},
		{Policy{BlueGreen: &BlueGreen{Traffic: Canary, Step: Size{Percent, 0}}}, "blueGreen.step.value"},
		{Policy{BlueGreen: &BlueGreen{Traffic: Linear, Step: Size{Percent, 60}}}, "blueGreen.step.value"},
		{Policy{BlueGreen: &BlueGreen{Traffic: AllAtOnce, TerminationWait: 2 * time.Hour}}, "blueGreen.terminationWait"},
		{Policy{Rolling: &Rolling{Batch: Size{"PODS", 1}}}, "rolling.batch.unit"},
		{Policy{Rolling: &Rolling{Batch: Size{Instances, 1}, Wait: -time.Second}}, "rolling.wait"},
		{Policy{Rolling: &Rolling{Batch: Size{Instances, 1}, RollbackBatch: &Size{Percent, 101}}}, "rolling.rollbackBatch.value"},
		{Policy{MaxDuration: time.Minute}, "maxDuration"},
		{Policy{BlueGreen: &BlueGreen{Traffic: AllAtOnce}, Rolling: &Rolling{Batch: Size{Instances, 1}}}, "blueGreen"},
	}
	for _, tc := range tests {
		err := tc.p.Validate()
		fe, ok := err.(interface{ Unwrap() []error })
		if !ok {
			t.Errorf("%+v: Validate() = %v, want a field error", tc.p, err)
			continue
		}
		f, _ := fe.Unwrap()[0].(*FieldError)
		if f == nil || f.Field != tc.field {
			t.Errorf("%+v: Validate() = %v, want field %s", tc.p, err, tc.field)
		}
	}
	ok := Policy{Rolling: &Rolling{Batch: Size{Instances, 1}, Wait: time.Minute}, MaxDuration: time.Hour}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid policy: %v", err)
	}
}
