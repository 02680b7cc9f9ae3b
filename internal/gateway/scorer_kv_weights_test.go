package gateway

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engine/sim"
)

// tieredStorageBandwidth is the engine's --tiered-storage-bandwidth default
// (NVMe Gen4-class, issue 19's shared plan).
const tieredStorageBandwidth = 7e9

// derivedWeights are the tier weights of one deployment: 1 − the time to
// load a block from the tier ÷ the time to recompute it, as the simulated
// engine charges them.
type derivedWeights struct {
	recompute, kvBlock float64 // seconds to prefill one block; bytes of KV in one block
	cpu, disk, remote  float64
	loadCPU, loadDisk  float64 // seconds to load one block
	loadRemote         float64
	model, gpu         string
	tp                 int
	representative     bool
}

// deriveTierWeights measures a block's recompute cost on the engine's
// roofline (the marginal step time of one more block in a full prefill
// chunk, where prefill is compute-bound) and its load cost per tier (the
// engine charges KV bytes ÷ the tier's bandwidth, serially with the step).
func deriveTierWeights(t *testing.T, model, gpu string, tp int) derivedWeights {
	t.Helper()
	cat := catalog.Default()
	m, err := cat.Model(model)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cat.GPU(gpu)
	if err != nil {
		t.Fatal(err)
	}
	roof, err := sim.NewRoofline(m, g, tp, nil)
	if err != nil {
		t.Fatal(err)
	}
	bs := sim.DefaultBlockSize
	chunk := sim.DefaultMaxNumBatchedTokens - bs
	d := derivedWeights{model: model, gpu: gpu, tp: tp,
		recompute: (roof.StepTime(sim.PrefillStep(chunk+bs)) - roof.StepTime(sim.PrefillStep(chunk))).Seconds(),
		kvBlock:   float64(m.KVBytesPerToken() * int64(bs))}
	d.loadCPU = d.kvBlock / sim.DefaultL1Bandwidth
	d.loadDisk = d.kvBlock / tieredStorageBandwidth
	d.loadRemote = d.kvBlock / sim.DefaultL2Bandwidth
	w := func(load float64) float64 { return max(0, 1-load/d.recompute) }
	d.cpu, d.disk, d.remote = w(d.loadCPU), w(d.loadDisk), w(d.loadRemote)
	return d
}

// TestTierWeightsDerivation derives the tier weights for catalog models on
// the GPUs they usually run on, checks the constants against the
// representative one (Llama-3.1-8B on one H100) and their order everywhere.
// `go test ./internal/gateway -run TestTierWeightsDerivation -v` prints the
// table docs/gateway.md shows.
func TestTierWeightsDerivation(t *testing.T) {
	tests := []struct {
		model, gpu     string
		tp             int
		representative bool
	}{
		{model: "llama-3.1-8b", gpu: "h100", tp: 1, representative: true},
		{model: "qwen3-32b", gpu: "h100", tp: 2}, // bench/routing.sh
		{model: "llama-3.1-70b", gpu: "h100", tp: 4},
		{model: "qwen2.5-7b", gpu: "l40s", tp: 1},
		{model: "mistral-7b", gpu: "a10g", tp: 1},
		{model: "llama-3.2-1b", gpu: "l4", tp: 1},
	}
	var table strings.Builder
	table.WriteString("| model | GPU × TP | KV per block | recompute per block | CPU (25 GB/s) | DISK (7 GB/s) | REMOTE (5 GB/s) |\n|---|---|---|---|---|---|---|\n")
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s on %s×%d", tt.model, tt.gpu, tt.tp), func(t *testing.T) {
			d := deriveTierWeights(t, tt.model, tt.gpu, tt.tp)
			fmt.Fprintf(&table, "| %s | %s × %d | %.2f MiB | %.0f µs | %.2f (%.0f µs) | %.2f (%.0f µs) | %.2f (%.0f µs) |\n",
				d.model, d.gpu, d.tp, d.kvBlock/(1<<20), d.recompute*1e6,
				d.cpu, d.loadCPU*1e6, d.disk, d.loadDisk*1e6, d.remote, d.loadRemote*1e6)
			if !(1 > d.cpu && d.cpu > d.disk && d.disk > d.remote && d.remote >= 0) {
				t.Errorf("weights GPU 1 > CPU %.2f > DISK %.2f > REMOTE %.2f ≥ 0 do not hold", d.cpu, d.disk, d.remote)
			}
			if !tt.representative {
				return
			}
			for _, c := range []struct {
				tier            string
				constant, value float64
			}{
				{"CPU", cpuTierWeight, d.cpu}, {"DISK", diskTierWeight, d.disk}, {"REMOTE", remoteTierWeight, d.remote},
			} {
				if math.Abs(c.constant-c.value) > 0.05 {
					t.Errorf("%s weight %.2f, but %s on %s derives %.3f", c.tier, c.constant, d.model, d.gpu, c.value)
				}
			}
		})
	}
	t.Log("\n" + table.String())
}
