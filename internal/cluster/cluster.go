package cluster

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// Limits on configured groups, so a typo in a config file cannot make the
// server build millions of nodes.
const (
	MaxGroups        = 64
	MaxNodesPerGroup = 1024
)

// InstanceGroup is a named set of identical nodes (config: cluster.instanceGroups).
type InstanceGroup struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	Count        int    `json:"count"`
}

// Resources is an amount of the resources placement counts.
type Resources struct {
	GPUs        int   `json:"gpus"`
	MilliCPU    int64 `json:"milliCPU"`
	MemoryBytes int64 `json:"memoryBytes"`
}

func (r Resources) add(o Resources) Resources {
	return Resources{r.GPUs + o.GPUs, r.MilliCPU + o.MilliCPU, r.MemoryBytes + o.MemoryBytes}
}

func (r Resources) sub(o Resources) Resources {
	return Resources{r.GPUs - o.GPUs, r.MilliCPU - o.MilliCPU, r.MemoryBytes - o.MemoryBytes}
}

// Node is one machine of an instance group.
type Node struct {
	Name          string    `json:"name"`
	InstanceGroup string    `json:"instanceGroup"`
	InstanceType  string    `json:"instanceType"`
	GPU           string    `json:"gpu"`
	Capacity      Resources `json:"capacity"`
	Allocated     Resources `json:"allocated"`
	// Replicas placed on the node, sorted.
	Replicas []string `json:"replicas,omitempty"`
}

// UnschedulableError says why a replica fits on no node: the cluster has no
// node of the type (Nodes 0), or each resource in Short is lacking on some
// of the Nodes. The manifest door words it as Kubernetes' scheduler does.
type UnschedulableError struct {
	InstanceType string
	Nodes        int
	Short        []Shortfall
}

// Shortfall is one resource that Nodes nodes lack: Want is the request and
// MostFree the most any node of the type has free.
type Shortfall struct {
	Resource       Resource
	Nodes          int
	Want, MostFree int64
}

// Resource names what placement counts.
type Resource string

const (
	ResourceGPU    Resource = "gpu"
	ResourceCPU    Resource = "cpu"    // in milli-CPUs
	ResourceMemory Resource = "memory" // in bytes
)

func (e *UnschedulableError) Error() string {
	if e.Nodes == 0 {
		return fmt.Sprintf("no node of type %s in the cluster", e.InstanceType)
	}
	parts := make([]string, len(e.Short))
	for i, s := range e.Short {
		parts[i] = fmt.Sprintf("%d lack %s (want %d, most free %d)", s.Nodes, s.Resource, s.Want, s.MostFree)
	}
	return fmt.Sprintf("none of the %d %s nodes has room: %s", e.Nodes, e.InstanceType, strings.Join(parts, ", "))
}

// IsUnschedulable reports whether err is (or wraps) an *UnschedulableError.
func IsUnschedulable(err error) bool {
	var u *UnschedulableError
	return errors.As(err, &u)
}

// DefaultInstanceGroups is the embedded server's cluster when the config
// names none: two nodes of every instance type the published examples use.
func DefaultInstanceGroups() []InstanceGroup {
	types := []string{"ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g5.24xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.p5en.48xlarge"}
	gs := make([]InstanceGroup, 0, len(types))
	for _, t := range types {
		gs = append(gs, InstanceGroup{Name: groupName(t), InstanceType: t, Count: 2})
	}
	return gs
}

// groupName turns "ml.p5.48xlarge" into "p5-48xlarge".
func groupName(instanceType string) string {
	return strings.ReplaceAll(strings.TrimPrefix(instanceType, "ml."), ".", "-")
}

var reGroupName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Cluster is the node pool. It is safe for concurrent use.
type Cluster struct {
	mu     sync.Mutex
	nodes  []*node // in group order, then index
	byType map[string][]*node
	where  map[string]placement // replica id → where it sits
}

type node struct {
	Node
	replicas map[string]bool
}

type placement struct {
	node *node
	req  Resources
}

