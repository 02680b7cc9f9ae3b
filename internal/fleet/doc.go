// Package fleet owns the simulated capacity of embedded mode: how many instances
// of each instance type exist in each availability zone, and which owner
// (endpoint) holds how many of them. Allocations are written through the
// caller's store transaction, so an endpoint change and the instances it takes
// commit together or not at all. It does not start anything; it only counts.
//
// internal/capacity is the calendar with reservations that serves; this flat
// pool remains a placement.Allocator for tests. Callers depend on that
// interface, not on this type.
package fleet
