// Package endpoint owns models, endpoint configs and endpoints as capstan's own
// types, the operations the control API performs on them (Service), and the
// controller that drives each endpoint's lifecycle (Controller): Creating →
// InService or Failed, blue/green UpdateEndpoint, in-place weight and capacity
// changes, and Deleting.
//
// Every API write is one store transaction that also takes or releases fleet
// instances, so the record and its capacity commit together. The controller
// writes each step of its progress to the store (with an optimistic version
// check) before acting on it, so after a crash it resumes from the record: the
// record, not memory, is the truth. It talks to the outside through two small
// interfaces it declares, Runtime (replica processes) and Router (the
// gateway), and through the placement seam: placement.Allocator (the fleet)
// and placement.Plans (training plans, reservation.go):
// a capacity-reservations-only variant draws on its plan, waits in Creating
// until the plan starts, and at the plan's end loses its replicas while every
// invocation answers ExpiredMessage until the endpoint is updated. It knows
// nothing about wire formats.
package endpoint
