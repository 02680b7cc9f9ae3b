package testutil

import (
	"sync"
	"sync/atomic"
)

// MaxHammerErrors is how many errors a HammerResult keeps; later failures
// are only counted.
const MaxHammerErrors = 100

// HammerResult counts a Hammer's calls.
type HammerResult struct {
	OK, Failed int64
	// Errors holds the first MaxHammerErrors failures in the order they
	// were recorded; Failed counts them all.
	Errors []error
}

// First returns the first failure, or nil when none failed.
func (r HammerResult) First() error {
	if len(r.Errors) == 0 {
		return nil
	}
	return r.Errors[0]
}

// Hammer calls call from n goroutines, each in a loop, until stop is
// called; stop waits for the calls in flight to return and reports the
// counts. Calling stop again returns the same result.
func Hammer(n int, call func() error) (stop func() HammerResult) {
	var (
		halt       atomic.Bool
		okN, failN atomic.Int64
		mu         sync.Mutex
		errs       []error
		wg         sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			for !halt.Load() {
				err := call()
				if err == nil {
					okN.Add(1)
					continue
				}
				failN.Add(1)
				mu.Lock()
				if len(errs) < MaxHammerErrors {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	var once sync.Once
	var res HammerResult
	return func() HammerResult {
		once.Do(func() {
			halt.Store(true)
			wg.Wait()
			res = HammerResult{OK: okN.Load(), Failed: failN.Load(), Errors: errs}
		})
		return res
	}
}
