// Package endpoint owns models, endpoint configs and endpoints as capstan's own
// types, the operations the control API performs on them (Service), and the
// controller that translates each endpoint into replica sets run by the
// serving engine (Controller): Creating → InService or Failed, updates rolled
// out under a policy (blue/green all at once, canary, linear, rolling; rolled
// back on a start or execution timeout or a firing alarm), in-place weight
// and capacity changes, and Deleting.
//
// Every API write is one store transaction that also takes or releases
// instances through placement.Allocator, so the record and its capacity
// commit together. The controller writes each step of its progress to the
// store (with an optimistic version check) before acting on it, so after a
// crash it resumes from the record: the record, not memory, is the truth.
// Lifecycle steps (start, health gate, backends, drain, stop) and rollout
// decisions are internal/serving's; training plans come through
// placement.Plans: a capacity-reservations-only variant draws on its plan,
// waits in Creating until the plan starts, and at the plan's end loses its
// replicas while every invocation fails as "reservation expired" until the
// endpoint is updated. Serverless variants (ServerlessConfig) hold no fleet
// instance and follow their load from zero through the gateway's activator
// (serverless.go). It knows nothing about wire formats: its errors are
// typed and each protocol words them.
package endpoint
