package gateway

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
)

// metrics are every Prometheus collector of the data path, defined here only.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	retries  *prometheus.CounterVec

	queued    *prometheus.GaugeVec
	rejected  *prometheus.CounterVec
	decisions *prometheus.CounterVec
	ejections *prometheus.CounterVec
	kvGaps    *prometheus.CounterVec

	activations *prometheus.CounterVec
	held        *prometheus.GaugeVec

	ttfb      *prometheus.HistogramVec
	ttft      *prometheus.HistogramVec
	itl       *prometheus.HistogramVec
	tokens    *prometheus.CounterVec
	cachedTok *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "capstan", Subsystem: "gateway", Name: "requests_total",
			Help: "Invocations by endpoint, variant and final upstream status code (\"error\" when no response arrived); retried attempts are in retries_total.",
		}, []string{"endpoint", "variant", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "capstan", Subsystem: "gateway", Name: "request_duration_seconds",
			Help:    "Time from invocation to the end of the upstream response body.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"endpoint", "variant"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "capstan", Subsystem: "gateway", Name: "in_flight_requests",
			Help: "Requests forwarded to a backend whose response body is not closed yet.",
		}, []string{"endpoint", "variant"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "capstan", Subsystem: "gateway", Name: "retries_total",
			Help: "Attempts retried on another backend, by reason (connect, 5xx).",
		}, []string{"endpoint", "variant", "reason"}),
	}
	lat := prometheus.ExponentialBuckets(0.001, 2, 16)
	m.queued = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "capstan", Subsystem: "gateway", Name: "queued_requests",
		Help: "Requests waiting for a concurrency slot of their endpoint."}, []string{"endpoint"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capstan", Subsystem: "gateway", Name: "rejected_total",
		Help: "Requests refused because the endpoint's queue was full (429)."}, []string{"endpoint"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capstan", Subsystem: "gateway", Name: "routing_decisions_total",
		Help: "Routing decisions by policy and predicted outcome (hit: the policy expected the chosen backend to hold a prefix of the prompt)."}, []string{"endpoint", "strategy", "outcome"})
	m.ejections = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capstan", Subsystem: "gateway", Name: "backend_ejections_total",
		Help: "Backends ejected after consecutive failures."}, []string{"backend"})
	m.kvGaps = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capstan", Subsystem: "gateway", Name: "kv_event_gaps_total",
		Help: "Gaps in a backend's KV event sequence, by repair (replayed, cleared)."}, []string{"backend", "outcome"})
	m.ttfb = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "capstan", Subsystem: "gateway", Name: "time_to_first_byte_seconds",
		Help: "Time from request to the first response byte from the backend.", Buckets: lat}, []string{"endpoint", "variant"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "capstan", Subsystem: "gateway", Name: "time_to_first_token_seconds",
		Help: "Streams: time from request to the first chunk carrying generated text.", Buckets: lat}, []string{"endpoint", "variant"})
	m.itl = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "capstan", Subsystem: "gateway", Name: "inter_token_latency_seconds",
		Help: "Streams: time between successive chunks carrying generated text.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"endpoint", "variant"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capstan", Subsystem: "gateway", Name: "tokens_total",
		Help: "Tokens by direction (in: prompt, out: completion) from the responses' usage."}, []string{"endpoint", "variant", "direction"})
	m.cachedTok = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capstan", Subsystem: "gateway", Name: "prompt_cached_tokens_total",
		Help: "Prompt tokens served from cache (usage.prompt_tokens_details.cached_tokens, source=served) versus predicted by the routing policy (source=predicted)."}, []string{"endpoint", "strategy", "source"})
	m.activations = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capstan", Subsystem: "gateway", Name: "activations_total",
		Help: "Hold episodes: times the activator was asked to start capacity for an endpoint with no backend."}, []string{"endpoint"})
	m.held = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "capstan", Subsystem: "gateway", Name: "held_requests",
		Help: "Requests held by the activator, waiting for the endpoint's first backend."}, []string{"endpoint"})
	if reg == nil {
		// A private registry keeps several gateways in one process (tests) from
		// colliding while still exercising registration.
		reg = prometheus.NewRegistry()
	}
	reg.MustRegister(m.requests, m.latency, m.inFlight, m.retries, m.queued, m.rejected, m.decisions,
		m.ejections, m.kvGaps, m.activations, m.held, m.ttfb, m.ttft, m.itl, m.tokens, m.cachedTok)
	return m
}

// child names one per-variant metric child that variantMetrics caches.
type child int

const (
	childLatency child = iota
	childInFlight
	childTTFB
	childTTFT
	childITL
	childTokensIn
	childTokensOut
	childCachedServed
	childCachedPredicted
	childDecisionHit
	childDecisionMiss
	numChildren
)

