// Package clock is the one place capstan reads time. Everything time-based takes
// a Clock so tests can step time deterministically (Fake) and `capstan serve
// --dev-clock` can move a running server's time forward (Dev).
//
// It must not be bypassed: no time.Now or timers elsewhere in internal/.
package clock
