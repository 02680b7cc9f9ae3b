package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a manually driven clock for tests: time moves only through Step and
// Set, and timers fire synchronously inside those calls.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{} // closed and replaced whenever a waiter is added
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake clock set to start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

type fakeWaiter struct {
	clock    *Fake
	deadline time.Time
	period   time.Duration // > 0 for tickers
	ch       chan time.Time
	stopped  bool
}

func (w *fakeWaiter) C() <-chan time.Time { return w.ch }

func (w *fakeWaiter) Stop() bool {
	w.clock.mu.Lock()
	defer w.clock.mu.Unlock()
	was := !w.stopped && w.clock.remove(w)
	w.stopped = true
	return was
}

func (f *Fake) remove(w *fakeWaiter) bool {
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the clock is stepped past now+d.
func (f *Fake) NewTimer(d time.Duration) Timer { return f.add(d, 0) }

// NewTicker returns a ticker that fires each time the clock passes a multiple of d.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker period")
	}
	return tickerAdapter{f.add(d, d)}
}

type tickerAdapter struct{ w *fakeWaiter }

func (t tickerAdapter) C() <-chan time.Time { return t.w.ch }
func (t tickerAdapter) Stop()               { t.w.Stop() }

func (f *Fake) add(d, period time.Duration) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{clock: f, deadline: f.now.Add(d), period: period, ch: make(chan time.Time, 1)}
	if d <= 0 && period == 0 {
		w.ch <- f.now
		w.stopped = true
		return w
	}
	f.waiters = append(f.waiters, w)
	close(f.changed)
	f.changed = make(chan struct{})
	return w
}

// Step moves the clock forward by d, firing every timer whose deadline is reached.
func (f *Fake) Step(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing due timers in deadline order.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		return
	}
	for {
		sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].deadline.Before(f.waiters[j].deadline) })
		if len(f.waiters) == 0 || f.waiters[0].deadline.After(t) {
			break
		}
		w := f.waiters[0]
		f.now = w.deadline
		select {
		case w.ch <- w.deadline:
		default: // like time.Ticker, drop a tick the reader has not taken
		}
		if w.period > 0 {
			w.deadline = w.deadline.Add(w.period)
		} else {
			f.waiters = f.waiters[1:]
			w.stopped = true
		}
	}
	f.now = t
}

// Waiters reports how many timers and tickers are pending.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil waits until at least n timers or tickers are pending, so a test can
// step time only once the code under test is actually waiting.
func (f *Fake) BlockUntil(n int) {
	for {
		f.mu.Lock()
		if len(f.waiters) >= n {
			f.mu.Unlock()
			return
		}
		ch := f.changed
		f.mu.Unlock()
		<-ch
	}
}