// variantMetrics caches one variant's metric children. WithLabelValues
// hashes its labels and takes the vector's lock on every call, about ten
// times per request, which showed in the gateway's per-request profile
// (docs/performance.md). A child is made on first use, so /metrics still
// shows only the series that happened.
type variantMetrics struct {
	m                           *metrics
	endpoint, variant, strategy string
	kids                        [numChildren]atomic.Value
	byStatus                    sync.Map // HTTP status code → prometheus.Counter
}

func newVariantMetrics(m *metrics, endpoint, variant, strategy string) *variantMetrics {
	return &variantMetrics{m: m, endpoint: endpoint, variant: variant, strategy: strategy}
}

// get returns the cached child; two first callers racing both ask the
// vector, which hands them the same child.
func (vm *variantMetrics) get(c child) any {
	if k := vm.kids[c].Load(); k != nil {
		return k
	}
	var k any
	e, v, s := vm.endpoint, vm.variant, vm.strategy
	switch c {
	case childLatency:
		k = vm.m.latency.WithLabelValues(e, v)
	case childInFlight:
		k = vm.m.inFlight.WithLabelValues(e, v)
	case childTTFB:
		k = vm.m.ttfb.WithLabelValues(e, v)
	case childTTFT:
		k = vm.m.ttft.WithLabelValues(e, v)
	case childITL:
		k = vm.m.itl.WithLabelValues(e, v)
	case childTokensIn:
		k = vm.m.tokens.WithLabelValues(e, v, "in")
	case childTokensOut:
		k = vm.m.tokens.WithLabelValues(e, v, "out")
	case childCachedServed:
		k = vm.m.cachedTok.WithLabelValues(e, s, "served")
	case childCachedPredicted:
		k = vm.m.cachedTok.WithLabelValues(e, s, "predicted")
	case childDecisionHit:
		k = vm.m.decisions.WithLabelValues(e, s, "hit")
	case childDecisionMiss:
		k = vm.m.decisions.WithLabelValues(e, s, "miss")
	}
	vm.kids[c].Store(k)
	return k
}

func (vm *variantMetrics) observer(c child) prometheus.Observer {
	return vm.get(c).(prometheus.Observer)
}
func (vm *variantMetrics) counter(c child) prometheus.Counter { return vm.get(c).(prometheus.Counter) }
func (vm *variantMetrics) gauge(c child) prometheus.Gauge     { return vm.get(c).(prometheus.Gauge) }

// request counts one finished invocation by its upstream status code.
func (vm *variantMetrics) request(code int) {
	if c, ok := vm.byStatus.Load(code); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := vm.m.requests.WithLabelValues(vm.endpoint, vm.variant, strconv.Itoa(code))
	vm.byStatus.Store(code, c)
	c.Inc()
}

// Observer records per-response metrics that only the response can tell
// (first byte, tokens in a stream, usage); a front door gets one with
// Gateway.Measure and relays the response through it (measure.go).
type Observer struct {
	g         *Gateway
	vm        *variantMetrics
	stats     *epStats
	predicted int

	// Set by Measure, for StreamChunk.
	clk         clock.Clock
	start, last time.Time // Invoke's start; the last token event's arrival
	line        []byte    // an event split across chunks
}

// Observer returns the metrics recorder for this result.
func (g *Gateway) Observer(inv Invocation, res *Result) *Observer {
	vm := res.vm
	if vm == nil || vm.endpoint != inv.Endpoint { // a Result not made by Invoke
		vm = newVariantMetrics(g.metrics, inv.Endpoint, res.Variant, res.Strategy)
	}
	res.obs = Observer{g: g, vm: vm, stats: res.stats, predicted: res.PredictedCachedTokens}
	return &res.obs
}

// FirstByte records the time to the first response byte.
func (o *Observer) FirstByte(d time.Duration) {
	o.vm.observer(childTTFB).Observe(d.Seconds())
}

// FirstToken records a stream's time to first token.
func (o *Observer) FirstToken(d time.Duration) {
	o.vm.observer(childTTFT).Observe(d.Seconds())
	if o.stats != nil {
		o.stats.ttftNs.Add(uint64(max(d, 0)))
		o.stats.ttftCount.Add(1)
		o.g.recordTTFT(o.stats, o.vm.endpoint, d)
	}
}

// InterToken records the gap between two token-carrying chunks.
func (o *Observer) InterToken(d time.Duration) {
	o.vm.observer(childITL).Observe(d.Seconds())
}

// Usage records a response's token usage and the predicted-vs-served cache hit.
func (o *Observer) Usage(prompt, completion, cached int) {
	o.vm.counter(childTokensIn).Add(float64(prompt))
	o.vm.counter(childTokensOut).Add(float64(completion))
	o.vm.counter(childCachedServed).Add(float64(cached))
	o.vm.counter(childCachedPredicted).Add(float64(min(o.predicted, prompt)))
}
