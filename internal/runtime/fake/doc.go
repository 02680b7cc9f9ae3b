// Package fake owns a hand-written, thread-safe fake of runtime.Runtime for
// controller and gateway tests: it records Start/Stop calls, lets tests
// inject start errors, drive replica states by hand and point replica
// addresses at test servers. No processes are started.
package fake
