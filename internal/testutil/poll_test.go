package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeTB is a testing.TB whose Fatal records the message and ends the
// calling goroutine, as the real one does; only the methods the helpers
// call are implemented (the others would panic on the nil embedded TB).
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fake TB on its own goroutine (Fatal ends it) and
// returns the recorded failure, "" when fn passed.
func run(fn func(tb testing.TB)) string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.fatal
}

func TestEventually(t *testing.T) {
	tests := []struct {
		name      string
		trueAfter int // the call that first returns true; 0: never
		timeout   time.Duration
		wantCalls int // exact count; 0: don't check
		wantFatal string
	}{
		{name: "true at once", trueAfter: 1, timeout: time.Second, wantCalls: 1},
		{name: "true on the fifth call", trueAfter: 5, timeout: 5 * time.Second, wantCalls: 5},
		{name: "never true", timeout: 20 * time.Millisecond, wantFatal: "timed out after 20ms waiting for the thing"},
		{name: "zero timeout looks once", timeout: 0, wantCalls: 1, wantFatal: "timed out after 0s waiting for the thing"},
		{name: "zero timeout, already true", trueAfter: 1, timeout: 0, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			start := time.Now()
			fatal := run(func(tb testing.TB) {
				Eventually(tb, tc.timeout, "the thing", func() bool {
					calls++
					return tc.trueAfter > 0 && calls >= tc.trueAfter
				})
			})
			elapsed := time.Since(start)
			if fatal != tc.wantFatal {
				t.Fatalf("fatal %q, want %q", fatal, tc.wantFatal)
			}
			if tc.wantCalls != 0 && calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d", calls, tc.wantCalls)
			}
			if fatal != "" && elapsed < tc.timeout {
				t.Fatalf("gave up after %v, before the %v timeout", elapsed, tc.timeout)
			}
		})
	}
}

func TestEventuallyErr(t *testing.T) {
	tests := []struct {
		name      string
		nilAfter  int // the call that first returns nil; 0: never
		timeout   time.Duration
		wantCalls int
		wantFatal bool
	}{
		{name: "nil at once", nilAfter: 1, timeout: time.Second, wantCalls: 1},
		{name: "nil on the fourth call", nilAfter: 4, timeout: 5 * time.Second, wantCalls: 4},
		{name: "never nil: shows the last error", timeout: 15 * time.Millisecond, wantFatal: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			fatal := run(func(tb testing.TB) {
				EventuallyErr(tb, tc.timeout, "the widget", func() error {
					calls++
					if tc.nilAfter > 0 && calls >= tc.nilAfter {
						return nil
					}
					return fmt.Errorf("attempt %d: widget is red", calls)
				})
			})
			if !tc.wantFatal {
				if fatal != "" {
					t.Fatalf("failed: %s", fatal)
				}
				if calls != tc.wantCalls {
					t.Fatalf("%d calls, want %d", calls, tc.wantCalls)
				}
				return
			}
			want := fmt.Sprintf("timed out after %v waiting for the widget: attempt %d: widget is red", tc.timeout, calls)
			if fatal != want {
				t.Fatalf("fatal %q, want %q", fatal, want)
			}
		})
	}
}

// TestPollerBackoff checks the pauses: 1ms, doubling, capped at
// MaxInterval (50ms when zero), the last one cut short at the deadline.
func TestPollerBackoff(t *testing.T) {
	tests := []struct {
		name    string
		max     time.Duration
		timeout time.Duration
		cap     time.Duration
	}{
		{name: "default cap", timeout: 150 * time.Millisecond, cap: DefaultMaxPollInterval},
		{name: "20ms cap", max: 20 * time.Millisecond, timeout: 100 * time.Millisecond, cap: 20 * time.Millisecond},
		{name: "200ms cap", max: 200 * time.Millisecond, timeout: 100 * time.Millisecond, cap: 200 * time.Millisecond},
		{name: "cap below the first pause", max: time.Microsecond * 500, timeout: 5 * time.Millisecond, cap: time.Microsecond * 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pauses []time.Duration
			calls := 0
			p := Poller{Timeout: tc.timeout, MaxInterval: tc.max, sleep: func(d time.Duration) {
				pauses = append(pauses, d)
				time.Sleep(d)
			}}
			fatal := run(func(tb testing.TB) {
				p.EventuallyErr(tb, "x", func() error { calls++; return errors.New("no") })
			})
			if !strings.Contains(fatal, "timed out") {
				t.Fatalf("fatal %q", fatal)
			}
			if calls != len(pauses)+1 || len(pauses) == 0 {
				t.Fatalf("%d looks, %d pauses %v", calls, len(pauses), pauses)
			}
			want := min(time.Millisecond, tc.cap)
			var total time.Duration
			for i, d := range pauses {
				last := i == len(pauses)-1
				if d != want && !(last && d < want) {
					t.Fatalf("pause %d is %v, want %v (all: %v)", i, d, want, pauses)
				}
				total += d
				want = min(2*want, tc.cap)
			}
			if total > tc.timeout {
				t.Fatalf("paused %v in all, past the %v timeout: %v", total, tc.timeout, pauses)
			}
		})
	}
}
