package nodes

import (
	"time"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

// PendingReplica is a replica no node has room for.
type PendingReplica struct {
	ID, Cluster string
	// InstanceTypes are the types it may run on; empty means any.
	InstanceTypes []string
	Request       cluster.Resources
	Since         time.Time
}

// PlacedReplica is a replica on a node.
type PlacedReplica struct {
	ID      string
	Request cluster.Resources
	// InstanceType is the type the replica asked for; it moves to no other.
	InstanceType string
}

// NodeState is one node of a cluster as the autoscaler sees it.
type NodeState struct {
	Name, Cluster, Group, InstanceType string
	CapacityType                       hyperpod.CapacityType
	PricePerHour                       float64
	Capacity, Allocated                cluster.Resources
	// Slices are the MIG slices of its partitioned GPUs, held ones with
	// their replica (Capacity.GPUs counts only its whole GPUs).
	Slices   []cluster.Slice
	Replicas []PlacedReplica
	// Launching is a Pending node: in-flight capacity that counts for
	// pending replicas and is never consolidated.
	Launching bool
	// Deleting is a node being drained or deleted: it counts against the
	// disruption budgets, takes no moved replicas and is not disrupted again.
	Deleting bool
	// Since is when a replica was last added or removed, or when the node
	// became ready: consolidateAfter counts from it.
	Since time.Time
	// Managed is set on nodes the autoscaler launched; only these are
	// consolidated and count toward a NodePool's limits and budgets.
	Managed bool
	// NodePool is the pool that launched it; empty means the first pool of
	// its cluster (by weight) that allows its group, type and capacity type.
	NodePool string
}

// Launch asks for Count nodes of one offering.
type Launch struct {
	Cluster, Group, InstanceType string
	CapacityType                 hyperpod.CapacityType
	Count                        int
	NodePool                     string
	Replicas                     []string
	Reason                       string
}

// Disruption reasons.
const (
	ReasonEmpty         = "Empty"
	ReasonUnderutilized = "Underutilized"
)

// Disruption asks to remove one node.
type Disruption struct {
	Cluster, Node, NodePool string
	Reason                  string // ReasonEmpty | ReasonUnderutilized
	// Moves maps each replica of the node to the node it fits on.
	Moves map[string]string
}

// NodePool is Karpenter's NodePool resolved against its HyperpodNodeClass.
type NodePool struct {
	Name, Cluster string
	Weight        int
	// NodeClass names the HyperpodNodeClass (spec.template.spec.nodeClassRef);
	// the caller copies its groups into InstanceGroups.
	NodeClass string
	// InstanceGroups are the groups the pool may grow; empty means every
	// group of the cluster.
	InstanceGroups []string
	Requirements   []Requirement
	Limits         Limits
	Disruption     DisruptionPolicy
}

// Requirement keys the autoscaler honours.
const (
	KeyInstanceType  = "node.kubernetes.io/instance-type"
	KeyCapacityType  = "karpenter.sh/capacity-type"
	KeyZone          = "topology.kubernetes.io/zone" // accepted, no effect: offerings carry no zone
	KeyInstanceGroup = "sagemaker.amazonaws.com/instance-group-name"
)

// Requirement operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// Requirement is a node selector requirement of a NodePool template.
type Requirement struct {
	Key, Operator string
	Values        []string
}

// Limits cap what a NodePool may hold; 0 means unlimited.
type Limits struct {
	Nodes, GPUs int
	MilliCPU    int64
	MemoryBytes int64
}

// Consolidation policies.
const (
	WhenEmpty                = "WhenEmpty"
	WhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized"
)

// DisruptionPolicy is a NodePool's spec.disruption.
type DisruptionPolicy struct {
	ConsolidationPolicy string
	ConsolidateAfter    time.Duration
	// Never is consolidateAfter: Never, which turns consolidation off.
	Never   bool
	Budgets []Budget
}

// Budget caps how many of a pool's nodes may be disrupting at once.
type Budget struct {
	Nodes string // "10%" or "3"
	// Reasons it applies to; empty means every reason.
	Reasons []string
}

// DefaultNodePool is the pool of a cluster with autoscaling on that no
// NodePool names: Karpenter's defaults (every group, WhenEmptyOrUnderutilized,
// consolidateAfter 0 s, a 10 % budget).
func DefaultNodePool(clusterName string) NodePool {
	return NodePool{
		Name:    "default",
		Cluster: clusterName,
		Disruption: DisruptionPolicy{
			ConsolidationPolicy: WhenEmptyOrUnderutilized,
			Budgets:             []Budget{{Nodes: "10%"}},
		},
	}
}

// allows reports whether the pool may launch the offering.
func (p *NodePool) allows(group, instanceType string, ct hyperpod.CapacityType) bool {
	if len(p.InstanceGroups) > 0 && !contains(p.InstanceGroups, group) {
		return false
	}
	for _, r := range p.Requirements {
		var v string
		switch r.Key {
		case KeyInstanceType:
			v = instanceType
		case KeyCapacityType:
			v = string(ct)
		case KeyInstanceGroup:
			v = group
		default:
			continue // the zone and unknown keys: the parser warned
		}
		switch r.Operator {
		case OpIn:
			if !contains(r.Values, v) {
				return false
			}
		case OpNotIn:
			if contains(r.Values, v) {
				return false
			}
		case OpDoesNotExist:
			return false // these labels are on every node
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func add(a, b cluster.Resources) cluster.Resources {
	return cluster.Resources{GPUs: a.GPUs + b.GPUs, MilliCPU: a.MilliCPU + b.MilliCPU, MemoryBytes: a.MemoryBytes + b.MemoryBytes}
}

func sub(a, b cluster.Resources) cluster.Resources {
	return cluster.Resources{GPUs: a.GPUs - b.GPUs, MilliCPU: a.MilliCPU - b.MilliCPU, MemoryBytes: a.MemoryBytes - b.MemoryBytes}
}

// MIGRoom is what MIG partitions (cluster.NodeSpec.Partitions) give a
// node: how many of its GPUs are partitioned (they take no whole-GPU
// request) and its slices by profile.
func MIGRoom(parts [][]string) (partitioned int, slices map[string]int) {
	for _, gpu := range parts {
		if len(gpu) == 0 {
			continue
		}
		partitioned++
		if slices == nil {
			slices = map[string]int{}
		}
		for _, profile := range gpu {
			slices[profile]++
		}
	}
	return partitioned, slices
}

// freeSlices counts n's free MIG slices by profile.
func (n *NodeState) freeSlices() map[string]int {
	var free map[string]int
	for _, s := range n.Slices {
		if s.ReplicaID == "" {
			if free == nil {
				free = map[string]int{}
			}
			free[s.Profile]++
		}
	}
	return free
}

func negative(r cluster.Resources) bool { return r.GPUs < 0 || r.MilliCPU < 0 || r.MemoryBytes < 0 }

// poolSet is the pools of each cluster, by weight (desc) then name, with
// DefaultNodePool for a cluster that has none.
type poolSet map[string][]*NodePool

func newPoolSet(pools []NodePool) poolSet {
	ps := poolSet{}
	for i := range pools {
		p := &pools[i]
		ps[p.Cluster] = append(ps[p.Cluster], p)
	}
	for _, list := range ps {
		sortPools(list)
	}
	return ps
}

func sortPools(list []*NodePool) {
	// Insertion sort: a cluster has a handful of pools.
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && poolBefore(list[j], list[j-1]); j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
}

func poolBefore(a, b *NodePool) bool {
	if a.Weight != b.Weight {
		return a.Weight > b.Weight
	}
	return a.Name < b.Name
}

func (ps poolSet) of(clusterName string) []*NodePool {
	if list, ok := ps[clusterName]; ok {
		return list
	}
	d := DefaultNodePool(clusterName)
	ps[clusterName] = []*NodePool{&d}
	return ps[clusterName]
}

// poolOf is the pool a node belongs to, or nil.
func (ps poolSet) poolOf(n *NodeState) *NodePool {
	list := ps.of(n.Cluster)
	if n.NodePool != "" {
		for _, p := range list {
			if p.Name == n.NodePool {
				return p
			}
		}
		return nil
	}
	for _, p := range list {
		if p.allows(n.Group, n.InstanceType, n.CapacityType) {
			return p
		}
	}
	return nil
}
