package gateway

import (
	"sync"
	"sync/atomic"
	"time"
)

// EndpointSnapshot is the gateway's live view of one endpoint, for
// autoscaling triggers. Counters are cumulative since the route was first
// set (they survive SetRoute and DeleteRoute; callers take deltas).
type EndpointSnapshot struct {
	Endpoint       string
	Replicas       int     // backends in the route (all variants)
	InFlight       int     // requests currently sent to backends
	Queued         int     // waiting in the admission queue plus held by the activator
	Held           int     // of which held by the activator
	Arrivals       uint64  // requests that reached the endpoint, counted on arrival (before any queue or hold)
	Requests       uint64  // finished invocations (any outcome)
	Errors         uint64  // of which failed (5xx or no response)
	LatencySeconds float64 // sum of end-to-end latency of finished invocations
	TTFTSeconds    float64 // sum of time-to-first-token over streamed invocations
	TTFTCount      uint64
	EngineWaiting  int     // sum of vllm:num_requests_waiting over scraped backends
	EngineRunning  int     // sum of vllm:num_requests_running
	KVUsage        float64 // mean vllm:kv_cache_usage_perc over scraped backends (0..1)
	Variants       map[string]VariantSnapshot
}

// VariantSnapshot is one variant's part of an EndpointSnapshot.
type VariantSnapshot struct {
	Replicas, InFlight int
	Requests, Errors   uint64
	LatencySeconds     float64
}

// counters are one endpoint's or variant's cumulative numbers; atomics keep
// the data path free of locks.
type counters struct {
	inFlight  atomic.Int64
	requests  atomic.Uint64
	errors    atomic.Uint64
	latencyNs atomic.Uint64
	cw        atomic.Pointer[cwVariant] // the metric store's series, made on first use
}

func (c *counters) finish(d time.Duration, failed bool) {
	c.requests.Add(1)
	if failed {
		c.errors.Add(1)
	}
	if d > 0 {
		c.latencyNs.Add(uint64(d))
	}
}

// epStats is one endpoint's counters, kept by name for the gateway's life.
type epStats struct {
	counters
	held      atomic.Int64
	arrivals  atomic.Uint64
	ttftNs    atomic.Uint64
	ttftCount atomic.Uint64
	cw        atomic.Pointer[cwEndpoint]

	mu       sync.Mutex
	variants map[string]*counters
}

func (s *epStats) variant(name string) *counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.variants[name]
	if !ok {
		c = &counters{}
		s.variants[name] = c
	}
	return c
}

func (g *Gateway) endpointStats(endpoint string) *epStats {
	if v, ok := g.stats.Load(endpoint); ok {
		return v.(*epStats)
	}
	v, _ := g.stats.LoadOrStore(endpoint, &epStats{variants: map[string]*counters{}})
	return v.(*epStats)
}

// finish records one finished invocation on the endpoint and, when known,
// its variant.
func finish(es *epStats, vs *counters, d time.Duration, failed bool) {
	es.finish(d, failed)
	if vs != nil {
		vs.finish(d, failed)
	}
}

// Snapshot returns the endpoint's live view. An endpoint never routed gives
// a zero snapshot with its name.
func (g *Gateway) Snapshot(endpoint string) EndpointSnapshot {
	out := EndpointSnapshot{Endpoint: endpoint, Variants: map[string]VariantSnapshot{}}
	if v, ok := g.stats.Load(endpoint); ok {
		es := v.(*epStats)
		out.InFlight = int(es.inFlight.Load())
		out.Held = int(es.held.Load())
		out.Arrivals = es.arrivals.Load()
		out.Requests = es.requests.Load()
		out.Errors = es.errors.Load()
		out.LatencySeconds = time.Duration(es.latencyNs.Load()).Seconds()
		out.TTFTSeconds = time.Duration(es.ttftNs.Load()).Seconds()
		out.TTFTCount = es.ttftCount.Load()
		es.mu.Lock()
		for name, c := range es.variants {
			out.Variants[name] = VariantSnapshot{InFlight: int(c.inFlight.Load()), Requests: c.requests.Load(),
				Errors: c.errors.Load(), LatencySeconds: time.Duration(c.latencyNs.Load()).Seconds()}
		}
		es.mu.Unlock()
	}
	out.Queued = out.Held
	if v, ok := g.queues.Load(endpoint); ok {
		a := v.(*admission)
		a.mu.Lock()
		out.Queued += len(a.waiters)
		a.mu.Unlock()
	}
	rs, ok := g.lookup(endpoint)
	if !ok {
		return out
	}
	now := g.clock.Now()
	scraped := 0
	for _, v := range rs.variants {
		vs := out.Variants[v.route.Name]
		vs.Replicas = len(v.route.Backends)
		out.Variants[v.route.Name] = vs
		out.Replicas += len(v.route.Backends)
		for _, b := range v.route.Backends {
			st, _ := g.tracker.snapshot(b.ID, now)
			if !st.Scraped {
				continue
			}
			scraped++
			out.EngineWaiting += st.Waiting
			out.EngineRunning += st.Running
			out.KVUsage += st.KVUsage
		}
	}
	if scraped > 0 {
		out.KVUsage /= float64(scraped)
	}
	return out
}
