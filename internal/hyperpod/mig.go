package hyperpod

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/cluster"
)

// MIGConfigLabel is the node label that names a node's MIG layout; HyperPod
// sets it per instance group through KubernetesConfig.Labels.
const MIGConfigLabel = "nvidia.com/mig.config"

// partitions is what each GPU of a node of instanceType holds under the
// named layout: nil for "" (whole GPUs) and for all-disabled, else the
// layout's profiles for every GPU index. The error names the GPU and the
// profile at fault (catalog.GPU.Layout's).
func (s *Service) partitions(instanceType, layout string) ([][]string, error) {
	if layout == "" {
		return nil, nil
	}
	it, err := s.o.Catalog.InstanceType(instanceType)
	if err != nil {
		return nil, err
	}
	gpu, err := s.o.Catalog.GPU(it.Device())
	if err != nil {
		return nil, fmt.Errorf("instance type %s: %w", instanceType, err)
	}
	one, err := gpu.Layout(layout)
	if err != nil {
		return nil, fmt.Errorf("MIG layout %s on %s: %w", layout, instanceType, err)
	}
	if len(one) == 0 {
		return nil, nil
	}
	out := make([][]string, it.GPUCount)
	for i := range out {
		out[i] = one
	}
	return out, nil
}

// Partitions is what each GPU of a node of instanceType holds under the
// MIG layout (nil: whole GPUs): how the node autoscaler sizes a node that
// is launching before it joins the pool.
func (s *Service) Partitions(instanceType, layout string) ([][]string, error) {
	return s.partitions(instanceType, layout)
}

// nodeSpec is how node n joins the pool: its instance type's capacity and
// its layout's partitions.
func (s *Service) nodeSpec(n Node) (cluster.NodeSpec, error) {
	it, err := s.o.Catalog.InstanceType(n.InstanceType)
	if err != nil {
		return cluster.NodeSpec{}, fmt.Errorf("hyperpod: node %s: %w", n.ID, err)
	}
	parts, err := s.partitions(n.InstanceType, n.MIGLayout)
	if err != nil {
		return cluster.NodeSpec{}, fmt.Errorf("hyperpod: node %s: %w", n.ID, err)
	}
	return cluster.NodeSpec{Name: n.Name(), Cluster: n.Cluster, InstanceGroup: n.Group, InstanceType: n.InstanceType,
		GPU: it.GPU, CapacityType: string(n.CapacityType), Zone: n.Zone, Capacity: cluster.CapacityOf(it), Partitions: parts}, nil
}

// layoutName is how events name a layout: "" is whole GPUs.
func layoutName(layout string) string {
	if layout == "" {
		return "whole GPUs"
	}
	return layout
}

// sameLayout reports whether two layouts partition alike: "" and
// all-disabled both leave the GPUs whole, so switching between them
// replaces no node.
func sameLayout(a, b string) bool {
	norm := func(l string) string {
		if l == catalog.LayoutDisabled {
			return ""
		}
		return l
	}
	return norm(a) == norm(b)
}

// migCollector exports the pool's MIG slices as they are at scrape time:
// capstan_cluster_mig_slices{cluster, instance_type, profile, state}, state
// used or free. It reads the pool, which holds the placements, so the
// numbers need no reconcile pass to be current.
type migCollector struct {
	pool *cluster.Cluster
	desc *prometheus.Desc
}

func newMIGCollector(pool *cluster.Cluster) *migCollector {
	return &migCollector{pool: pool, desc: prometheus.NewDesc("capstan_cluster_mig_slices",
		"MIG slices of the clusters' partitioned GPUs, by profile and whether a replica holds them.",
		[]string{"cluster", "instance_type", "profile", "state"}, nil)}
}

func (c *migCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *migCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ cluster, instanceType, profile, state string }
	counts := map[key]int{}
	for _, n := range c.pool.Nodes() {
		for _, s := range n.Slices {
			used := key{n.Cluster, n.InstanceType, s.Profile, "used"}
			free := used
			free.state = "free"
			// Both states show for every profile, 0 included, so a
			// dashboard sees a profile run out.
			counts[used] += 0
			counts[free] += 0
			if s.ReplicaID != "" {
				counts[used]++
			} else {
				counts[free]++
			}
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), k.cluster, k.instanceType, k.profile, k.state)
	}
}
