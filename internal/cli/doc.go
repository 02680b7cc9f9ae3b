// Package cli builds capstan's command tree. Each command lives in its own file
// and only parses flags into an options struct before handing over to the package
// that owns the work.
//
// It must not hold business logic: a command validates its flags and calls the
// package that owns the work (server, engine/sim, bench, gateway).
package cli
