package gateway

import (
	"context"
	"fmt"
)

const kvPreciseName = "kv-cache-precise"

// Tier weights of a cached block: a block in CPU memory (L1) must be loaded
// back over PCIe before use, so it counts for less than one already on the
// GPU (llm-d uses 1.0 / 0.8).
const (
	gpuTierWeight = 1.0
	cpuTierWeight = 0.8
)

// kvPrecise scores by the precise index the backends' KV events feed: the
// tier-weighted count of leading prompt blocks a backend holds, over the
// prompt's blocks. After a pick it records the prompt's blocks for the
// chosen backend speculatively, covering the lag before the engine's own
// BlockStored events arrive (a burst of same-prefix requests would otherwise
// scatter); the engine's later events confirm or remove them.
type kvPrecise struct{ idx *kvIndex }

var (
	_ Scorer     = (*kvPrecise)(nil)
	_ PostPicker = (*kvPrecise)(nil)
)

func newKVPrecise(d Deps) (Plugin, error) {
	if d.KV == nil {
		return nil, fmt.Errorf("%s: no KV index in the plugin deps", kvPreciseName)
	}
	return &kvPrecise{idx: d.KV}, nil
}

func (*kvPrecise) Name() string { return kvPreciseName }

func (k *kvPrecise) Score(_ context.Context, req *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	hs := req.BlockHashes(cands)
	if len(hs) == 0 {
		return scores
	}
	w, _ := k.idx.match(hs, cands, gpuTierWeight, cpuTierWeight)
	for i := range cands {
		scores[i] = w[i] / float64(len(hs))
	}
	return scores
}

func (k *kvPrecise) Picked(_ context.Context, req *SchedRequest, c Candidate) {
	hs := req.BlockHashes([]Candidate{c})
	if len(hs) == 0 {
		return
	}
	_, n := k.idx.match(hs, []Candidate{c}, gpuTierWeight, cpuTierWeight)
	req.predictedBlocks = max(req.predictedBlocks, n[0])
	raw := make([]uint64, len(hs))
	for i, h := range hs {
		raw[i] = uint64(h)
	}
	k.idx.mu.Lock()
	k.idx.add(c.Backend.ID, raw, tierGPU)
	k.idx.mu.Unlock()
}