// New builds the nodes of groups; their capacity comes from cat.
func New(cat *catalog.Catalog, groups []InstanceGroup) (*Cluster, error) {
	if len(groups) > MaxGroups {
		return nil, fmt.Errorf("cluster: %d instance groups; the limit is %d", len(groups), MaxGroups)
	}
	c := &Cluster{byType: map[string][]*node{}, where: map[string]placement{}}
	seen := map[string]bool{}
	var errs []error
	for i, g := range groups {
		p := fmt.Sprintf("cluster.instanceGroups[%d]", i)
		if !reGroupName.MatchString(g.Name) {
			errs = append(errs, fmt.Errorf("%s.name: %q must be a DNS label (lower-case letters, digits, '-', at most 63)", p, g.Name))
			continue
		}
		if seen[g.Name] {
			errs = append(errs, fmt.Errorf("%s.name: duplicate group %q", p, g.Name))
			continue
		}
		seen[g.Name] = true
		it, err := cat.InstanceType(g.InstanceType)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.instanceType: %w", p, err))
			continue
		}
		if g.Count < 0 || g.Count > MaxNodesPerGroup {
			errs = append(errs, fmt.Errorf("%s.count: %d must be in [0, %d]", p, g.Count, MaxNodesPerGroup))
			continue
		}
		capacity := Resources{GPUs: it.GPUCount, MilliCPU: int64(it.VCPU) * 1000, MemoryBytes: int64(it.MemoryGiB) << 30}
		for j := 0; j < g.Count; j++ {
			n := &node{Node: Node{Name: fmt.Sprintf("%s-%d", g.Name, j), InstanceGroup: g.Name,
				InstanceType: it.Name, GPU: it.GPU, Capacity: capacity}, replicas: map[string]bool{}}
			c.nodes = append(c.nodes, n)
			c.byType[it.Name] = append(c.byType[it.Name], n)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// Place puts replicaID on a node of instanceType with room for req and
// returns the node's name. It prefers the most allocated node that fits, so
// replicas share nodes and whole nodes stay free for large requests; ties go
// to the first node in group order, so placement is deterministic. Placing a
// replica that is already placed returns its node. When nothing fits the
// error is an *UnschedulableError.
func (c *Cluster) Place(replicaID, instanceType string, req Resources) (string, error) {
	if req.GPUs < 0 || req.MilliCPU < 0 || req.MemoryBytes < 0 {
		return "", fmt.Errorf("cluster: negative request %+v", req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.where[replicaID]; ok {
		return p.node.Name, nil
	}
	nodes := c.byType[instanceType]
	if len(nodes) == 0 {
		return "", &UnschedulableError{InstanceType: instanceType}
	}
	var best *node
	bestScore := -1.0
	for _, n := range nodes {
		if !fits(n, req) {
			continue
		}
		if s := allocatedShare(n); s > bestScore {
			best, bestScore = n, s
		}
	}
	if best == nil {
		return "", unschedulable(instanceType, nodes, req)
	}
	best.Allocated = best.Allocated.add(req)
	best.replicas[replicaID] = true
	c.where[replicaID] = placement{node: best, req: req}
	return best.Name, nil
}

func fits(n *node, req Resources) bool {
	free := n.Capacity.sub(n.Allocated)
	return req.GPUs <= free.GPUs && req.MilliCPU <= free.MilliCPU && req.MemoryBytes <= free.MemoryBytes
}

// allocatedShare scores how full a node is, GPUs first: GPUs are what
// fragments, so packing follows them and CPU and memory break ties.
func allocatedShare(n *node) float64 {
	share := func(a, c int64) float64 {
		if c <= 0 {
			return 0
		}
		return float64(a) / float64(c)
	}
	return 100*share(int64(n.Allocated.GPUs), int64(n.Capacity.GPUs)) +
		share(n.Allocated.MilliCPU, n.Capacity.MilliCPU) + share(n.Allocated.MemoryBytes, n.Capacity.MemoryBytes)
}

// unschedulable counts, per resource, how many nodes lack it, with the most
// any node has free.
func unschedulable(instanceType string, nodes []*node, req Resources) *UnschedulableError {
	short := []Shortfall{{Resource: ResourceGPU, Want: int64(req.GPUs)}, {Resource: ResourceCPU, Want: req.MilliCPU},
		{Resource: ResourceMemory, Want: req.MemoryBytes}}
	for _, n := range nodes {
		free := n.Capacity.sub(n.Allocated)
		for i, f := range []int64{int64(free.GPUs), free.MilliCPU, free.MemoryBytes} {
			short[i].MostFree = max(short[i].MostFree, f)
			if short[i].Want > f {
				short[i].Nodes++
			}
		}
	}
	e := &UnschedulableError{InstanceType: instanceType, Nodes: len(nodes)}
	for _, s := range short {
		if s.Nodes > 0 {
			e.Short = append(e.Short, s)
		}
	}
	return e
}

// Release frees what replicaID holds; releasing an unknown id is a no-op.
func (c *Cluster) Release(replicaID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.where[replicaID]
	if !ok {
		return
	}
	p.node.Allocated = p.node.Allocated.sub(p.req)
	delete(p.node.replicas, replicaID)
	delete(c.where, replicaID)
}

// NodeOf returns the node replicaID is placed on.
func (c *Cluster) NodeOf(replicaID string) (Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.where[replicaID]
	if !ok {
		return Node{}, false
	}
	return snapshot(p.node), true
}

// Nodes returns a copy of every node, in group order.
func (c *Cluster) Nodes() []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, snapshot(n))
	}
	return out
}

// InstanceTypes returns the instance types that have at least one node, sorted.
func (c *Cluster) InstanceTypes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := make([]string, 0, len(c.byType))
	for t := range c.byType {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

func snapshot(n *node) Node {
	out := n.Node
	out.Replicas = make([]string, 0, len(n.replicas))
	for id := range n.replicas {
		out.Replicas = append(out.Replicas, id)
	}
	sort.Strings(out.Replicas)
	return out
}

// CouldFit reports whether req fits on an empty node of instanceType, that
// is, whether freeing capacity could ever make room for it.
func (c *Cluster) CouldFit(instanceType string, req Resources) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.byType[instanceType] {
		if req.GPUs <= n.Capacity.GPUs && req.MilliCPU <= n.Capacity.MilliCPU && req.MemoryBytes <= n.Capacity.MemoryBytes {
			return true
		}
	}
	return false
}
