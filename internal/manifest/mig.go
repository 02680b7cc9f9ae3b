package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// The fit check of a JumpStartModel on a MIG slice (what HyperPod's
// acceleratorPartitionValidation does; its exact rule is not public).
const (
	// MIGMinKVTokens is the KV cache a replica must have room for beyond
	// its weights: one 2048-token context. The simulated engine starts with
	// a single 16-token block, but a replica that can hold less than one
	// ordinary request does not serve.
	MIGMinKVTokens = 2048
	// MIGFitMemoryUtilization is the share of the slice's memory the engine
	// uses: vLLM's and the simulated engine's default
	// --gpu-memory-utilization (sim.DefaultGPUMemoryUtilization; a test
	// keeps the two equal).
	MIGFitMemoryUtilization = 0.9
)

// MIGProfileOf is the MIG profile ("1g.10gb", without the mig- prefix) a
// worker asks a slice of in its requests or limits, "" when it asks for
// none. It reads a valid manifest: validation refuses two profiles.
func MIGProfileOf(r *ResourceRequirements) string {
	if r == nil {
		return ""
	}
	for _, m := range []map[string]Quantity{r.Requests, r.Limits} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if strings.HasPrefix(k, ResourceMIGPrefix) {
				return strings.TrimPrefix(k, ResourceMIGPrefix)
			}
		}
	}
	return ""
}

// MIGProfile is the profile ("7g.40gb") of the server's
// acceleratorPartitionType, "" when it has none.
func (s *Server) MIGProfile() string {
	if s == nil {
		return ""
	}
	return strings.TrimPrefix(s.AcceleratorPartitionType, "mig-")
}

// PartitionValidation reports whether the server's model is checked against
// its MIG slice: on unless validations.acceleratorPartitionValidation is
// false.
func (s *Server) PartitionValidation() bool {
	return s == nil || s.Validations == nil || s.Validations.AcceleratorPartitionValidation == nil || *s.Validations.AcceleratorPartitionValidation
}

// MIGFit checks that model m fits on one slice p of GPU g: its weights plus
// MIGMinKVTokens of KV cache within MIGFitMemoryUtilization of the slice's
// memory. The error says how much is needed and which profiles of g would
// hold it.
func MIGFit(m catalog.Model, g catalog.GPU, p catalog.MIGProfile) error {
	need := migNeed(m)
	if need <= migUsable(p) {
		return nil
	}
	var fit []string
	for _, q := range g.MIGProfiles {
		if need <= migUsable(q) {
			fit = append(fit, "mig-"+q.Name)
		}
	}
	hint := "no profile of " + g.Name + " holds it; serve on whole GPUs (remove acceleratorPartitionType)"
	if len(fit) > 0 {
		hint = "profiles of " + g.Name + " that fit: " + strings.Join(fit, ", ")
	}
	return fmt.Errorf("model %s does not fit on a mig-%s slice: it needs %.1f GB (%.1f GB of weights + %.2f GB of KV cache for %d tokens), the slice offers %.1f GB (%.1f GB × gpu-memory-utilization %.2f); %s; or set spec.server.validations.acceleratorPartitionValidation: false to skip this check",
		m.ID, p.Name, need/1e9, float64(m.WeightBytes())/1e9, float64(MIGMinKVTokens*m.KVBytesPerToken())/1e9, MIGMinKVTokens,
		migUsable(p)/1e9, float64(p.MemoryBytes)/1e9, MIGFitMemoryUtilization, hint)
}

// migNeed is in float64: catalog sizes times a constant, no overflow.
func migNeed(m catalog.Model) float64 {
	return float64(m.WeightBytes()) + float64(MIGMinKVTokens)*float64(m.KVBytesPerToken())
}

func migUsable(p catalog.MIGProfile) float64 {
	return float64(p.MemoryBytes) * MIGFitMemoryUtilization
}

// migProfileFor looks profile up for instance type it's GPU, the error
// naming the instance type.
func migProfileFor(it catalog.InstanceType, profile string) (catalog.GPU, catalog.MIGProfile, error) {
	g, err := catalog.Default().GPU(it.Device())
	if err != nil {
		return g, catalog.MIGProfile{}, fmt.Errorf("%s: %w", it.Name, err)
	}
	p, err := g.MIGProfile(profile)
	if err != nil {
		return g, p, fmt.Errorf("%s: %w", it.Name, err)
	}
	return g, p, nil
}
