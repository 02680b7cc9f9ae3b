package cluster

// Request is a replica a simulation places: its cluster, the instance type
// it runs on ("" for any) and what it asks for.
type Request struct {
	ID, Cluster, InstanceType string
	Resources
	// Node pins the request to one node, which it takes room on whether or
	// not the node looks to have it: room that a replica already bound
	// for the node (nominated for it, or landing there) is about to take.
	Node string
}

// Simulate places reqs, in order, on copies of nodes (a Nodes snapshot, or
// nodes built like one) by Place's own rules, and returns the node each
// went to, "" where none had room. A node's whole GPUs are its
// Capacity.GPUs less its partitioned ones; its free MIG slices are its
// Slices without a ReplicaID. nodes are not changed. Consolidation asks it
// where a node's replicas would go, so what it plans is what Place does.
func Simulate(nodes []Node, reqs []Request) []string {
	sim := make([]*node, len(nodes))
	byName := make(map[string]*node, len(nodes))
	for i, n := range nodes {
		whole := n.Capacity.GPUs
		for _, p := range n.Partitions {
			if len(p) > 0 {
				whole--
			}
		}
		sim[i] = &node{Node: n, whole: whole, slices: append([]Slice(nil), n.Slices...)}
		byName[n.Name] = sim[i]
	}
	out := make([]string, len(reqs))
	for i, r := range reqs {
		if r.GPUs < 0 || r.MilliCPU < 0 || r.MemoryBytes < 0 || (r.MIGProfile != "" && r.GPUs != 0) {
			continue // Place refuses these too
		}
		holder := r.ID
		if holder == "" {
			holder = "\x00simulated"
		}
		var to *node
		slice := -1
		if r.Node != "" {
			if to = byName[r.Node]; to != nil && r.MIGProfile != "" {
				slice, _ = freeSlice(to, r.MIGProfile)
			}
		} else {
			to, slice = choose(eligible(sim, r.Cluster, r.InstanceType), r.Resources)
		}
		if to == nil {
			continue
		}
		to.Allocated = to.Allocated.add(r.Resources)
		if slice >= 0 {
			to.slices[slice].ReplicaID = holder
		}
		out[i] = to.Name
	}
	return out
}
