package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/bench"
	"github.com/capstan-dev/capstan/internal/clock"
)

// benchOptions are the flags of `capstan bench`.
type benchOptions struct {
	target, api, model, endpoint, workload, arrival, slo, compare, out, report string
	trace, traceFile                                                           string
	rate, traceScale                                                           float64
	concurrency, maxConcurrency, sweepPoints, requests                         int
	duration, timeout, progress                                                string
	seed                                                                       uint64
	noStream, noMetrics, detailed                                              bool
}

func newBenchCommand(_ *globalOptions) *cobra.Command { return benchCommand(&benchOptions{}) }

// benchCommand builds the command with its flags bound to o (tests parse
// flags into o and call o.config without running the benchmark).
func benchCommand(o *benchOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test an OpenAI-compatible or SageMaker endpoint (TTFT, TPOT, ITL, goodput)",
		Long: `bench offers a seeded workload to one or more targets and measures every streamed request.

Workloads (--workload name[:key=value,...]):
  random:input=1024,output=128,dist=fixed|uniform|normal,spread=0.1
  shared-prefix:preset=inference-perf|inference-perf-tiered|inference-perf-70b|small|tiny,scale=1,groups=,prompts=,system=,question=,output=
  multi-turn:sessions=10,turns=5,system=1000,question=200,output=100,think=1s
  working-set:docs=64|capacity=TOKENS,fill=4,prefix=4096,suffix=128,output=32,revisits=3,gap=docs/2,from=0
  file:path=prompts.jsonl|sharegpt.json,format=auto|jsonl|sharegpt,output=128,limit=
Arrivals: --arrival poisson|constant (with --rate), concurrency (with --concurrency), sweep,
  trace (--trace bursty | --trace-file FILE, --trace-scale F; or --arrival trace:bursty,scale=F).
See docs/benchmarking.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config()
			if err != nil {
				return err
			}
			tty := benchIsTerminal(os.Stderr)
			deps := bench.Deps{Clock: clock.Real{}, Out: cmd.OutOrStdout(), Progress: cmd.ErrOrStderr(), ProgressTTY: tty}
			if o.progress == "" {
				cfg.ProgressInterval = bench.ProgressDefault(tty)
			}
			_, err = bench.Run(cmd.Context(), cfg, deps)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "", "server base URL, e.g. http://127.0.0.1:8080")
	f.StringVar(&o.api, "api", "openai-chat", "openai-chat, openai-completions or sagemaker")
	f.StringVar(&o.model, "model", "", "model name (sagemaker: endpoint name)")
	f.StringVar(&o.endpoint, "endpoint", "", "SageMaker endpoint name (alias of --model for --api sagemaker)")
	f.StringVar(&o.workload, "workload", "random", "workload spec name[:key=value,...]")
	f.StringVar(&o.arrival, "arrival", "", "poisson (default with --rate), constant, concurrency (default with --concurrency) or sweep")
	f.Float64Var(&o.rate, "rate", 0, "requests per second (multi-turn: sessions per second; trace: multiplies the trace's rates)")
	f.StringVar(&o.trace, "trace", "", "built-in rate trace to replay: bursty (implies --arrival trace)")
	f.StringVar(&o.traceFile, "trace-file", "", "CSV rate trace to replay, rows offset_seconds,rate[,phase] (implies --arrival trace)")
	f.Float64Var(&o.traceScale, "trace-scale", 0, "multiplies the trace's offsets, e.g. 0.1 plays it 10× faster (default 1)")
	f.IntVar(&o.concurrency, "concurrency", 0, "closed-loop concurrency (multi-turn: concurrent sessions)")
	f.IntVar(&o.maxConcurrency, "max-concurrency", 0, "cap on in-flight requests per target; sweep's throughput concurrency (default 256)")
	f.IntVar(&o.sweepPoints, "sweep-points", 0, "stages in a sweep, synchronous and throughput included (default 6)")
	f.StringVar(&o.duration, "duration", "", "length of each stage, e.g. 60s")
	f.IntVar(&o.requests, "requests", 0, "requests per stage per target")
	f.StringVar(&o.timeout, "timeout", "10m", "per-request timeout")
	f.StringVar(&o.slo, "slo", "", "per-request objectives for goodput, e.g. ttft=500ms,tpot=50ms,e2e=10s")
	f.StringVar(&o.out, "out", "", "write results JSON here")
	f.StringVar(&o.report, "report", "", "write a self-contained HTML report here")
	f.StringVar(&o.compare, "compare", "", "name=URL,... targets to run the same workload against, interleaved (first is the baseline)")
	f.Uint64Var(&o.seed, "seed", 1, "seed for prompts, lengths and arrivals")
	f.BoolVar(&o.noStream, "no-stream", false, "send non-streaming requests (TTFT then equals E2E)")
	f.BoolVar(&o.noMetrics, "no-metrics", false, "do not scrape the targets' /metrics")
	f.BoolVar(&o.detailed, "detailed", false, "keep every request's record in the JSON output")
	f.StringVar(&o.progress, "progress", "", "progress interval (default 200ms on a terminal, 5s otherwise; 0 disables)")
	return cmd
}

func (o *benchOptions) config() (bench.Config, error) {
	cfg := bench.Config{
		API: bench.API(o.api), Model: o.model, Seed: o.seed, Arrival: o.arrival, Rate: o.rate,
		Concurrency: o.concurrency, MaxConcurrency: o.maxConcurrency, SweepPoints: o.sweepPoints,
		Requests: o.requests, Out: o.out, Report: o.report, Stream: !o.noStream,
		ScrapeMetrics: !o.noMetrics, Detailed: o.detailed,
		Trace: o.trace, TraceFile: o.traceFile, TraceScale: o.traceScale,
	}
	if o.endpoint != "" {
		if o.model != "" && o.model != o.endpoint {
			return cfg, errors.New("--endpoint and --model name different endpoints")
		}
		cfg.Model = o.endpoint
	}
	if o.target != "" {
		cfg.Targets = append(cfg.Targets, bench.Target{URL: o.target})
	}
	if o.compare != "" {
		ts, err := bench.ParseCompare(o.compare)
		if err != nil {
			return cfg, err
		}
		cfg.Targets = append(cfg.Targets, ts...)
	}
	var err error
	if cfg.Workload, err = bench.ParseWorkloadSpec(o.workload); err != nil {
		return cfg, err
	}
	if cfg.SLO, err = bench.ParseSLO(o.slo); err != nil {
		return cfg, err
	}
	if cfg.Duration, err = benchDuration("--duration", o.duration); err != nil {
		return cfg, err
	}
	if cfg.Timeout, err = benchDuration("--timeout", o.timeout); err != nil {
		return cfg, err
	}
	if cfg.ProgressInterval, err = benchDuration("--progress", o.progress); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

func benchIsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func benchDuration(flag, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: want a duration like 30s, got %q", flag, v)
	}
	return d, nil
}
