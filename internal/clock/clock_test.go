package clock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeTimerFiresOnlyWhenStepped(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(10 * time.Second)
	f.Step(9 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	f.Step(time.Second)
	select {
	case got := <-tm.C():
		if !got.Equal(epoch.Add(10 * time.Second)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("timer did not fire")
	}
	if f.Waiters() != 0 {
		t.Fatalf("waiters = %d", f.Waiters())
	}
}

func TestFakeTickerAndStop(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(time.Minute)
	for i := 1; i <= 3; i++ {
		f.Step(time.Minute)
		select {
		case got := <-tk.C():
			if want := epoch.Add(time.Duration(i) * time.Minute); !got.Equal(want) {
				t.Fatalf("tick %d at %v, want %v", i, got, want)
			}
		default:
			t.Fatalf("tick %d missing", i)
		}
	}
	tk.Stop()
	f.Step(time.Hour)
	select {
	case <-tk.C():
		t.Fatal("stopped ticker ticked")
	default:
	}
}

func TestFakeSleepWithBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan error)
	go func() { done <- Sleep(context.Background(), f, time.Hour) }()
	f.BlockUntil(1)
	f.Step(time.Hour)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDevAdvanceFiresTimer(t *testing.T) {
	d := NewDev()
	before := d.Now()
	tm := d.NewTimer(168 * time.Hour)
	d.Advance(169 * time.Hour)
	select {
	case <-tm.C():
	case <-time.After(5 * time.Second):
		t.Fatal("advanced dev clock did not fire timer")
	}
	if got := d.Now().Sub(before); got < 169*time.Hour {
		t.Fatalf("dev clock moved only %v", got)
	}
	if tm.Stop() {
		t.Fatal("Stop after fire reported pending")
	}
}

func TestDevAdvanceBounds(t *testing.T) {
	// Two advances of 2562047h (just under time.Duration's range) used to
	// wrap the offset negative: time ran backwards.
	for _, tc := range []struct {
		name    string
		steps   []time.Duration
		wantErr []bool
		want    time.Duration
	}{
		{"wrap attempt", []time.Duration{2562047 * time.Hour, 2562047 * time.Hour}, []bool{true, true}, 0},
		{"one step over the bound", []time.Duration{MaxAdvance + 1}, []bool{true}, 0},
		{"steps up to the total cap", []time.Duration{MaxAdvance, MaxAdvance, MaxAdvance, MaxAdvance, MaxAdvance,
			MaxAdvance, MaxAdvance, MaxAdvance, MaxAdvance, MaxAdvance, time.Hour}, []bool{false, false, false, false, false,
			false, false, false, false, false, true}, MaxOffset},
		{"negative ignored", []time.Duration{-time.Hour, time.Hour}, []bool{false, false}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDev()
			for i, s := range tc.steps {
				err := d.Advance(s)
				if (err != nil) != tc.wantErr[i] {
					t.Fatalf("Advance(%v) #%d: err = %v, want error %v", s, i, err, tc.wantErr[i])
				}
				if err != nil && !errors.Is(err, ErrAdvanceBounds) {
					t.Fatalf("Advance error %v is not ErrAdvanceBounds", err)
				}
				if d.Offset() < 0 {
					t.Fatalf("offset went negative: %v", d.Offset())
				}
			}
			if got := d.Offset(); got != tc.want {
				t.Fatalf("offset = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNextDeadlineIsComputed(t *testing.T) {
	// The old loop stepped once per period: a 1ns ticker jumped 100 years
	// would take ~3e18 iterations. nextDeadline must answer at once, with
	// the first boundary after now.
	start := epoch
	for _, tc := range []struct {
		name   string
		period time.Duration
		jump   time.Duration
		want   time.Time
	}{
		{"1ns over 100 years", time.Nanosecond, MaxOffset, start.Add(MaxOffset + time.Nanosecond)},
		{"1h over 10 years and 30m", time.Hour, MaxAdvance + 30*time.Minute, start.Add(MaxAdvance + time.Hour)},
		{"exactly on a boundary", time.Hour, 3 * time.Hour, start.Add(4 * time.Hour)},
		{"not yet due", time.Hour, -time.Minute, start},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextDeadline(start, start.Add(tc.jump), tc.period); !got.Equal(tc.want) {
				t.Fatalf("nextDeadline = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDevTickerFiresOnceAfterLargeAdvance(t *testing.T) {
	d := NewDev()
	tk := d.NewTicker(time.Hour)
	defer tk.Stop()
	if err := d.Advance(MaxAdvance); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tk.C():
	case <-time.After(5 * time.Second):
		t.Fatal("ticker did not fire after the advance")
	}
	// The deadlines jumped over collapse into that one tick; the next is
	// about an hour of dev time away.
	select {
	case v := <-tk.C():
		t.Fatalf("ticker fired twice: %v", v)
	case <-time.After(100 * time.Millisecond):
	}
	if err := d.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tk.C():
	case <-time.After(5 * time.Second):
		t.Fatal("ticker did not resume at the next period")
	}
}

func TestRestoreDevSavesBeforeAdvancing(t *testing.T) {
	var saved []DevState
	fail := false
	d, err := RestoreDev(DevState{Offset: 5 * time.Hour}, func(s DevState) error {
		if fail {
			return errors.New("disk full")
		}
		saved = append(saved, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Offset(); got != 5*time.Hour {
		t.Fatalf("restored offset %s, want 5h", got)
	}
	if err := d.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 || saved[0].Offset != 6*time.Hour || saved[0].At.Before(time.Now().Add(6*time.Hour-time.Second)) {
		t.Fatalf("saved %+v, want offset 6h at about now+6h", saved)
	}
	fail = true
	if err := d.Advance(time.Hour); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Advance with a failing save: %v", err)
	}
	if got := d.Offset(); got != 6*time.Hour {
		t.Fatalf("an unsaved advance moved the clock to offset %s", got)
	}
}

func TestRestoreDevNeverGoesBack(t *testing.T) {
	tests := []struct {
		name    string
		state   DevState
		atLeast time.Duration // Now() - wall time, at least
		wantErr bool
	}{
		{"zero state is the wall clock", DevState{}, 0, false},
		{"offset kept", DevState{Offset: 121 * time.Hour, At: time.Now().Add(121 * time.Hour)}, 121 * time.Hour, false},
		// The wall clock stepped back an hour since the save: the offset grows by it.
		{"wall clock stepped back", DevState{Offset: 2 * time.Hour, At: time.Now().Add(3 * time.Hour)}, 3*time.Hour - time.Second, false},
		{"negative offset", DevState{Offset: -time.Hour}, 0, true},
		{"offset past MaxOffset", DevState{Offset: MaxOffset + time.Hour}, 0, true},
		{"saved time past MaxOffset", DevState{Offset: time.Hour, At: time.Now().Add(MaxOffset + 48*time.Hour)}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := RestoreDev(tc.state, nil)
			if tc.wantErr {
				if err == nil || !errors.Is(err, ErrAdvanceBounds) {
					t.Fatalf("RestoreDev(%+v) = %v, want ErrAdvanceBounds", tc.state, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wall := time.Now()
			if got := d.Now().Sub(wall); got < tc.atLeast {
				t.Fatalf("Now is wall+%s, want at least wall+%s", got, tc.atLeast)
			}
			if !tc.state.At.IsZero() && d.Now().Before(tc.state.At) {
				t.Fatalf("Now %s is before the saved %s", d.Now(), tc.state.At)
			}
		})
	}
}
