package deployment

import (
	"errors"
	"fmt"
	"strings"

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
