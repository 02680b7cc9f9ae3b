// Package placement is the seam between capacity and what runs on it:
// capacity (the on-demand pool and training plans, the fleet calendar in
// internal/capacity) → nodes (instances with their GPUs, CPU and memory) →
// replicas bin-packed onto nodes (internal/cluster).
//
// It holds only the types both sides share: a Source of instances (an
// on-demand instance type or a training plan, referenced by a typed PlanRef),
// a Want of instances per source, the Allocator and Plans interfaces that
// controllers hold capacity through, the LimitError a short source returns,
// and the NodeSpecs a cluster-target plan provides through a NodeSource. It
// imports no controller and no capacity implementation, so both can import
// it.
package placement
