package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// Calibration constants. They are fitted to the published figures in
// shared/reference/gpu-and-engine-calibration.md §4–§5; docs/engine-sim.md
// has the resulting table (regenerate with `capstan engine sim --calibration-table`).
const (
	// bandwidthEfficiency is the share of peak HBM bandwidth a decode step
	// achieves: vLLM at batch 1 runs at ~77 % of the weight-streaming floor
	// (A100-40: 13.3 ms measured vs 10.3 ms floor).
	bandwidthEfficiency = 0.77
	// stepOverhead is the fixed per-step cost outside the GPU kernels
	// (scheduling, sampling, launch); 0.3 ms lands H100 batch 1 on 6.5 ms.
	stepOverhead = 300 * time.Microsecond
	// allReduceLatency is the fixed cost of one tensor-parallel all-reduce;
	// there are two per layer (after attention and after the MLP).
	allReduceLatency = 5 * time.Microsecond
	// defaultMFU is the model-FLOP utilisation of compute-bound (prefill)
	// steps on GPUs without a calibrated value.
	defaultMFU = 0.40
)

// mfuByGPU are calibrated prefill MFUs: A100 0.38 is BLIS's calibration;
// Hopper 0.5 sits between BLIS's 0.45 and llm-d's measured 0.53 (Qwen3-32B TP2).
var mfuByGPU = map[string]float64{
	"a100-40gb": 0.38, "a100-80gb": 0.38, "h100": 0.50, "h200": 0.50, "b200": 0.50,
}

// linkBandwidth is the per-GPU interconnect bandwidth used for all-reduce
// payloads (NVLink 3 on A100, NVLink 4 on Hopper; PCIe-class for the rest).
var linkBandwidth = map[string]float64{
	"a100-40gb": 300e9, "a100-80gb": 300e9, "h100": 450e9, "h200": 450e9, "b200": 900e9,
}

// Roofline predicts the duration of one engine step (a forward pass over a
// batch) on one model replica: max(compute, memory traffic) per TP rank, plus
// the TP communication and a fixed overhead. It is immutable after creation
// and safe for concurrent use.
type Roofline struct {
	Model catalog.Model
	GPU   catalog.GPU
	TP    int
	MIG   *catalog.MIGProfile

	flopsPerRank    float64 // effective FLOP/s of one rank (MFU and MIG applied)
	bytesPerSec     float64 // effective HBM bytes/s of one rank
	weightsPerRank  float64
	kvBytesPerToken float64 // per rank
	flopsPerToken   float64 // per rank
	commPerToken    float64 // seconds of link time per token per all-reduce
	commFixed       time.Duration
}

// NewRoofline builds the step-time model for model on tp GPUs (or one MIG
// slice when mig is non-nil).
func NewRoofline(m catalog.Model, g catalog.GPU, tp int, mig *catalog.MIGProfile) (*Roofline, error) {
	if tp < 1 {
		return nil, fmt.Errorf("tensor parallel size must be at least 1, got %d", tp)
	}
	if mig != nil && tp != 1 {
		return nil, fmt.Errorf("a MIG slice cannot be combined with tensor parallelism (got --tensor-parallel %d)", tp)
	}
	mfu, ok := mfuByGPU[strings.ToLower(g.Name)]
	if !ok {
		mfu = defaultMFU
	}
	bwEff := bandwidthEfficiency
	// A device with its own efficiencies (the CPU profile) overrides the GPU ones.
	if g.MFU > 0 {
		mfu = g.MFU
	}
	if g.BandwidthEfficiency > 0 {
		bwEff = g.BandwidthEfficiency
	}
	compute, bw := g.BF16FLOPS, g.BandwidthBytesPerSec
	if mig != nil {
		compute *= mig.ComputeFraction()
		bw *= float64(mig.MemoryBytes) / float64(g.MemoryBytes)
	}
	r := &Roofline{
		Model: m, GPU: g, TP: tp, MIG: mig,
		flopsPerRank:    compute * mfu,
		bytesPerSec:     bw * bwEff,
		weightsPerRank:  float64(m.WeightBytes()) / float64(tp),
		kvBytesPerToken: float64(m.KVBytesPerToken()) / float64(tp),
		flopsPerToken:   2 * float64(m.ActiveParamCount()) / float64(tp), // MoE: only routed experts compute
	}
	if tp > 1 {
		link, ok := linkBandwidth[strings.ToLower(g.Name)]
		if !ok {
			link = 32e9
		}
		allReduces := float64(2 * m.Layers)
		// Ring all-reduce moves 2(tp-1)/tp of the activation bytes per rank.
		perToken := float64(m.HiddenSize*m.DTypeBytes) * 2 * float64(tp-1) / float64(tp)
		r.commPerToken = allReduces * perToken / link
		r.commFixed = time.Duration(allReduces) * allReduceLatency
	}
	return r, nil
}

// StepTime is the predicted duration of one step computing tokens new tokens
// (prefill chunks plus one per decoding sequence) while reading the KV of
// ctxTokens context tokens across the batch. Zero tokens take zero time.
func (r *Roofline) StepTime(tokens int, ctxTokens int64) time.Duration {
	if tokens <= 0 {
		return 0
	}
	compute := r.flopsPerToken * float64(tokens) / r.flopsPerRank
	memory := (r.weightsPerRank + r.kvBytesPerToken*float64(ctxTokens)) / r.bytesPerSec
	sec := max(compute, memory) + r.commPerToken*float64(tokens)
	return time.Duration(sec*float64(time.Second)) + r.commFixed + stepOverhead
}

// KVCapacityTokens is how many tokens of KV fit per replica: per TP rank,
// (memory × utilisation − weights/TP) / (KV bytes per token / TP). An error
// says the model does not fit.
func (r *Roofline) KVCapacityTokens(memUtil float64) (int64, error) {
	mem := float64(r.GPU.MemoryBytes)
	where := r.GPU.Name
	if r.MIG != nil {
		mem = float64(r.MIG.MemoryBytes)
		where = r.GPU.Name + " MIG " + r.MIG.Name
	}
	free := mem*memUtil - r.weightsPerRank
	tokens := int64(free / r.kvBytesPerToken)
	if (free <= 0 || tokens < 1) && r.GPU.DeviceKind() == catalog.DeviceCPU {
		return 0, fmt.Errorf("model %s does not fit in the memory of CPU instance %s: %.1f GB of weights vs %.1f GB usable (%.1f GB of instance memory left to the engine × gpu-memory-utilization %.2f), leaving no room for KV cache; use an instance type with more memory",
			r.Model.ID, where, r.weightsPerRank/1e9, mem*memUtil/1e9, mem/1e9, memUtil)
	}
	if free <= 0 || tokens < 1 {
		return 0, fmt.Errorf("model %s does not fit on %s with tensor parallel %d: %.1f GB of weights per GPU vs %.1f GB usable (memory %.1f GB × gpu-memory-utilization %.2f), leaving no room for KV cache",
			r.Model.ID, where, r.TP, r.weightsPerRank/1e9, mem*memUtil/1e9, mem/1e9, memUtil)
	}
	return tokens, nil
}
