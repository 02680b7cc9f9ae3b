package testutil

import (
	"errors"
	"testing"
	"time"
)

// DefaultMaxPollInterval is the longest pause between two looks of
// Eventually and EventuallyErr (and of a Poller without MaxInterval).
const DefaultMaxPollInterval = 50 * time.Millisecond

// firstPollInterval is the first pause; each pause doubles up to the maximum.
const firstPollInterval = time.Millisecond

// Poller waits for a condition that another goroutine or process makes
// true: it looks, pauses 1ms, and doubles the pause up to MaxInterval
// (DefaultMaxPollInterval when zero), failing the test once Timeout has
// passed. The timeout bounds a hang; it does not time anything.
type Poller struct {
	Timeout     time.Duration
	MaxInterval time.Duration

	sleep func(time.Duration) // time.Sleep when nil; tests record the pauses
}

// Eventually polls cond until it returns true; after Timeout it fails the
// test with "timed out after <Timeout> waiting for <what>".
func (p Poller) Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !p.poll(func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) {
		t.Fatalf("timed out after %v waiting for %s", p.Timeout, what)
	}
}

// EventuallyErr polls cond until it returns nil; after Timeout it fails the
// test with what and the last error cond returned.
func (p Poller) EventuallyErr(t testing.TB, what string, cond func() error) {
	t.Helper()
	var last error
	if !p.poll(func() error { last = cond(); return last }) {
		t.Fatalf("timed out after %v waiting for %s: %v", p.Timeout, what, last)
	}
}

// poll calls cond until it returns nil (true) or Timeout passes (false).
// cond is called at least once, and once more when the deadline is reached.
func (p Poller) poll(cond func() error) bool {
	maxInterval := p.MaxInterval
	if maxInterval <= 0 {
		maxInterval = DefaultMaxPollInterval
	}
	sleep := p.sleep
	if sleep == nil {
		sleep = time.Sleep
	}
	deadline := time.Now().Add(p.Timeout)
	pause := min(firstPollInterval, maxInterval)
	for {
		if cond() == nil {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		sleep(min(pause, left))
		pause = min(2*pause, maxInterval)
	}
}

var errNotYet = errors.New("not yet")

// Eventually polls cond (1ms pauses doubling to 50ms) until it returns
// true, failing the test after timeout with "timed out after <timeout>
// waiting for <what>".
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Poller{Timeout: timeout}.Eventually(t, what, cond)
}

// EventuallyErr polls cond (1ms pauses doubling to 50ms) until it returns
// nil, failing the test after timeout with what and cond's last error: a
// cond returns an error that says what it saw.
func EventuallyErr(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	Poller{Timeout: timeout}.EventuallyErr(t, what, cond)
}
