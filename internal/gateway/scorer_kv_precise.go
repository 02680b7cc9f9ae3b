package gateway

import (
	"context"
	"fmt"
)

const kvPreciseName = "kv-cache-precise"

// Tier weights of a cached block: the share of the block's prefill that
// finding it there saves, 1 − load time ÷ recompute time. A GPU block costs
// nothing to use. Loads are charged at the engine's bandwidths (L1 over
// PCIe 25 GB/s, tieredstorage 7 GB/s, Redis 5 GB/s) against recomputing the
// block at the end of a full prefill chunk, attention over the positions
// before it included; for Llama-3.1-8B on one H100 (128 KiB of KV and 39 µs
// of prefill a token there) that is CPU 0.87, DISK 0.52 and REMOTE 0.33,
// and the other catalog models on their usual GPUs land close (table in
// docs/gateway.md, derived by TestTierWeightsDerivation).
const (
	gpuTierWeight    = 1.0
	cpuTierWeight    = 0.85
	diskTierWeight   = 0.5
	remoteTierWeight = 0.3
)

// tierWeights are the weights match applies per tier.
type tierWeights struct{ gpu, cpu, disk, remote float64 }

var kvTierWeights = tierWeights{gpu: gpuTierWeight, cpu: cpuTierWeight, disk: diskTierWeight, remote: remoteTierWeight}

func (w tierWeights) of(tier uint8) float64 {
	switch tier {
	case tierGPU:
		return w.gpu
	case tierCPU:
		return w.cpu
	case tierDisk:
		return w.disk
	case tierRemote:
		return w.remote
	}
	return 0
}

// kvPrecise scores by the precise index the backends' KV events feed: the
// tier-weighted count of leading prompt blocks a backend reaches (its own
// GPU and CPU, its node's tieredstorage, Redis), over the prompt's blocks. After a pick it records the prompt's blocks for the
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
	w, _ := k.idx.match(hs, cands, kvTierWeights)
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
	n := k.idx.picked(hs, c)
	req.predictedBlocks = max(req.predictedBlocks, n)
}
