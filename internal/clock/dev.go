package clock

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// MaxAdvance bounds one Advance and MaxOffset the total: far enough for any
// test of reservations or schedules, and far from time.Duration's ~292-year
// range, so the offset never wraps and time never runs backwards.
const (
	MaxAdvance = 10 * 365 * 24 * time.Hour
	MaxOffset  = 100 * 365 * 24 * time.Hour
)

// ErrAdvanceBounds is the error of an Advance outside MaxAdvance / MaxOffset.
var ErrAdvanceBounds = errors.New("dev clock advance out of bounds")

// Dev is the wall clock plus an offset that only grows. `capstan serve
// --dev-clock` uses it so an operator (or an end-to-end test) can jump a
// running server forward by a week; timers whose deadline is jumped over fire at
// once.
type Dev struct {
	advancing sync.Mutex // held by Advance, which alone changes offset
	mu        sync.Mutex
	offset    time.Duration
	advanced  chan struct{} // closed and replaced on every Advance
	// save, when set, records the offset an Advance is about to take; the
	// Advance takes effect only once save has returned nil.
	save func(DevState) error
}

// DevState is what a Dev clock persists: its offset and the time it read
// right after the last Advance. Restoring from it never puts the clock
// before At, even when the wall clock stepped back in between.
type DevState struct {
	Offset time.Duration `json:"offset"`
	At     time.Time     `json:"at"`
}

var _ Clock = (*Dev)(nil)

// NewDev returns a Dev clock that starts at the wall time.
func NewDev() *Dev { return &Dev{advanced: make(chan struct{})} }

// RestoreDev returns a Dev clock that continues from a saved state (the zero
// state: the wall time) and calls save with the new state inside every
// Advance before the Advance takes effect, so a server restarted after an
// acknowledged Advance never reads an earlier time than it did before.
// A state outside MaxOffset is refused: it did not come from a Dev clock.
func RestoreDev(st DevState, save func(DevState) error) (*Dev, error) {
	if st.Offset < 0 || st.Offset > MaxOffset {
		return nil, fmt.Errorf("%w: saved offset %s is outside [0, %s]", ErrAdvanceBounds, st.Offset, MaxOffset)
	}
	offset := st.Offset
	// The wall clock stepped back since the save: keep time from going back
	// too. At is a saved time, so the gap is bounded before it is added.
	if now := time.Now(); !st.At.IsZero() && now.Add(offset).Before(st.At) {
		gap := st.At.Sub(now.Add(offset))
		if gap > MaxOffset-offset {
			return nil, fmt.Errorf("%w: saved time %s is more than %s ahead of the wall clock", ErrAdvanceBounds, st.At.UTC().Format(time.RFC3339), MaxOffset)
		}
		offset += gap
	}
	return &Dev{offset: offset, advanced: make(chan struct{}), save: save}, nil
}

// Now returns wall time plus the accumulated offset.
func (d *Dev) Now() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return time.Now().Add(d.offset)
}

// Offset reports how far the clock has been moved ahead of wall time.
func (d *Dev) Offset() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.offset
}

// Advance moves the clock forward by by (zero or negative values are
// ignored). It refuses, leaving the clock where it is, a step over MaxAdvance
// or one that would take the total offset over MaxOffset, and, on a clock
// from RestoreDev, one whose new state could not be saved.
func (d *Dev) Advance(by time.Duration) error {
	if by <= 0 {
		return nil
	}
	if by > MaxAdvance {
		return fmt.Errorf("%w: %s is more than the %s (10 years) one advance may move", ErrAdvanceBounds, by, MaxAdvance)
	}
	// One Advance at a time, and save outside mu: a saver that writes the
	// store waits for its write lock, whose holder may be reading Now.
	d.advancing.Lock()
	defer d.advancing.Unlock()
	offset := d.Offset()
	// Both are at most MaxOffset and MaxAdvance, so the sum cannot overflow.
	if offset+by > MaxOffset {
		return fmt.Errorf("%w: the offset is already %s and may total at most %s (100 years)", ErrAdvanceBounds, offset, MaxOffset)
	}
	if d.save != nil {
		if err := d.save(DevState{Offset: offset + by, At: time.Now().Add(offset + by)}); err != nil {
			return fmt.Errorf("dev clock: save the advance: %w", err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.offset = offset + by
	close(d.advanced)
	d.advanced = make(chan struct{})
	return nil
}

func (d *Dev) state() (time.Time, chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return time.Now().Add(d.offset), d.advanced
}

// NewTimer fires once the Dev time reaches now+dur, by waiting or by Advance.
func (d *Dev) NewTimer(dur time.Duration) Timer {
	t := &devTimer{ch: make(chan time.Time, 1), stop: make(chan struct{})}
	deadline := d.Now().Add(dur)
	go d.wait(deadline, 0, t)
	return t
}

// NewTicker fires every period of Dev time.
func (d *Dev) NewTicker(period time.Duration) Ticker {
	if period <= 0 {
		panic("clock: non-positive ticker period")
	}
	t := &devTimer{ch: make(chan time.Time, 1), stop: make(chan struct{})}
	go d.wait(d.Now().Add(period), period, t)
	return devTicker{t}
}

func (d *Dev) wait(deadline time.Time, period time.Duration, t *devTimer) {
	for {
		now, advanced := d.state()
		if !now.Before(deadline) {
			select {
			case t.ch <- now:
			default:
			}
			if period == 0 {
				t.markFired()
				return
			}
			deadline = nextDeadline(deadline, now, period)
			continue
		}
		rt := time.NewTimer(deadline.Sub(now))
		select {
		case <-rt.C:
		case <-advanced:
			rt.Stop()
		case <-t.stop:
			rt.Stop()
			return
		}
	}
}

type devTimer struct {
	ch   chan time.Time
	stop chan struct{}
	mu   sync.Mutex
	done bool
}

func (t *devTimer) C() <-chan time.Time { return t.ch }

func (t *devTimer) markFired() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

func (t *devTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	close(t.stop)
	return true
}

type devTicker struct{ t *devTimer }

func (d devTicker) C() <-chan time.Time { return d.t.ch }
func (d devTicker) Stop()               { d.t.Stop() }

// nextDeadline is the first deadline+k*period (k ≥ 1) after now: a ticker
// whose deadlines were jumped over by Advance fires once and resumes at the
// next period boundary. Computed, not stepped, so a 10-year jump of a
// 1-second ticker costs the same as a 1-second one.
func nextDeadline(deadline, now time.Time, period time.Duration) time.Time {
	if deadline.After(now) {
		return deadline
	}
	// now-deadline fits a Duration: the offset is bounded by MaxOffset.
	k := now.Sub(deadline)/period + 1
	return deadline.Add(k * period)
}
