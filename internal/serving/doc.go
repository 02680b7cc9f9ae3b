// Package serving is the one replica lifecycle under both front doors. The
// SageMaker endpoint controller (internal/endpoint) and the manifest
// deployment controller (internal/deployment) translate their resources into
// replica sets and call this package for every lifecycle step: start a
// replica (with its KV events port), gate it on health, turn healthy replicas
// into gateway backends, drain and stop a replica that leaves, stop replicas
// no record lists, and decide each step of a rollout from one revision to the
// next (Strategy: blue/green all at once, canary, linear, rolling in batches).
//
// The controllers keep their own records (the truth after a crash) and call
// Engine and Strategy from their Reconcile; this package keeps only what can
// be rebuilt: KV ports and the orphan sweep's memory.
//
// To add a rollout strategy, implement Strategy in a file of its own, add its
// Policy field and a table test; both doors pick it up through Policy.
package serving
