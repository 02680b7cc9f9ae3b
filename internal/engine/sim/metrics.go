package sim

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/kv/tier"
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
	// TierErrors counts failed calls to a shared tier by op ("lookup":
	// served as a miss, "write": the blocks are not shared); a lookup that
	// ran out of time counts as an error.
	TierErrors *prometheus.CounterVec
	// TierDroppedWrites counts blocks not written through to a shared tier
	// because its writer was behind.
	TierDroppedWrites *prometheus.CounterVec
	cacheConfig       *prometheus.GaugeVec
	// placement says what the engine runs on: the GPU, the MIG profile of
	// its slice ("" for whole GPUs) and the tensor-parallel degree.
	placement                                *prometheus.GaugeVec
	successStop, successLength, successAbort prometheus.Counter
	l1                                       tierCounters
	tiers                                    *tierCollector
	model                                    string
}

// Tier label values of the capstan_engine_kv_tier_* families, in lookup
// order below the GPU. "l2" stays Redis, as before tieredstorage existed.
const (
	tierL1            = "l1"
	tierTieredStorage = "tieredstorage"
	tierRedis         = "l2"
)

// tierCounters are one tier's children of the tier families, kept so the
// hot path does no label lookup. L1 has no error or drop children.
type tierCounters struct {
	hits, load, store                  prometheus.Counter
	lookupErrors, writeErrors, dropped prometheus.Counter
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
	m.TierErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_engine_kv_tier_errors_total",
		Help: "Failed calls to a shared KV tier: op=lookup (timed out or failed, served as a miss) or op=write (blocks not shared).", ConstLabels: labels}, []string{"tier", "op"})
	m.TierDroppedWrites = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_engine_kv_tier_dropped_writes_total",
		Help: "KV blocks not written through to a shared tier because its writer was behind.", ConstLabels: labels}, []string{"tier"})
	m.tiers = newTierCollector(labels)
	m.cacheConfig = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig", ConstLabels: labels},
		[]string{"block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization", "num_gpu_blocks", "num_cpu_blocks"})
	m.placement = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_engine_placement_info",
		Help: "What the engine runs on: device kind (gpu, accelerator or cpu), GPU model (the instance type for cpu), MIG profile of its slice (empty on whole GPUs), tensor-parallel degree.", ConstLabels: labels},
		[]string{"device", "gpu", "mig_profile", "tensor_parallel"})
	reg.MustRegister(m.Success, m.TierHits, m.TierBytes, m.TierErrors, m.TierDroppedWrites, m.cacheConfig, m.placement, m.tiers)
	// Pre-create the label values so dashboards see zeros, and keep the hot
	// children to avoid a label lookup per request.
	m.successStop = m.Success.WithLabelValues("stop")
	m.successLength = m.Success.WithLabelValues("length")
	m.successAbort = m.Success.WithLabelValues("abort")
	m.l1 = m.tier(tierL1)
	m.tier(tierTieredStorage)
	m.tier(tierRedis)
	return m
}

// tier returns (creating) the children of tier name; shared tiers (every
// tier but L1) also get error and dropped-write children.
func (m *Metrics) tier(name string) tierCounters {
	c := tierCounters{
		hits:  m.TierHits.WithLabelValues(name),
		load:  m.TierBytes.WithLabelValues(name, "load"),
		store: m.TierBytes.WithLabelValues(name, "store"),
	}
	if name != tierL1 {
		c.lookupErrors = m.TierErrors.WithLabelValues(name, "lookup")
		c.writeErrors = m.TierErrors.WithLabelValues(name, "write")
		c.dropped = m.TierDroppedWrites.WithLabelValues(name)
	}
	return c
}

// loaded counts n blocks of blockBytes served from the tier.
func (c tierCounters) loaded(n int, blockBytes int64) {
	if n > 0 {
		c.hits.Add(float64(n))
		c.load.Add(float64(int64(n) * blockBytes))
	}
}

// SetTieredStorageStats makes every scrape report the tieredstorage store's
// size from stats (tier.Disk.Stats); until it is called those series are
// absent.
func (m *Metrics) SetTieredStorageStats(stats func() tier.DiskStats) { m.tiers.disk.Store(&stats) }

// SetL1Stats makes every scrape report L1's use and capacity in bytes.
func (m *Metrics) SetL1Stats(stats func() (used, capacity int64)) { m.tiers.l1.Store(&stats) }

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

// tierCollector reports, at scrape time, the size and use of the tiers
// below the GPU: capstan_engine_kv_tier_used_bytes and _capacity_bytes by
// tier (l1: this replica's CPU cache; tieredstorage: this model's file in the
// node's store, shared by its replicas, so each of them reports the same file
// as it sees it), plus the tieredstorage file's blocks and corrupt records. Reading at
// scrape time keeps the engine loop free of bookkeeping. Redis reports
// nothing: its size is the Redis server's.
type tierCollector struct {
	l1                      atomic.Pointer[func() (used, capacity int64)]
	disk                    atomic.Pointer[func() tier.DiskStats]
	used, capacity          *prometheus.Desc
	diskBlocks, diskCorrupt *prometheus.Desc
}

var _ prometheus.Collector = (*tierCollector)(nil)

func newTierCollector(labels prometheus.Labels) *tierCollector {
	d := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, vars, labels)
	}
	return &tierCollector{
		used:        d("capstan_engine_kv_tier_used_bytes", "Simulated KV bytes held in a tier below the GPU (blocks × block size).", "tier"),
		capacity:    d("capstan_engine_kv_tier_capacity_bytes", "Capacity of a tier below the GPU (--cpu-cache-bytes, --tiered-storage-bytes).", "tier"),
		diskBlocks:  d("capstan_engine_kv_tieredstorage_blocks", "KV blocks held in the node's tieredstorage store."),
		diskCorrupt: d("capstan_engine_kv_tieredstorage_corrupt_total", "tieredstorage block records that failed their checksum or were short, as this replica read them (each served as a miss)."),
	}
}

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.capacity
	ch <- c.diskBlocks
	ch <- c.diskCorrupt
}

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	if fn := c.l1.Load(); fn != nil {
		used, capacity := (*fn)()
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(used), tierL1)
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(capacity), tierL1)
	}
	if fn := c.disk.Load(); fn != nil {
		s := (*fn)()
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(s.Bytes), tierTieredStorage)
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(s.CapacityBytes), tierTieredStorage)
		ch <- prometheus.MustNewConstMetric(c.diskBlocks, prometheus.GaugeValue, float64(s.Blocks))
		ch <- prometheus.MustNewConstMetric(c.diskCorrupt, prometheus.CounterValue, float64(s.Corrupt))
	}
}
