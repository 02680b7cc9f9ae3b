package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers that follow it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once d of this clock's time has passed.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that fires every d of this clock's time.
	NewTicker(d time.Duration) Ticker
}

// Timer is the clock-neutral counterpart of *time.Timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was pending.
	Stop() bool
}

// Ticker is the clock-neutral counterpart of *time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Sleep waits for d of c's time, or until ctx is done.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Since is c.Now().Sub(t).
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

func (Real) Now() time.Time { return time.Now() }

func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }
