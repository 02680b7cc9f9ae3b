package hyperpod

import (
	"time"

	"github.com/capstan-dev/capstan/internal/placement"
)

// Limits, from SageMaker's (sagemaker-api.md §2.5) where it has one.
const (
	MaxGroups         = 100
	MaxNodesPerGroup  = 6758
	MaxNodesPerCall   = 100 // BatchAddClusterNodes / BatchDeleteClusterNodes
	MaxClusters       = 100
	MaxTags           = 50
	MaxThreadsPerCore = 2
)

// Status is a cluster's status (SageMaker's ClusterStatus).
type Status string

const (
	StatusCreating    Status = "Creating"
	StatusInService   Status = "InService"
	StatusUpdating    Status = "Updating"
	StatusRollingBack Status = "RollingBack"
	StatusFailed      Status = "Failed"
	StatusDeleting    Status = "Deleting"
)

// GroupStatus is an instance group's status (SageMaker's InstanceGroupStatus).
type GroupStatus string

const (
	GroupCreating  GroupStatus = "Creating"
	GroupInService GroupStatus = "InService"
	GroupUpdating  GroupStatus = "Updating"
	GroupDegraded  GroupStatus = "Degraded"
	GroupFailed    GroupStatus = "Failed"
	GroupDeleting  GroupStatus = "Deleting"
)

// NodeStatus is a node's status (SageMaker's ClusterInstanceStatus).
type NodeStatus string

const (
	NodePending      NodeStatus = "Pending"
	NodeRunning      NodeStatus = "Running"
	NodeFailure      NodeStatus = "Failure"
	NodeShuttingDown NodeStatus = "ShuttingDown"
)

// CapacityType is where a node's instance comes from, in Karpenter's words
// (the karpenter.sh/capacity-type label).
type CapacityType string

const (
	CapacityOnDemand CapacityType = "on-demand"
	CapacitySpot     CapacityType = "spot"
	CapacityReserved CapacityType = "reserved" // a training plan's
)

// NodeRecovery values.
const (
	RecoveryAutomatic = "Automatic"
	RecoveryNone      = "None"
)

// AutoScaling is the cluster's node autoscaler setting.
type AutoScaling struct {
	Mode           string `json:"mode"`           // Enable | Disable
	AutoScalerType string `json:"autoScalerType"` // Karpenter
}

// Enabled reports whether the Karpenter autoscaler manages the cluster.
func (a AutoScaling) Enabled() bool { return a.Mode == "Enable" }

// TieredStorage is the cluster's managed tiered KV storage (SageMaker's
// TieredStorageConfig): with Mode Enable, a tieredstorage KV tier of a
// deployment on the cluster that sets no l2CacheSize gets MemoryPercent of
// its node's memory.
type TieredStorage struct {
	Mode          string `json:"mode"` // Enable | Disable
	MemoryPercent int    `json:"instanceMemoryAllocationPercentage,omitempty"`
}

// Enabled reports whether the cluster offers tiered storage.
func (t TieredStorage) Enabled() bool { return t.Mode == "Enable" }

// MaxTieredStoragePercent bounds InstanceMemoryAllocationPercentage.
const MaxTieredStoragePercent = 100

// LifeCycleConfig is kept and shown; capstan runs no lifecycle scripts.
type LifeCycleConfig struct {
	SourceS3URI string `json:"sourceS3Uri"`
	OnCreate    string `json:"onCreate"`
}

// Tag is a resource tag.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// InstanceGroupSpec is one instance group as a client gives it.
type InstanceGroupSpec struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	// Count is the group's target node count (InstanceCount). With
	// AutoScaling enabled the autoscaler moves the target; Count is where
	// it starts.
	Count          int              `json:"count"`
	MinCount       int              `json:"minCount,omitempty"`
	ExecutionRole  string           `json:"executionRole"`
	ThreadsPerCore int              `json:"threadsPerCore,omitempty"`
	LifeCycle      *LifeCycleConfig `json:"lifeCycle,omitempty"`
	// Plan is set for a reserved group: its nodes are the plan's instances
	// and nothing else (TrainingPlanArn as given is PlanArn).
	Plan    placement.PlanRef `json:"plan,omitzero"`
	PlanArn string            `json:"planArn,omitempty"`
	// Spot makes the group's nodes spot instances (CapacityRequirements.Spot).
	Spot bool `json:"spot,omitempty"`
	// MIGLayout is the named MIG layout of every GPU of the group's nodes
	// (the nvidia.com/mig.config node label: all-1g.10gb, all-balanced,
	// mixed-…); "" leaves the GPUs whole.
	MIGLayout string `json:"migLayout,omitempty"`
}

// CapacityType is where the group's nodes come from.
func (g InstanceGroupSpec) CapacityType() CapacityType {
	switch {
	case !g.Plan.IsZero():
		return CapacityReserved
	case g.Spot:
		return CapacitySpot
	}
	return CapacityOnDemand
}

// ClusterSpec is what CreateCluster takes.
type ClusterSpec struct {
	Name          string              `json:"name"`
	Groups        []InstanceGroupSpec `json:"groups"`
	EksClusterArn string              `json:"eksClusterArn,omitempty"`
	NodeRecovery  string              `json:"nodeRecovery,omitempty"` // default Automatic
	AutoScaling   AutoScaling         `json:"autoScaling,omitzero"`
	TieredStorage TieredStorage       `json:"tieredStorage,omitzero"`
	ClusterRole   string              `json:"clusterRole,omitempty"`
	Tags          []Tag               `json:"tags,omitempty"`
}

// ClusterUpdate is what UpdateCluster takes; nil and empty members leave
// the cluster as it is. Groups replace the groups of the same name (their
// count, among others) and add new ones.
type ClusterUpdate struct {
	Groups         []InstanceGroupSpec
	GroupsToDelete []string
	NodeRecovery   string
	AutoScaling    *AutoScaling
	TieredStorage  *TieredStorage
	ClusterRole    string
}

// Group is an instance group as stored and described.
type Group struct {
	InstanceGroupSpec
	// Target is the node count the controller works toward.
	Target int         `json:"target"`
	Status GroupStatus `json:"status"`
}

// Cluster is a stored cluster.
type Cluster struct {
	Name           string        `json:"name"`
	ID             string        `json:"id"` // 12 lower-case alphanumerics; the ARN's last part
	Status         Status        `json:"status"`
	FailureMessage string        `json:"failureMessage,omitempty"`
	Groups         []Group       `json:"groups"`
	EksClusterArn  string        `json:"eksClusterArn,omitempty"`
	NodeRecovery   string        `json:"nodeRecovery"`
	AutoScaling    AutoScaling   `json:"autoScaling,omitzero"`
	TieredStorage  TieredStorage `json:"tieredStorage,omitzero"`
	// MetricsOff turns the observability add-on off: capstan's metric store
	// keeps none of the cluster's series (the dashboards show none).
	MetricsOff  bool      `json:"metricsOff,omitempty"`
	ClusterRole string    `json:"clusterRole,omitempty"`
	Tags        []Tag     `json:"tags,omitempty"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
}

// GroupView is a group with its node counts, as DescribeCluster shows it.
type GroupView struct {
	Group
	Current int // Running nodes
	// LayoutPending counts the group's nodes not (yet) Running with the
	// group's MIG layout: those still to be replaced after a layout change
	// and those launching.
	LayoutPending int
}

// Node is one instance of a cluster.
type Node struct {
	// ID is the instance id, "i-" and 17 hex digits; unique across clusters.
	ID           string       `json:"id"`
	Cluster      string       `json:"cluster"`
	Group        string       `json:"group"`
	InstanceType string       `json:"instanceType"`
	CapacityType CapacityType `json:"capacityType"`
	Zone         string       `json:"zone"`
	Status       NodeStatus   `json:"status"`
	Message      string       `json:"message,omitempty"`
	// Launched is when the launch began; Ready when it became Running (zero
	// before).
	Launched time.Time `json:"launched"`
	Ready    time.Time `json:"ready,omitzero"`
	// Reason says why the node exists: "instance group count", "batch add",
	// "provisioner: 3 pending replicas (nodepool default)", "replaces i-…".
	Reason string `json:"reason"`
	// PricePerHour is what the node costs: the catalog's on-demand price,
	// the spot price, or 0 for a plan's (pre-paid) instance.
	PricePerHour float64           `json:"pricePerHour"`
	Plan         placement.PlanRef `json:"plan,omitzero"`
	// InterruptAt is when a spot node is reclaimed (its notice comes two
	// minutes before); zero for other nodes.
	InterruptAt time.Time `json:"interruptAt,omitzero"`
	// Leaving is when the node began ShuttingDown: it leaves once it has
	// no replicas or DrainTimeout after this.
	Leaving time.Time `json:"leaving,omitzero"`
	// Noticed is set once a spot node has had its interruption warning
	// (and was cordoned), so the warning comes once.
	Noticed bool `json:"noticed,omitempty"`
	// MIGLayout is the layout the node was launched with (its group's at
	// the time): it joins the pool with these partitions, also after a
	// restart, and is replaced when its group's layout changes.
	MIGLayout string `json:"migLayout,omitempty"`
}

// Name is the node's name in the pool and in `capstan get nodes`: its
// instance id, as HyperPod's Kubernetes nodes are named hyperpod-<id>.
func (n Node) Name() string { return "hyperpod-" + n.ID }

// Event is something that happened to a cluster or a node: a launch, a
// node becoming ready, a bind, a consolidation, an interruption, a
// recovery. Node is empty for cluster events.
type Event struct {
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster"`
	Node    string    `json:"node,omitempty"`
	Type    string    `json:"type"` // Normal | Warning
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// Offering is one way to add a node to a cluster: a group that may grow,
// what a node of it costs and offers, and how many more it may launch now
// (its plan's or the fleet's free instances). The node autoscaler chooses
// among offerings.
type Offering struct {
	Cluster      string
	Group        string
	InstanceType string
	CapacityType CapacityType
	PricePerHour float64
	Available    int
	// Partitions is each GPU's MIG layout on a new node of the group (its
	// MIGLayout), as cluster.NodeSpec.Partitions; nil for whole GPUs.
	Partitions [][]string
}
