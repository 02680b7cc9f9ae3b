// Package capacity owns the fleet calendar: per instance type and
// availability zone, how many instances exist and which are booked when.
// Training plans (SageMaker's GPU capacity reservations) book a count of
// instances in one zone for a time interval; on-demand endpoint instances are
// held from now on with no end. Both are checked and written in the caller's
// store transaction, so bookings never exceed the fleet at any instant.
//
// The Calendar implements the placement seam: placement.Allocator (what the
// endpoint service and controller allocate through, replacing internal/fleet's
// flat pool), placement.Plans (plan lookups for reserved-only variants) and
// placement.NodeSource (the nodes of hyperpod-cluster plans). It imports no
// controller. It also answers SearchTrainingPlanOfferings and owns
// CreateTrainingPlan, DescribeTrainingPlan and ListTrainingPlans' data; the
// wire shapes live in internal/sagemaker.
package capacity
