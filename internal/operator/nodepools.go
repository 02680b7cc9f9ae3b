package operator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/autoscale/nodes"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// NodePoolCluster is what `capstan operator nodepools` reads: a cluster as
// CreateCluster takes it (hyperpod.ClusterSpec, YAML or JSON), each group
// with an optional maxCount, the most nodes its NodePool may grow to.
type NodePoolCluster struct {
	hyperpod.ClusterSpec
	Groups []NodePoolGroup `json:"groups"`
}

// NodePoolGroup is one instance group of a NodePoolCluster.
type NodePoolGroup struct {
	hyperpod.InstanceGroupSpec
	// MaxCount bounds the group's NodePool (limits.nodes); unset, the
	// group's count (at least 1).
	MaxCount int `json:"maxCount,omitempty"`
}

// ParseNodePoolCluster reads a NodePoolCluster; unknown fields are errors,
// so a misspelt maxCount does not silently leave the pool at its count.
func ParseNodePoolCluster(doc []byte) (NodePoolCluster, error) {
	var c NodePoolCluster
	if err := yaml.UnmarshalStrict(doc, &c); err != nil {
		return NodePoolCluster{}, fmt.Errorf("cluster config: %w", err)
	}
	return c, nil
}

// maxNodes is how many nodes the group's pool may hold.
func (g NodePoolGroup) maxNodes() int {
	if g.MaxCount > 0 {
		return g.MaxCount
	}
	return max(g.Count, g.MinCount, 1)
}

// capacityType is the group's karpenter.sh/capacity-type: a training plan
// (plan or planArn) is reserved, spot is spot, else on-demand.
func (g NodePoolGroup) capacityType() hyperpod.CapacityType {
	if g.PlanArn != "" {
		return hyperpod.CapacityReserved
	}
	return g.CapacityType()
}

// The objects one group becomes (sigs.k8s.io/yaml keeps the field order).
type (
	k8sMeta struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	nodeClassDoc struct {
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Metadata   k8sMeta `json:"metadata"`
		Spec       struct {
			InstanceGroups []string `json:"instanceGroups"`
		} `json:"spec"`
	}
	requirementDoc struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	}
	nodePoolDoc struct {
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Metadata   k8sMeta `json:"metadata"`
		Spec       struct {
			Template struct {
				Metadata struct {
					Labels map[string]string `json:"labels,omitempty"`
				} `json:"metadata,omitzero"`
				Spec struct {
					NodeClassRef struct {
						Group string `json:"group"`
						Kind  string `json:"kind"`
						Name  string `json:"name"`
					} `json:"nodeClassRef"`
					Requirements []requirementDoc `json:"requirements"`
				} `json:"spec"`
			} `json:"template"`
			Limits map[string]string `json:"limits"`
		} `json:"spec"`
	}
)

var dnsLabelInvalid = regexp.MustCompile(`[^a-z0-9-]+`)

// NodePoolName is the NodePool and HyperpodNodeClass name of a cluster's
// group: <cluster>-<group>, lower case.
func NodePoolName(clusterName, group string) string {
	n := strings.ToLower(group)
	if clusterName != "" {
		n = strings.ToLower(clusterName) + "-" + n
	}
	return strings.Trim(dnsLabelInvalid.ReplaceAllString(n, "-"), "-")
}

// WriteNodePools prints, for each instance group of c, a HyperpodNodeClass
// naming the group and a karpenter.sh/v1 NodePool on it: requirements on
// the instance type, capacity type and group, limits on nodes, GPUs and
// (for a MIG layout) MIG slices, and the layout's nvidia.com/mig.config
// node label. Every group is checked first: nothing is printed for a
// config with an error.
func WriteNodePools(w io.Writer, c NodePoolCluster, cat *catalog.Catalog) error {
	var b bytes.Buffer
	var errs []error
	var seen []string
	for i, g := range c.Groups {
		at := fmt.Sprintf("groups[%d]", i)
		switch {
		case g.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: required", at))
			continue
		case slices.Contains(seen, g.Name):
			errs = append(errs, fmt.Errorf("%s.name: group %q listed twice", at, g.Name))
			continue
		case g.MaxCount < 0 || g.Count < 0:
			errs = append(errs, fmt.Errorf("%s: negative count", at))
			continue
		}
		seen = append(seen, g.Name)
		class, pool, err := groupObjects(c.Name, g, cat)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", at, g.Name, err))
			continue
		}
		for _, doc := range []any{class, pool} {
			y, err := yaml.Marshal(doc)
			if err != nil {
				return fmt.Errorf("nodepools: %w", err)
			}
			b.WriteString("---\n")
			b.Write(y)
		}
	}
	if len(c.Groups) == 0 {
		errs = append(errs, errors.New("groups: the cluster config has no instance groups"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func groupObjects(clusterName string, g NodePoolGroup, cat *catalog.Catalog) (*nodeClassDoc, *nodePoolDoc, error) {
	it, err := cat.InstanceType(g.InstanceType)
	if err != nil {
		return nil, nil, fmt.Errorf("instanceType: %w", err)
	}
	n := g.maxNodes()
	limits := map[string]string{"nodes": strconv.Itoa(n)}
	if it.GPUCount > 0 {
		limits[manifest.ResourceGPU] = strconv.Itoa(it.GPUCount * n)
	}
	if g.MIGLayout != "" {
		gpu, err := cat.GPU(it.Device())
		if err != nil {
			return nil, nil, fmt.Errorf("migLayout: %w", err)
		}
		parts, err := gpu.Layout(g.MIGLayout)
		if err != nil {
			return nil, nil, fmt.Errorf("migLayout: %w", err)
		}
		per := map[string]int{}
		for _, p := range parts {
			per[p]++
		}
		for p, k := range per {
			limits[manifest.ResourceMIGPrefix+p] = strconv.Itoa(k * it.GPUCount * n)
		}
	}
	name := NodePoolName(clusterName, g.Name)
	// No labels of our own on the objects: capstan's node API would warn
	// that they have no effect.
	class := &nodeClassDoc{APIVersion: nodes.NodeClassAPIVersion, Kind: nodes.NodeClassKind, Metadata: k8sMeta{Name: name}}
	class.Spec.InstanceGroups = []string{g.Name}

	pool := &nodePoolDoc{APIVersion: nodes.NodePoolAPIVersion, Kind: nodes.NodePoolKind, Metadata: k8sMeta{Name: name}}
	if clusterName != "" {
		pool.Metadata.Annotations = map[string]string{nodes.ClusterAnnotation: clusterName}
	}
	if g.MIGLayout != "" {
		pool.Spec.Template.Metadata.Labels = map[string]string{hyperpod.MIGConfigLabel: g.MIGLayout}
	}
	ref := &pool.Spec.Template.Spec.NodeClassRef
	ref.Group, ref.Kind, ref.Name = nodes.NodeClassGroup, nodes.NodeClassKind, name
	pool.Spec.Template.Spec.Requirements = []requirementDoc{
		{Key: nodes.KeyInstanceType, Operator: nodes.OpIn, Values: []string{it.Name}},
		{Key: nodes.KeyCapacityType, Operator: nodes.OpIn, Values: []string{string(g.capacityType())}},
		{Key: nodes.KeyInstanceGroup, Operator: nodes.OpIn, Values: []string{g.Name}},
	}
	pool.Spec.Limits = limits
	return class, pool, nil
}
