package placement

import (
	"fmt"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/store"
)

// MaxInstancesPerOwner bounds what one owner holds of one source. No fleet or
// plan is this large, so an Allocator refuses a bigger count outright and
// every sum it forms stays far from overflow whatever a caller passes.
const MaxInstancesPerOwner = 20000

// Training plan TargetResources values that decide what a plan's instances
// serve: endpoint variants draw on an endpoint plan through an Allocator; a
// cluster plan provides nodes through a NodeSource.
const (
	TargetEndpoint        = "endpoint"
	TargetHyperPodCluster = "hyperpod-cluster"
)

// planPrefix starts the text form of a plan Source. The text form is stored
// (accounting keys) and shown (the source label of capstan's metrics), so it
// must not change.
const planPrefix = "trainingplan:"

// PlanRef references a training plan by its key, the lower-case plan name.
// Its JSON form is the bare key string (see MarshalText), so records that
// stored the key as a string read unchanged.
type PlanRef struct {
	Key string
}

// PlanNamed returns the reference to the plan named name (any case).
func PlanNamed(name string) PlanRef { return PlanRef{Key: strings.ToLower(name)} }

// IsZero reports whether r references no plan (json omitzero uses it).
func (r PlanRef) IsZero() bool { return r.Key == "" }

func (r PlanRef) String() string { return r.Key }

// MarshalText encodes r as its key.
func (r PlanRef) MarshalText() ([]byte, error) { return []byte(r.Key), nil }

// UnmarshalText reads a key written by MarshalText.
func (r *PlanRef) UnmarshalText(b []byte) error {
	r.Key = string(b)
	return nil
}

// Source is where instances come from: an on-demand instance type (OnDemand)
// or a training plan (OnPlan). The zero Source is neither. Sources are
// comparable and used as map keys.
type Source struct {
	instanceType string
	plan         PlanRef
}

// OnDemand is the on-demand pool of instanceType.
func OnDemand(instanceType string) Source { return Source{instanceType: instanceType} }

// OnPlan is the instances of training plan p (whose instance type the plan
// fixes).
func OnPlan(p PlanRef) Source { return Source{plan: p} }

// Plan returns the plan of a plan source.
func (s Source) Plan() (PlanRef, bool) { return s.plan, !s.plan.IsZero() }

// InstanceType returns the instance type of an on-demand source ("" for a
// plan source).
func (s Source) InstanceType() string { return s.instanceType }

// String is the one text form of a source: the instance type, or
// "trainingplan:<key>" for a plan. Accounting records are keyed by it and
// metrics label by it.
func (s Source) String() string {
	if !s.plan.IsZero() {
		return planPrefix + s.plan.Key
	}
	return s.instanceType
}

// MarshalText encodes s as String, so a Want marshals as a JSON object.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads the String form.
func (s *Source) UnmarshalText(b []byte) error {
	if k, ok := strings.CutPrefix(string(b), planPrefix); ok {
		*s = OnPlan(PlanRef{Key: k})
		return nil
	}
	*s = OnDemand(string(b))
	return nil
}

// Want is how many instances an owner holds of each source. Counts of 0 or
// less hold nothing.
type Want map[Source]int

// Allocator holds instances for owners (endpoints, later clusters) inside the
// caller's store transaction, so a record and its capacity commit together.
type Allocator interface {
	// Set replaces owner's holding with want; an empty want releases
	// everything. When a source lacks instances it fails, writing nothing:
	// with *LimitError for a plan source, and with the on-demand pool's
	// limit error (*fleet.LimitError) for an instance type.
	Set(tx *store.Tx, owner string, want Want) error
	// Free is how many more instances of src owner could hold on top of what
	// it holds now (0 for a plan that does not exist or has ended). A
	// rolling update on an exactly-sized plan reads it to size its surge.
	Free(tx *store.Tx, owner string, src Source) (int, error)
}

// PlanInfo is what controllers need to know about a training plan.
type PlanInfo struct {
	Ref             PlanRef
	Name            string // as its buyer spelled it
	InstanceType    string
	Start, End      time.Time
	Total           int // instances over all zones
	TargetResources []string
}

// Targets reports whether the plan's instances serve resource (TargetEndpoint,
// TargetHyperPodCluster).
func (p PlanInfo) Targets(resource string) bool {
	for _, t := range p.TargetResources {
		if t == resource {
			return true
		}
	}
	return false
}

// Plans looks up training plans.
type Plans interface {
	// Plan returns the plan ref references, if it exists.
	Plan(ref PlanRef) (PlanInfo, bool)
	// InUse is how many of the plan's instances owners other than
	// exceptOwner hold, read in tx.
	InUse(tx *store.Tx, ref PlanRef, exceptOwner string) (int, error)
}

// LimitError says an owner asked a training plan for more instances than it
// has free. Total 0 means the plan does not exist or has ended. The protocol
// packages word it for their users.
type LimitError struct {
	Plan      PlanRef
	Name      string // the plan's name as bought; its key when the plan is unknown
	Requested int    // what the owner would hold on the plan
	Available int    // free for this owner (total minus other owners' use)
	Total     int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("training plan %s: %d instances requested, %d of %d available", e.Name, e.Requested, e.Available, e.Total)
}

// Resources is an amount of the resources nodes offer and replicas request.
// It has the capacity fields of cluster.Resources (which adds a MIG
// profile for requests).
type Resources struct {
	GPUs        int   `json:"gpus"`
	MilliCPU    int64 `json:"milliCPU"`
	MemoryBytes int64 `json:"memoryBytes"`
}

// NodeSpec is one instance a source provides, described as a node.
type NodeSpec struct {
	Name         string // unique among the source's nodes and stable while it provides them
	InstanceType string
	Zone         string
	GPU          string // GPU model (catalog name)
	Capacity     Resources
}

// NodeSource provides the nodes of cluster-target training plans.
type NodeSource interface {
	// Nodes returns the nodes plan ref provides now: one per instance while
	// the plan is active, none before it starts or after it ends. A plan
	// that does not exist or does not target TargetHyperPodCluster is an
	// error.
	Nodes(ref PlanRef) ([]NodeSpec, error)
}
