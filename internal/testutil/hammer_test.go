package testutil

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestHammer(t *testing.T) {
	tests := []struct {
		name       string
		n          int
		failEvery  int64 // call k fails when k%failEvery == 0; 0: never
		minCalls   int64 // stop only after this many calls
		wantErrCap bool  // more failures than MaxHammerErrors
	}{
		{name: "all succeed", n: 3, minCalls: 50},
		{name: "every other fails", n: 4, failEvery: 2, minCalls: 60},
		{name: "errors are bounded", n: 2, failEvery: 1, minCalls: 3 * MaxHammerErrors, wantErrCap: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			stop := Hammer(tc.n, func() error {
				k := calls.Add(1)
				if tc.failEvery > 0 && k%tc.failEvery == 0 {
					return fmt.Errorf("call %d", k)
				}
				return nil
			})
			Eventually(t, 10*time.Second, "enough calls", func() bool { return calls.Load() >= tc.minCalls })
			r := stop()
			if total := calls.Load(); r.OK+r.Failed != total {
				t.Fatalf("ok %d + failed %d != %d calls", r.OK, r.Failed, total)
			}
			if r.OK+r.Failed < tc.minCalls {
				t.Fatalf("%d calls counted, want at least %d", r.OK+r.Failed, tc.minCalls)
			}
			if tc.failEvery == 0 {
				if r.Failed != 0 || len(r.Errors) != 0 || r.First() != nil {
					t.Fatalf("failures with a call that never fails: %+v", r)
				}
			} else {
				if want := (r.OK + r.Failed) / tc.failEvery; r.Failed != want {
					t.Fatalf("%d failed, want %d", r.Failed, want)
				}
				if r.First() == nil {
					t.Fatal("no first error")
				}
			}
			if want := min(r.Failed, MaxHammerErrors); int64(len(r.Errors)) != want {
				t.Fatalf("%d errors kept of %d failures, want %d", len(r.Errors), r.Failed, want)
			}
			if tc.wantErrCap && r.Failed <= MaxHammerErrors {
				t.Fatalf("only %d failures: the bound was not exercised", r.Failed)
			}
			// stop is idempotent and the goroutines have ended.
			after := calls.Load()
			time.Sleep(5 * time.Millisecond)
			if again := stop(); again.OK != r.OK || again.Failed != r.Failed || calls.Load() != after {
				t.Fatalf("calls went on after stop: %+v then %+v, %d then %d calls", r, again, after, calls.Load())
			}
		})
	}
}
