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
// Hopper 0.47 puts the BLIS-derived H100 prefill throughput (+16 %) and
// llm-d's measured Qwen3-32B TP2 figure (−13 %) on either side, with the
// embedding and LM head counted only where they compute.
var mfuByGPU = map[string]float64{
	"a100-40gb": 0.38, "a100-80gb": 0.38, "h100": 0.47, "h200": 0.47, "b200": 0.47,
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

	flopsPerRank     float64 // effective FLOP/s of one rank (MFU and MIG applied)
	bytesPerSec      float64 // effective HBM bytes/s of one rank
	cacheBytes       float64 // a last-level cache (CPUs): a step that fits reads from it
	cacheBytesPerSec float64 // its effective bytes/s
	weightsPerRank   float64 // resident
	readPerStep      float64 // weight bytes a step reads, per rank
	kvBytesPerToken  float64 // per rank
	flopsPerToken    float64 // the layers' FLOPs per new token, per rank
	flopsPerLogit    float64 // the LM head's FLOPs per token it scores, per rank
	flopsPerAttn     float64 // attention FLOPs per (token, position attended), per rank
	commPerToken     float64 // seconds of link time per token per all-reduce
	commFixed        time.Duration
	overhead         time.Duration // fixed per step
	samplePerLogit   float64       // seconds of CPU sampling per token scored
}

// Step is the work of one engine step over its batch.
type Step struct {
	// Tokens are the new tokens computed: prefill chunks plus one per
	// decoding sequence.
	Tokens int
	// Logits are the tokens the LM head scores: one per sequence that
	// emits a token this step (a prefill chunk that ends its prompt, or a
	// decode). The other prompt tokens skip it, as in vLLM and llama.cpp.
	Logits int
	// Ctx are the context tokens whose KV the step reads, over the batch.
	Ctx int64
	// Attn is the sum over the new tokens of the positions each attends to
	// (itself and those before it).
	Attn int64
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
	overhead := stepOverhead
	if g.StepOverheadSeconds > 0 {
		overhead = time.Duration(g.StepOverheadSeconds * float64(time.Second))
	}
	compute, bw := g.BF16FLOPS, g.BandwidthBytesPerSec
	if mig != nil {
		compute *= mig.ComputeFraction()
		bw *= float64(mig.MemoryBytes) / float64(g.MemoryBytes)
	}
	// The token embedding is a table lookup, not a matrix product: its
	// parameters cost no FLOPs, and an untied table is not read whole.
	// The LM head (the same table when tied) scores only Step.Logits.
	table := float64(m.VocabSize) * float64(m.HiddenSize)
	tables := table
	if !m.TieWordEmbeddings {
		tables *= 2
	}
	body := max(float64(m.ActiveParamCount())-tables, 0) // MoE: only routed experts compute
	read := float64(m.WeightBytes())
	if !m.TieWordEmbeddings {
		read = max(read-table*float64(m.DTypeBytes), 0)
	}
	t := float64(tp)
	r := &Roofline{
		Model: m, GPU: g, TP: tp, MIG: mig,
		flopsPerRank:    compute * mfu,
		bytesPerSec:     bw * bwEff,
		weightsPerRank:  float64(m.WeightBytes()) / t,
		readPerStep:     read / t,
		kvBytesPerToken: float64(m.KVBytesPerToken()) / t,
		flopsPerToken:   2 * body / t,
		flopsPerLogit:   2 * table / t,
		// Q·Kᵀ and the weighted sum of V: 2 × 2 FLOPs per query dimension.
		flopsPerAttn:     4 * float64(m.Layers) * float64(m.AttentionHeads*m.HeadDim) / t,
		overhead:         overhead,
		cacheBytes:       float64(g.CacheBytes),
		cacheBytesPerSec: g.CacheBandwidthBytesPerSec * bwEff,
		// Sampling runs on the device's compute (one thread with the
		// kernels on a CPU), so it counts on the compute side.
		samplePerLogit: g.SamplingSecondsPerEntry * float64(m.VocabSize),
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

// StepTime is the predicted duration of step s. A step without tokens takes
// no time.
func (r *Roofline) StepTime(s Step) time.Duration {
	if s.Tokens <= 0 {
		return 0
	}
	flops := r.flopsPerToken*float64(s.Tokens) + r.flopsPerLogit*float64(s.Logits) + r.flopsPerAttn*float64(s.Attn)
	compute := flops/r.flopsPerRank + r.samplePerLogit*float64(s.Logits)
	bytes := r.readPerStep + r.kvBytesPerToken*float64(s.Ctx)
	memory := bytes / r.bytesPerSec
	if bytes <= r.cacheBytes {
		memory = bytes / r.cacheBytesPerSec
	}
	sec := max(compute, memory) + r.commPerToken*float64(s.Tokens)
	return time.Duration(sec*float64(time.Second)) + r.commFixed + r.overhead
}

// PrefillStep is the step that computes a whole prompt of n tokens at once.
func PrefillStep(n int) Step {
	return Step{Tokens: n, Logits: 1, Ctx: int64(n), Attn: attended(0, n)}
}

// DecodeStep is the step in which batch sequences of ctx tokens each decode
// one token.
func DecodeStep(batch, ctx int) Step {
	return Step{Tokens: batch, Logits: batch, Ctx: int64(batch) * int64(ctx), Attn: int64(batch) * int64(ctx)}
}

// attended is Σ positions attended by n new tokens after done computed
// ones: token i (0-based) attends to done+i+1 positions.
func attended(done, n int) int64 {
	return int64(n)*int64(done) + int64(n)*int64(n+1)/2
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
