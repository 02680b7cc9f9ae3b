package hyperpod

import "fmt"

// The service's errors; the sagemaker package maps each to its wire code
// (ResourceNotFound, ResourceInUse, ConflictException, ValidationException,
// ResourceLimitExceeded) in one place.

// NotFoundError: no cluster, instance group or node of that name.
type NotFoundError struct {
	Kind string // "cluster", "instance group", "node"
	Name string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %s not found", e.Kind, e.Name) }

// ExistsError: CreateCluster named a cluster that exists.
type ExistsError struct{ Name string }

func (e *ExistsError) Error() string { return fmt.Sprintf("cluster %s already exists", e.Name) }

// ConflictError: the cluster cannot take the change now (it is being
// created or deleted, or deployments still run on it).
type ConflictError struct {
	Name    string
	Message string
}

func (e *ConflictError) Error() string { return e.Message }

// FieldError is invalid input; Field is the request member's path as the
// API spells it ("InstanceGroups[1].TrainingPlanArn").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// CapacityError: a group asked for more instances than its source has
// free. Err is the source's own error (*placement.LimitError for a plan,
// *fleet.LimitError for on-demand and spot).
type CapacityError struct {
	Group string
	Err   error
}

func (e *CapacityError) Error() string { return fmt.Sprintf("instance group %s: %v", e.Group, e.Err) }

func (e *CapacityError) Unwrap() error { return e.Err }

// NodeError is one node a batch call could not act on, and why; each
// protocol words Reason in its own codes.
type NodeError struct {
	ID      string
	Reason  NodeErrorReason
	Message string
}

// NodeErrorReason is why a node could not be acted on.
type NodeErrorReason int

const (
	// NodeNotFound: no node of that id (or logical id) is in the cluster.
	NodeNotFound NodeErrorReason = iota + 1
	// NodeNotDeletable: the node is in a status that takes no delete (it
	// is already shutting down).
	NodeNotDeletable
)

// LimitError: the account is at a limit (MaxClusters); the wire says
// ResourceLimitExceeded.
type LimitError struct {
	What  string // "clusters"
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the account-level service limit for %s is %d; delete one first", e.What, e.Limit)
}
