package deployment

import (
	"errors"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/cluster"
)

// schedulingMessage words a placement failure for manifest status and
// events as Kubernetes' scheduler does ("0/2 nodes are available: 2
// Insufficient nvidia.com/gpu …"), the words HyperPod users read in kubectl.
func schedulingMessage(err error) string {
	var u *cluster.UnschedulableError
	if !errors.As(err, &u) {
		return err.Error()
	}
	if u.Nodes == 0 {
		return fmt.Sprintf("no instance group of type %s in the cluster", u.InstanceType)
	}
	parts := make([]string, len(u.Short))
	for i, s := range u.Short {
		name, format := "nvidia.com/gpu", func(v int64) string { return fmt.Sprint(v) }
		switch s.Resource {
		case cluster.ResourceCPU:
			name, format = "cpu", formatMilli
		case cluster.ResourceMemory:
			name, format = "memory", formatBytes
		case cluster.ResourceGPU:
		default:
			// A MIG profile's slices (cluster.MIGResource), as the device
			// plugin's mixed strategy names them.
			name = "nvidia.com/" + string(s.Resource)
		}
		parts[i] = fmt.Sprintf("%d Insufficient %s (want %s, most free %s)", s.Nodes, name, format(s.Want), format(s.MostFree))
	}
	return fmt.Sprintf("0/%d nodes are available: %s", u.Nodes, strings.Join(parts, ", "))
}

// noNode is a replica that no uncordoned node of its instance type takes
// because the cluster has none, with what the cluster tells of its groups
// of that type.
type noNode struct {
	cluster, instanceType string
	req                   cluster.Resources
	groups                []GroupInfo
	// takes reports whether a node cut by a MIG layout can hold req.
	takes      func(layout string) bool
	autoscaled bool
}

// noNodeMessage says why a replica finds no node of its type, by the
// groups of that type: there is none; none has a layout that holds it
// (MIG slices of another profile, or slices where it wants whole GPUs);
// their nodes are launching; or they have no node (scaled to zero, or
// every one cordoned), and then who will add one: the node autoscaler,
// or nobody until the user acts, as the autoscaler launches no node for
// MIG slices and a cluster without autoscaling grows only by update-cluster.
func noNodeMessage(w noNode) string {
	if len(w.groups) == 0 {
		return fmt.Sprintf("no instance group of type %s in the cluster", w.instanceType)
	}
	var fit []GroupInfo
	for _, g := range w.groups {
		if w.takes(g.MIGLayout) {
			fit = append(fit, g)
		}
	}
	if len(fit) == 0 {
		layouts := make([]string, len(w.groups))
		for i, g := range w.groups {
			layouts[i] = g.Name + ": " + layoutText(g.MIGLayout)
		}
		if w.req.MIGProfile != "" {
			return fmt.Sprintf("no instance group of type %s has MIG %s slices (%s): set a MIG layout with them "+
				"(aws sagemaker update-cluster, InstanceGroups[].KubernetesConfig.Labels %q)",
				w.instanceType, w.req.MIGProfile, strings.Join(layouts, ", "), "nvidia.com/mig.config")
		}
		return fmt.Sprintf("no instance group of type %s has whole GPUs (%s): set its MIG layout to %s "+
			"(aws sagemaker update-cluster, InstanceGroups[].KubernetesConfig.Labels %q)",
			w.instanceType, strings.Join(layouts, ", "), catalog.LayoutDisabled, "nvidia.com/mig.config")
	}
	names := make([]string, len(fit))
	target, running := 0, 0
	for i, g := range fit {
		names[i], target, running = g.Name, target+g.Target, running+g.Running
	}
	who, has := fmt.Sprintf("instance group %s (%s)", names[0], w.instanceType), "has"
	if len(fit) > 1 {
		who, has = fmt.Sprintf("instance groups %s (%s)", strings.Join(names, ", "), w.instanceType), "have"
	}
	var head string
	switch {
	case running < target && running == 0:
		return fmt.Sprintf("%s %s 0 of %d nodes running: waiting for them to launch", who, has, target)
	case running < target:
		return fmt.Sprintf("%s %s %d of %d nodes running (cordoned): waiting for the rest to launch", who, has, running, target)
	case running > 0:
		head = fmt.Sprintf("%s %s only cordoned nodes (%d, leaving)", who, has, running)
	default:
		head = fmt.Sprintf("%s %s 0 nodes", who, has)
	}
	switch {
	case w.req.MIGProfile != "":
		return head + ", and the node autoscaler launches no node for a MIG slice: raise InstanceCount (aws sagemaker update-cluster)"
	case w.autoscaled:
		return head + ": waiting for the node autoscaler to launch one"
	}
	return fmt.Sprintf("%s, and cluster %s does not autoscale, so nothing will add one: raise InstanceCount "+
		"(aws sagemaker update-cluster) or enable autoscaling (update-cluster --auto-scaling)", head, w.cluster)
}

// layoutText names a MIG layout for a message.
func layoutText(layout string) string {
	if layout == "" || layout == catalog.LayoutDisabled {
		return "whole GPUs"
	}
	return "MIG " + layout
}

func formatMilli(v int64) string {
	if v%1000 == 0 {
		return fmt.Sprint(v / 1000)
	}
	return fmt.Sprintf("%dm", v)
}

func formatBytes(v int64) string {
	if v%(1<<30) == 0 {
		return fmt.Sprintf("%dGi", v>>30)
	}
	if v%(1<<20) == 0 {
		return fmt.Sprintf("%dMi", v>>20)
	}
	return fmt.Sprint(v)
}
