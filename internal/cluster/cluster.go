package cluster

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
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

// Resources is an amount of the resources placement counts. As a request,
// MIGProfile asks for one MIG slice of that profile ("1g.10gb") instead of
// whole GPUs (GPUs is then 0); capacities and allocations leave it empty.
type Resources struct {
	GPUs        int    `json:"gpus"`
	MilliCPU    int64  `json:"milliCPU"`
	MemoryBytes int64  `json:"memoryBytes"`
	MIGProfile  string `json:"migProfile,omitempty"`
}

func (r Resources) add(o Resources) Resources {
	return Resources{GPUs: r.GPUs + o.GPUs, MilliCPU: r.MilliCPU + o.MilliCPU, MemoryBytes: r.MemoryBytes + o.MemoryBytes}
}

func (r Resources) sub(o Resources) Resources {
	return Resources{GPUs: r.GPUs - o.GPUs, MilliCPU: r.MilliCPU - o.MilliCPU, MemoryBytes: r.MemoryBytes - o.MemoryBytes}
}

// NodeSpec is a node joining the pool.
type NodeSpec struct {
	Name string `json:"name"`
	// Cluster is the HyperPod cluster the node belongs to; replicas are
	// placed on their own cluster's nodes.
	Cluster       string `json:"cluster"`
	InstanceGroup string `json:"instanceGroup"`
	InstanceType  string `json:"instanceType"`
	GPU           string `json:"gpu"`
	// CapacityType is on-demand, spot or reserved (informational here).
	CapacityType string    `json:"capacityType,omitempty"`
	Zone         string    `json:"zone,omitempty"`
	Capacity     Resources `json:"capacity"`
	// Partitions is each GPU's MIG layout by GPU index (nil or empty: a
	// whole GPU). A partitioned GPU takes MIG requests only and a whole one
	// whole-GPU requests only, so the two never share a GPU.
	Partitions [][]string `json:"partitions,omitempty"`
}

// Node is one machine of the pool.
type Node struct {
	NodeSpec
	Allocated Resources `json:"allocated"`
	// Cordoned nodes take no new replicas: the node is going away (a spot
	// notice, consolidation, scale-in), and the replicas on it move.
	Cordoned bool `json:"cordoned,omitempty"`
	// Since is when a replica was last placed on or released from the node,
	// or when it joined: consolidateAfter counts from it.
	Since time.Time `json:"since"`
	// Replicas placed on the node, sorted, and what each requested.
	Replicas []string    `json:"replicas,omitempty"`
	Placed   []Placement `json:"placed,omitempty"`
	// Slices are the MIG slices of the partitioned GPUs, with who holds each.
	Slices []Slice `json:"slices,omitempty"`
}

// Slice is one MIG slice of a node's GPU.
type Slice struct {
	GPU       int    `json:"gpu"`
	Profile   string `json:"profile"`
	ReplicaID string `json:"replicaID,omitempty"`
}

// Placement is one replica on a node.
type Placement struct {
	ReplicaID string    `json:"replicaID"`
	Request   Resources `json:"request"`
	// InstanceType is the type the replica asked for: it runs on no other.
	InstanceType string `json:"instanceType"`
	// GPUs are the indices of the node's whole GPUs the replica holds
	// (CUDA_VISIBLE_DEVICES of a real engine); a MIG slice is in
	// Node.Slices instead.
	GPUs []int `json:"gpus,omitempty"`
}

// Pending is a replica that fits on no node of its cluster now: what the
// node autoscaler provisions for.
type Pending struct {
	ReplicaID string
	Cluster   string
	// InstanceTypes the replica may run on (empty: any).
	InstanceTypes []string
	Request       Resources
	// Since is when it first failed to place.
	Since time.Time
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

// DefaultName is the cluster manifests run on when they name none, and the
// name of the cluster the embedded server seeds at first start: the name
// the HyperPod documentation's commands use.
const DefaultName = "ml-cluster"

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

// Cluster is the node pool of every HyperPod cluster: nodes join when they
// are ready and leave when they go, and replicas are placed on them. It is
// safe for concurrent use.
type Cluster struct {
	clock    clock.Clock
	mu       sync.Mutex
	nodes    []*node // in the order they joined
	byName   map[string]*node
	where    map[string]placement // replica id → where it sits
	pending  map[string]Pending
	changes  chan struct{}
	watchers []chan struct{}
}

type node struct {
	Node
	replicas map[string]bool
	slices   []Slice // the MIG slices, ReplicaID set while held
	whole    int     // GPUs not partitioned
	// gpuHolder is who holds each whole GPU, by index ("" free; a
	// partitioned GPU is never held whole).
	gpuHolder []string
}

type placement struct {
	node         *node
	req          Resources
	instanceType string
	slice        int   // index in node.slices, or -1
	gpus         []int // whole GPUs held, by index
}

// NewPool returns an empty pool; clk stamps Node.Since and Pending.Since.
func NewPool(clk clock.Clock) *Cluster {
	return &Cluster{clock: clk, byName: map[string]*node{}, where: map[string]placement{},
		pending: map[string]Pending{}, changes: make(chan struct{}, 1)}
}

// New builds a static pool: the nodes of groups in cluster DefaultName,
// named <group>-<i>, with capacity from cat. Tests and tools use it; the
// server's nodes come and go through AddNode and RemoveNode.
func New(cat *catalog.Catalog, groups []InstanceGroup) (*Cluster, error) {
	if len(groups) > MaxGroups {
		return nil, fmt.Errorf("cluster: %d instance groups; the limit is %d", len(groups), MaxGroups)
	}
	c := NewPool(clock.Real{})
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
		for j := 0; j < g.Count; j++ {
			if err := c.AddNode(NodeSpec{Name: fmt.Sprintf("%s-%d", g.Name, j), Cluster: DefaultName, InstanceGroup: g.Name,
				InstanceType: it.Name, GPU: it.GPU, CapacityType: "on-demand", Capacity: CapacityOf(it)}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// CapacityOf is what a node of instance type it offers.
func CapacityOf(it catalog.InstanceType) Resources {
	return Resources{GPUs: it.GPUCount, MilliCPU: int64(it.VCPU) * 1000, MemoryBytes: int64(it.MemoryGiB) << 30}
}

// AddNode adds a ready node. Adding a node whose name is taken is an error.
func (c *Cluster) AddNode(spec NodeSpec) error {
	if spec.Name == "" {
		return errors.New("cluster: a node needs a name")
	}
	if spec.Capacity.GPUs < 0 || spec.Capacity.MilliCPU < 0 || spec.Capacity.MemoryBytes < 0 {
		return fmt.Errorf("cluster: node %s: negative capacity %+v", spec.Name, spec.Capacity)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byName[spec.Name]; ok {
		return fmt.Errorf("cluster: node %s already in the pool", spec.Name)
	}
	if len(spec.Partitions) > spec.Capacity.GPUs {
		return fmt.Errorf("cluster: node %s: %d GPU partitions for %d GPUs", spec.Name, len(spec.Partitions), spec.Capacity.GPUs)
	}
	n := &node{Node: Node{NodeSpec: spec, Since: c.clock.Now()}, replicas: map[string]bool{}, whole: spec.Capacity.GPUs,
		gpuHolder: make([]string, spec.Capacity.GPUs)}
	for gpu, profiles := range spec.Partitions {
		if len(profiles) > 0 {
			n.whole--
			n.gpuHolder[gpu] = partitioned
		}
		for _, p := range profiles {
			n.slices = append(n.slices, Slice{GPU: gpu, Profile: p})
		}
	}
	c.nodes = append(c.nodes, n)
	c.byName[spec.Name] = n
	c.changed()
	return nil
}

// RemoveNode takes a node out of the pool and returns the replicas that were
// placed on it, which lose their placement (their controller sees NodeOf
// fail and reschedules them). Removing an unknown node is a no-op.
func (c *Cluster) RemoveNode(name string) (evicted []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.byName[name]
	if !ok {
		return nil
	}
	for id := range n.replicas {
		evicted = append(evicted, id)
		delete(c.where, id)
	}
	sort.Strings(evicted)
	delete(c.byName, name)
	c.nodes = slices.DeleteFunc(c.nodes, func(m *node) bool { return m == n })
	c.changed()
	return evicted
}

// Cordon marks a node as taking no new replicas (or, with on false, as
// taking them again) and returns the replicas on it.
func (c *Cluster) Cordon(name string, on bool) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("cluster: no node %s", name)
	}
	if n.Cordoned != on {
		n.Cordoned = on
		c.changed()
	}
	return c.snapshot(n).Replicas, nil
}

// Changes is signalled (without blocking, coalesced) whenever a node joins,
// leaves or is cordoned: the moment pending replicas may fit, or placed ones
// must move. One consumer reads it; others take their own with Watch.
func (c *Cluster) Changes() <-chan struct{} { return c.changes }

// Watch returns a channel of its own that is signalled as Changes is, and
// also when a release frees room that a pending request may take. (Changes
// is not signalled on a release: its consumer releases a replica that
// failed to start and would wake itself in a loop.)
func (c *Cluster) Watch() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{}, 1)
	c.watchers = append(c.watchers, ch)
	return ch
}

func (c *Cluster) changed() {
	signal(c.changes)
	c.signalWatchers()
}

func (c *Cluster) signalWatchers() {
	for _, ch := range c.watchers {
		signal(ch)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// NotifyFreed signals Changes and every watcher when requests are pending:
// a deliberate release (a space stopped by its user) freed room they may
// take now rather than at their next resync.
func (c *Cluster) NotifyFreed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 {
		c.changed()
	}
}

// SetPending records that replica p.ReplicaID fits nowhere now; a later
// call keeps the first Since. Place and Release clear it.
func (c *Cluster) SetPending(p Pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pending[p.ReplicaID]; ok {
		p.Since = old.Since
	} else {
		p.Since = c.clock.Now()
	}
	p.InstanceTypes = slices.Clone(p.InstanceTypes)
	c.pending[p.ReplicaID] = p
}

// Pending returns the pending replicas, oldest first.
func (c *Cluster) Pending() []Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Pending, 0, len(c.pending))
	for _, p := range c.pending {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].ReplicaID < out[j].ReplicaID
	})
	return out
}

// Place puts replicaID on an uncordoned node of clusterName and
// instanceType with room for req, the one choose picks (ties go to the node
// that joined first, so placement is deterministic), and returns the node's
// name. Placing a replica that is already placed returns its node. When
// nothing fits the error is an *UnschedulableError. Simulate answers the
// same question without placing.
func (c *Cluster) Place(replicaID, clusterName, instanceType string, req Resources) (string, error) {
	if req.GPUs < 0 || req.MilliCPU < 0 || req.MemoryBytes < 0 {
		return "", fmt.Errorf("cluster: negative request %+v", req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.where[replicaID]; ok {
		return p.node.Name, nil
	}
	if req.MIGProfile != "" && req.GPUs != 0 {
		return "", fmt.Errorf("cluster: request %+v asks for whole GPUs and a MIG slice at once", req)
	}
	nodes := eligible(c.nodes, clusterName, instanceType)
	if len(nodes) == 0 {
		return "", &UnschedulableError{InstanceType: instanceType}
	}
	best, bestSlice := choose(nodes, req)
	if best == nil {
		return "", unschedulable(instanceType, nodes, req)
	}
	best.Allocated = best.Allocated.add(req)
	best.replicas[replicaID] = true
	best.Since = c.clock.Now()
	if bestSlice >= 0 {
		best.slices[bestSlice].ReplicaID = replicaID
	}
	c.where[replicaID] = placement{node: best, req: req, instanceType: instanceType, slice: bestSlice,
		gpus: best.holdGPUs(replicaID, req.GPUs)}
	delete(c.pending, replicaID)
	return best.Name, nil
}

// choose is the node of nodes that Place puts req on, and the MIG slice it
// takes there (-1 for none); nil when none has room. It prefers the most
// allocated node that fits, GPUs first, so replicas share nodes and whole
// nodes stay free for large requests; a MIG slice goes to the node and GPU
// whose slices are most held, so a GPU fills before the next one is
// touched. Ties go to the earlier node.
func choose(nodes []*node, req Resources) (*node, int) {
	var best *node
	bestSlice := -1
	bestScore := -1.0
	for _, n := range nodes {
		if !fits(n, req) {
			continue
		}
		s, slice := allocatedShare(n), -1
		if req.MIGProfile != "" {
			var used int
			if slice, used = freeSlice(n, req.MIGProfile); slice < 0 {
				continue
			}
			s = float64(used)*1000 + s
		}
		if s > bestScore {
			best, bestSlice, bestScore = n, slice, s
		}
	}
	return best, bestSlice
}

// partitioned marks a MIG-partitioned GPU in node.gpuHolder.
const partitioned = "\x00mig"

// holdGPUs gives replicaID the n lowest-indexed free whole GPUs of n
// (fits has checked they are there) and returns their indices.
func (n *node) holdGPUs(replicaID string, count int) []int {
	var out []int
	for i, h := range n.gpuHolder {
		if len(out) == count {
			break
		}
		if h == "" {
			n.gpuHolder[i] = replicaID
			out = append(out, i)
		}
	}
	return out
}

// freeSlice finds a free slice of profile on n: the one on the GPU whose
// other slices are most held (returned as used), first by index on a tie.
func freeSlice(n *node, profile string) (slice, used int) {
	held := map[int]int{}
	for _, s := range n.slices {
		if s.ReplicaID != "" {
			held[s.GPU]++
		}
	}
	slice, used = -1, -1
	for i, s := range n.slices {
		if s.Profile == profile && s.ReplicaID == "" && held[s.GPU] > used {
			slice, used = i, held[s.GPU]
		}
	}
	return slice, used
}

// eligible is the uncordoned nodes of a cluster and instance type ("" for
// any type: a simulated request that names none).
func eligible(nodes []*node, clusterName, instanceType string) []*node {
	var out []*node
	for _, n := range nodes {
		if n.Cluster == clusterName && (instanceType == "" || n.InstanceType == instanceType) && !n.Cordoned {
			out = append(out, n)
		}
	}
	return out
}

// fits checks the whole GPUs, CPU and memory (a MIG slice is looked for
// apart, by freeSlice).
func fits(n *node, req Resources) bool {
	free := n.Capacity.sub(n.Allocated)
	return req.GPUs <= n.whole-n.Allocated.GPUs && req.MilliCPU <= free.MilliCPU && req.MemoryBytes <= free.MemoryBytes
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
	return 100*share(int64(n.Allocated.GPUs), int64(n.whole)) +
		share(n.Allocated.MilliCPU, n.Capacity.MilliCPU) + share(n.Allocated.MemoryBytes, n.Capacity.MemoryBytes)
}

// unschedulable counts, per resource, how many nodes lack it, with the most
// any node has free.
func unschedulable(instanceType string, nodes []*node, req Resources) *UnschedulableError {
	gpu := Shortfall{Resource: ResourceGPU, Want: int64(req.GPUs)}
	if req.MIGProfile != "" {
		gpu = Shortfall{Resource: MIGResource(req.MIGProfile), Want: 1}
	}
	short := []Shortfall{gpu, {Resource: ResourceCPU, Want: req.MilliCPU}, {Resource: ResourceMemory, Want: req.MemoryBytes}}
	for _, n := range nodes {
		free := n.Capacity.sub(n.Allocated)
		gpus := int64(n.whole - n.Allocated.GPUs)
		if req.MIGProfile != "" {
			gpus = 0
			for _, sl := range n.slices {
				if sl.Profile == req.MIGProfile && sl.ReplicaID == "" {
					gpus++
				}
			}
		}
		for i, f := range []int64{gpus, free.MilliCPU, free.MemoryBytes} {
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

// Release frees what replicaID holds and forgets it as pending; releasing
// an unknown id is a no-op.
func (c *Cluster) Release(replicaID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, replicaID)
	p, ok := c.where[replicaID]
	if !ok {
		return
	}
	p.node.Allocated = p.node.Allocated.sub(p.req)
	if p.slice >= 0 {
		p.node.slices[p.slice].ReplicaID = ""
	}
	for _, g := range p.gpus {
		p.node.gpuHolder[g] = ""
	}
	p.node.Since = c.clock.Now()
	delete(p.node.replicas, replicaID)
	delete(c.where, replicaID)
	if len(c.pending) > 0 {
		// What was freed may be what a pending replica or space waits for.
		c.signalWatchers()
	}
}

// NodeOf returns the node replicaID is placed on.
func (c *Cluster) NodeOf(replicaID string) (Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.where[replicaID]
	if !ok {
		return Node{}, false
	}
	return c.snapshot(p.node), true
}

// Nodes returns a copy of every node, in the order they joined.
func (c *Cluster) Nodes() []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, c.snapshot(n))
	}
	return out
}

// InstanceTypes returns the instance types clusterName has nodes of, sorted.
func (c *Cluster) InstanceTypes(clusterName string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ts []string
	for _, n := range c.nodes {
		if n.Cluster == clusterName && !slices.Contains(ts, n.InstanceType) {
			ts = append(ts, n.InstanceType)
		}
	}
	sort.Strings(ts)
	return ts
}

// snapshot copies n; c.mu must be held.
func (c *Cluster) snapshot(n *node) Node {
	out := n.Node
	out.Replicas = make([]string, 0, len(n.replicas))
	for id := range n.replicas {
		out.Replicas = append(out.Replicas, id)
	}
	sort.Strings(out.Replicas)
	out.Placed = make([]Placement, len(out.Replicas))
	for i, id := range out.Replicas {
		w := c.where[id]
		out.Placed[i] = Placement{ReplicaID: id, Request: w.req, InstanceType: w.instanceType, GPUs: slices.Clone(w.gpus)}
	}
	out.Slices = slices.Clone(n.slices)
	out.Partitions = slices.Clone(n.Partitions)
	return out
}

// CouldFit reports whether req fits on an empty node of clusterName and
// instanceType, that is, whether freeing capacity could ever make room.
func (c *Cluster) CouldFit(clusterName, instanceType string, req Resources) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range eligible(c.nodes, clusterName, instanceType) {
		if req.GPUs > n.whole || req.MilliCPU > n.Capacity.MilliCPU || req.MemoryBytes > n.Capacity.MemoryBytes {
			continue
		}
		if req.MIGProfile == "" || slices.ContainsFunc(n.slices, func(s Slice) bool { return s.Profile == req.MIGProfile }) {
			return true
		}
	}
	return false
}

// MIGResource is the Kubernetes resource name of a MIG profile's slices
// ("mig-1g.10gb"; the manifest door adds the nvidia.com/ prefix).
func MIGResource(profile string) Resource { return Resource("mig-" + profile) }
