package clock

import (
	"sync"
	"time"
)

// Dev is the wall clock plus an offset that only grows. `capstan serve
// --dev-clock` uses it so an operator (or an end-to-end test) can jump a
// running server forward by a week; timers whose deadline is jumped over fire at
// once.
type Dev struct {
	mu       sync.Mutex
	offset   time.Duration
	advanced chan struct{} // closed and replaced on every Advance
}

var _ Clock = (*Dev)(nil)

// NewDev returns a Dev clock that starts at the wall time.
func NewDev() *Dev { return &Dev{advanced: make(chan struct{})} }

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

// Advance moves the clock forward by by (negative values are ignored).
func (d *Dev) Advance(by time.Duration) {
	if by <= 0 {
		return
	}
	d.mu.Lock()
	d.offset += by
	close(d.advanced)
	d.advanced = make(chan struct{})
	d.mu.Unlock()
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
			for !deadline.After(now) {
				deadline = deadline.Add(period)
			}
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
