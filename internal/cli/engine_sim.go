package cli

import (
	"errors"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/engine/sim"
	"github.com/capstan-dev/capstan/internal/engines"
)

// newEngineSimCommand is `capstan engine sim`: the simulated GPU engine.
// Flags land in sim.Options, which validates them.
func newEngineSimCommand(_ *globalOptions) *cobra.Command {
	var o sim.Options
	var calibration bool
	var logLevel string
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the simulated GPU inference engine (OpenAI + SageMaker container API, vLLM metrics)",
		Long: `Run a vLLM look-alike that needs no GPU: continuous batching over a paged KV cache
with prefix caching, step times from a roofline model of the chosen GPU, tiered KV
(--cpu-cache-bytes, --tiered-storage-dir/--tiered-storage-bytes, --shared-cache), KV events (--kv-events) and fault injection.
Prints "listening on http://HOST:PORT" on stdout once bound. With CAPSTAN_ENGINE_API_KEY
set in its environment it answers only requests that send that key as a bearer token
(/health and /ping aside). See docs/engine-sim.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if calibration {
				return sim.WriteCalibrationTable(cmd.OutOrStdout())
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return errors.New("--log-level: want debug, info, warn or error")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			o.APIKey = os.Getenv(engines.SimAPIKeyEnv)
			return sim.Run(cmd.Context(), o, cmd.OutOrStdout(), log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "model: catalog id or alias, e.g. llama-3.1-8b (required unless --model-dir)")
	f.StringVar(&o.ModelDir, "model-dir", "", "model folder whose Hugging Face config.json gives the architecture (--model then only names it)")
	f.StringVar(&o.GPU, "gpu", "", "GPU: catalog name, e.g. h100 (required)")
	f.IntVar(&o.TensorParallel, "tensor-parallel", 1, "tensor-parallel GPUs per replica")
	f.StringVar(&o.MIGProfile, "mig-profile", "", "run on one MIG slice of the GPU, e.g. 3g.40gb")
	f.StringVar(&o.Host, "host", "127.0.0.1", "address to listen on")
	f.IntVar(&o.Port, "port", sim.DefaultPort, "port to listen on (0 picks a free port)")
	f.StringVar(&o.ServedModelName, "served-model-name", "", "model name clients use (default: --model, else the --model-dir config.json _name_or_path or folder name)")
	f.IntVar(&o.MaxNumSeqs, "max-num-seqs", sim.DefaultMaxNumSeqs, "most sequences in one batch")
	f.IntVar(&o.MaxNumBatchedTokens, "max-num-batched-tokens", sim.DefaultMaxNumBatchedTokens, "token budget of one step (chunked prefill)")
	f.IntVar(&o.BlockSize, "block-size", sim.DefaultBlockSize, "tokens per KV block")
	f.Float64Var(&o.GPUMemoryUtilization, "gpu-memory-utilization", sim.DefaultGPUMemoryUtilization, "fraction of GPU memory for weights and KV cache")
	f.IntVar(&o.MaxWaiting, "max-waiting", sim.DefaultMaxWaiting, "waiting-queue bound; requests beyond it get 429")
	f.Int64Var(&o.CPUCacheBytes, "cpu-cache-bytes", 0, "L1 CPU KV cache size in bytes (0 = no L1)")
	f.StringVar(&o.SharedCache, "shared-cache", "", "L2 shared KV cache, redis://host:port/db")
	f.Float64Var(&o.L1Bandwidth, "l1-bandwidth", sim.DefaultL1Bandwidth, "L1→GPU load bandwidth, bytes/s (PCIe)")
	f.Float64Var(&o.L2Bandwidth, "l2-bandwidth", sim.DefaultL2Bandwidth, "L2→GPU load bandwidth, bytes/s (network)")
	f.StringVar(&o.TieredStorageDir, "tiered-storage-dir", "", "tieredstorage directory: the node-local disk KV tier shared by the replicas of a node, asked after L1 and before --shared-cache (required with --tiered-storage-bytes)")
	f.Int64Var(&o.TieredStorageBytes, "tiered-storage-bytes", 0, "tieredstorage size in bytes of this model's file in --tiered-storage-dir, at least one KV block (0 = no tieredstorage)")
	f.Float64Var(&o.TieredStorageBandwidth, "tiered-storage-bandwidth", sim.DefaultTieredStorageBandwidth, "tieredstorage→GPU load bandwidth, bytes/s (NVMe Gen4-class SSD)")
	f.StringVar(&o.KVEvents, "kv-events", "", "publish vLLM KV events on this ZMQ endpoint, e.g. tcp://*:5557")
	f.StringVar(&o.KVEventsReplay, "kv-events-replay", "", "ZMQ ROUTER endpoint for KV event replay")
	f.StringVar(&o.KVEventsTopic, "kv-events-topic", "", "KV events topic (default kv@HOST:PORT@MODEL)")
	f.Float64Var(&o.TimeScale, "time-scale", 1.0, "multiply every simulated duration (0 = never wait)")
	f.Int64Var(&o.Seed, "seed", 0, "default seed for generated text and faults")
	f.DurationVar(&o.StartupDelay, "startup-delay", 0, "fault: /health, /ping and inference answer 503 until this long after start")
	f.Float64Var(&o.FailRate, "fail-rate", 0, "fault: fraction (0..1) of requests answered 500")
	f.IntVar(&o.CrashAfterRequests, "crash-after-requests", 0, "fault: exit with status 1 after N completed requests")
	f.Float64Var(&o.SlowFactor, "slow-factor", 1.0, "fault: multiply every step duration")
	f.BoolVar(&calibration, "calibration-table", false, "print the simulated-vs-published calibration table (Markdown) and exit")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error (logs go to stderr)")
	return cmd
}
