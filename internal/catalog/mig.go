package catalog

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Named MIG layouts, as the nvidia.com/mig.config node label names them
// (NVIDIA mig-parted's default config): one layout applies to every GPU of
// a node.
const (
	// LayoutDisabled leaves the GPUs whole.
	LayoutDisabled = "all-disabled"
	// LayoutBalanced is NVIDIA's all-balanced: two of the smallest 1g
	// slice, one 2g and one 3g per GPU.
	LayoutBalanced = "all-balanced"
)

// GPU geometry: NVIDIA's MIG GPUs (A100, H100, H200, B200) split into 7
// compute slices and 8 memory slices.
const (
	migComputeSlices = 7
	migMemorySlices  = 8
)

// MemorySlices is how many of the GPU's eight memory slices profile p
// takes (1g.10gb on an H100 takes 1, 3g.40gb takes 4).
func (g GPU) MemorySlices(p MIGProfile) int {
	if g.MemoryBytes <= 0 {
		return migMemorySlices
	}
	return int(math.Round(float64(p.MemoryBytes) * migMemorySlices / float64(g.MemoryBytes)))
}

// Layout returns the slices of one GPU under a named layout: nil for
// all-disabled (a whole GPU), the profile repeated as often as it fits for
// all-<profile> (all-1g.10gb), NVIDIA's all-balanced, or
// mixed-<n>-<profile>[-<n>-<profile>…] (mixed-1-3g.71gb-1-4g.71gb). The
// result is checked with ValidateLayout.
func (g GPU) Layout(name string) ([]string, error) {
	switch {
	case name == LayoutDisabled:
		return nil, nil
	case len(g.MIGProfiles) == 0:
		return nil, fmt.Errorf("GPU %s does not support MIG; the only layout is %s", g.Name, LayoutDisabled)
	case name == LayoutBalanced:
		var out []string
		for _, want := range []struct{ compute, n int }{{1, 2}, {2, 1}, {3, 1}} {
			p, ok := g.smallest(want.compute)
			if !ok {
				return nil, fmt.Errorf("GPU %s has no %dg profile for %s", g.Name, want.compute, LayoutBalanced)
			}
			for range want.n {
				out = append(out, p.Name)
			}
		}
		return out, g.ValidateLayout(out)
	case strings.HasPrefix(name, "all-"):
		p, err := g.MIGProfile(strings.TrimPrefix(name, "all-"))
		if err != nil {
			return nil, fmt.Errorf("layout %s: %w", name, err)
		}
		out := make([]string, p.MaxPerGPU)
		for i := range out {
			out[i] = p.Name
		}
		return out, g.ValidateLayout(out)
	case strings.HasPrefix(name, "mixed-"):
		parts := strings.Split(strings.TrimPrefix(name, "mixed-"), "-")
		if len(parts)%2 != 0 {
			return nil, fmt.Errorf("layout %s: want mixed-<count>-<profile>[-<count>-<profile>…]", name)
		}
		var out []string
		for i := 0; i < len(parts); i += 2 {
			n, err := strconv.Atoi(parts[i])
			if err != nil || n < 1 || n > migComputeSlices {
				return nil, fmt.Errorf("layout %s: count %q must be 1 to %d", name, parts[i], migComputeSlices)
			}
			p, err := g.MIGProfile(parts[i+1])
			if err != nil {
				return nil, fmt.Errorf("layout %s: %w", name, err)
			}
			for range n {
				out = append(out, p.Name)
			}
		}
		return out, g.ValidateLayout(out)
	}
	return nil, fmt.Errorf("unknown MIG layout %q: want %s, %s, all-<profile> or mixed-<count>-<profile>…", name, LayoutDisabled, LayoutBalanced)
}

// smallest is the profile with compute slices c that fits most often.
func (g GPU) smallest(c int) (MIGProfile, bool) {
	var best MIGProfile
	for _, p := range g.MIGProfiles {
		if p.ComputeSlices == c && p.MaxPerGPU > best.MaxPerGPU {
			best = p
		}
	}
	return best, best.Name != ""
}

// ValidateLayout checks that one GPU can hold the slices together: each
// profile exists for the GPU and appears at most its maxPerGPU times, and
// the slices use at most the GPU's 7 compute and 8 memory slices. (NVIDIA's
// placement table also fixes where each slice starts; for these profiles
// its allowed combinations are the ones within these budgets.) The error
// names the GPU and the profile at fault.
func (g GPU) ValidateLayout(profiles []string) error {
	count := map[string]int{}
	compute, memory := 0, 0
	for _, name := range profiles {
		p, err := g.MIGProfile(name)
		if err != nil {
			return err
		}
		if count[p.Name]++; count[p.Name] > p.MaxPerGPU {
			return fmt.Errorf("GPU %s holds at most %d %s slices, not %d", g.Name, p.MaxPerGPU, p.Name, count[p.Name])
		}
		compute += p.ComputeSlices
		memory += g.MemorySlices(p)
		if compute > migComputeSlices {
			return fmt.Errorf("GPU %s: adding %s needs %d compute slices; a GPU has %d", g.Name, p.Name, compute, migComputeSlices)
		}
		if memory > migMemorySlices {
			return fmt.Errorf("GPU %s: adding %s needs %d memory slices; a GPU has %d", g.Name, p.Name, memory, migMemorySlices)
		}
	}
	return nil
}
