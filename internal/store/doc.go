// Package store owns capstan's durable state: an embedded bbolt database under
// --data-dir holding every resource as a JSON value, one bucket per kind.
//
// Every write is one bbolt transaction, fsynced on commit, so an accepted API
// write is durable before the response and a kill -9 never leaves a half-written
// resource. bbolt allows one writer at a time, which is the whole concurrency
// story: callers do read-modify-write inside Update and never see a torn state.
// After each commit the store tells watchers which resources changed, so
// controllers can react without polling. The store knows nothing about what the
// resources mean.
package store
