package sim

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// vLLM's histogram buckets (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// Metrics are the engine's Prometheus series, in a private registry, with
// vLLM's names, labels (model_name, engine="0") and buckets so routers,
// autoscalers and dashboards built for vLLM work unchanged. All latencies are
// on the simulated timeline (seconds of simulated GPU time, independent of
// --time-scale).
type Metrics struct {
	Registry *prometheus.Registry

	Running, Waiting, KVUsage      prometheus.Gauge
	PrefixQueries, PrefixHits      prometheus.Counter
	PromptTokens, GenerationTokens prometheus.Counter
	Preemptions                    prometheus.Counter
	TTFT, ITL, E2E, QueueTime      prometheus.Observer
	Success                        *prometheus.CounterVec
	TierHits                       *prometheus.CounterVec
	TierBytes                      *prometheus.CounterVec
	L2DroppedWrites                prometheus.Counter
	cacheConfig                    *prometheus.GaugeVec
	// placement says what the engine runs on: the GPU, the MIG profile of
	// its slice ("" for whole GPUs) and the tensor-parallel degree.
	placement                                *prometheus.GaugeVec
	successStop, successLength, successAbort prometheus.Counter
	l1Hits, l2Hits, l1Load, l2Load           prometheus.Counter
	model                                    string
}

// NewMetrics registers the engine's series for one served model name.
func NewMetrics(model string) *Metrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"model_name": model, "engine": "0"}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, b []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	m := &Metrics{Registry: reg, model: model}
	m.Running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	m.Waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	m.KVUsage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
	m.PrefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.PrefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.PromptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.GenerationTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.Preemptions = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	m.TTFT = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.ITL = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	m.E2E = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2eBuckets)
	m.QueueTime = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", e2eBuckets)
	m.Success = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"})
	m.TierHits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_engine_kv_tier_hits_total", Help: "KV blocks served from a tier below the GPU.", ConstLabels: labels}, []string{"tier"})
	m.TierBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_engine_kv_tier_bytes_total", Help: "Simulated KV bytes moved to (store) or from (load) a tier.", ConstLabels: labels}, []string{"tier", "direction"})
	m.L2DroppedWrites = counter("capstan_engine_kv_l2_dropped_writes_total", "Blocks not written through to L2 because the writer was behind.")
	m.cacheConfig = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig", ConstLabels: labels},
		[]string{"block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization", "num_gpu_blocks", "num_cpu_blocks"})
	m.placement = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_engine_placement_info",
		Help: "What the engine runs on: device kind (gpu, accelerator or cpu), GPU model (the instance type for cpu), MIG profile of its slice (empty on whole GPUs), tensor-parallel degree.", ConstLabels: labels},
		[]string{"device", "gpu", "mig_profile", "tensor_parallel"})
	reg.MustRegister(m.Success, m.TierHits, m.TierBytes, m.cacheConfig, m.placement)
	// Pre-create the label values so dashboards see zeros, and keep the hot
	// children to avoid a label lookup per request.
	m.successStop = m.Success.WithLabelValues("stop")
	m.successLength = m.Success.WithLabelValues("length")
	m.successAbort = m.Success.WithLabelValues("abort")
	m.l1Hits = m.TierHits.WithLabelValues("l1")
	m.l2Hits = m.TierHits.WithLabelValues("l2")
	m.l1Load = m.TierBytes.WithLabelValues("l1", "load")
	m.l2Load = m.TierBytes.WithLabelValues("l2", "load")
	m.TierBytes.WithLabelValues("l1", "store")
	m.TierBytes.WithLabelValues("l2", "store")
	return m
}

func (m *Metrics) setCacheConfig(o Options, device string, blocks int) {
	m.setCPUBlocks(o, blocks, 0)
	m.placement.Reset()
	m.placement.WithLabelValues(device, o.GPU, o.MIGProfile, strconv.Itoa(o.TensorParallel)).Set(1)
}

// setCPUBlocks (re)publishes vllm:cache_config_info, now with the L1 size.
func (m *Metrics) setCPUBlocks(o Options, blocks, cpuBlocks int) {
	m.cacheConfig.Reset()
	m.cacheConfig.WithLabelValues(strconv.Itoa(o.BlockSize), "auto", "True",
		strconv.FormatFloat(o.GPUMemoryUtilization, 'g', -1, 64), strconv.Itoa(blocks), strconv.Itoa(cpuBlocks)).Set(1)
}

func (m *Metrics) tierLoaded(l1, l2 int, blockBytes int64) {
	if l1 > 0 {
		m.l1Hits.Add(float64(l1))
		m.l1Load.Add(float64(int64(l1) * blockBytes))
	}
	if l2 > 0 {
		m.l2Hits.Add(float64(l2))
		m.l2Load.Add(float64(int64(l2) * blockBytes))
	}
}

// finished records a completed request (called once per request by the
// engine goroutine, before the handler learns of it, so the success counter
// always equals the requests completed).
func (m *Metrics) finished(s *seq, reason string, e2e float64) {
	switch reason {
	case "stop":
		m.successStop.Inc()
	case "length":
		m.successLength.Inc()
	case "abort":
		m.successAbort.Inc()
	default:
		m.Success.WithLabelValues(reason).Inc()
	}
	m.PromptTokens.Add(float64(len(s.prompt)))
	m.E2E.Observe(e2e)
}
