package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/metricstore"
)

// CloudWatch-style metrics the gateway records into Options.MetricStore
// (package metricstore), which the CloudWatch API and cloudWatchTrigger
// read.
const (
	NamespaceSageMaker = "AWS/SageMaker"
	NamespaceCapstan   = "capstan"

	DimensionEndpointName = "EndpointName"
	DimensionVariantName  = "VariantName"
)

// Namespace AWS/SageMaker, dimensions EndpointName and VariantName: one
// sample per finished invocation (every door goes through Invoke), except
// ConcurrentRequestsPerModel, a gauge the Sampler records every second.
const (
	MetricInvocations                = "Invocations"            // 1
	MetricInvocationsPerInstance     = "InvocationsPerInstance" // 1 / the variant's ready replicas
	MetricModelLatency               = "ModelLatency"           // µs: the upstream call, sent to body closed
	MetricOverheadLatency            = "OverheadLatency"        // µs: the rest of the invocation (queue, hold, retries)
	MetricInvocation4XXErrors        = "Invocation4XXErrors"    // 0 or 1: a 4xx answer (a full queue's 429 included)
	MetricInvocation5XXErrors        = "Invocation5XXErrors"    // 0 or 1: a 5xx answer or none
	MetricInvocationModelErrors      = "InvocationModelErrors"  // 0 or 1: failed (5xx or no response)
	MetricConcurrentRequestsPerModel = "ConcurrentRequestsPerModel"
	MetricModelSetupTime             = "ModelSetupTime" // µs: a serverless cold start (RecordModelSetupTime)
)

// Namespace capstan, dimension EndpointName: the built-in autoscaling
// metrics. TimeToFirstToken (seconds) is one sample per stream; the others
// are gauges the Sampler records every second.
const (
	MetricQueueDepth         = "QueueDepth"         // queued + held requests + engines' waiting ones
	MetricInFlightPerReplica = "InFlightPerReplica" // (in flight + queued) / max(replicas, 1)
	MetricKVCacheUtilization = "KVCacheUtilization" // mean over scraped replicas, 0..1
	MetricTimeToFirstToken   = "TimeToFirstToken"
	MetricArrivalRate        = "ArrivalRate" // arrivals per second since the previous sample
	// MetricReplicas is the endpoint's ready replicas (backends in its
	// route, all variants): for charts (the console's), not a trigger.
	MetricReplicas = "Replicas"
)

// SamplePeriod is how often the Sampler records the gauges.
const SamplePeriod = time.Second

// cwVariant is one variant's series handles.
type cwVariant struct {
	inv, perInst, model, overhead, e4, e5, modelErr, concurrent *metricstore.Handle
}

// cwEndpoint is one endpoint's built-in series handles and sampling state.
type cwEndpoint struct {
	ttft, queue, perReplica, kv, arrivals, replicas *metricstore.Handle

	mu sync.Mutex
	// arrivals are readings of the arrivals counter, oldest first: the
	// newest one at least SamplePeriod old, then the later ones.
	counts []arrivalCount
}

type arrivalCount struct {
	at time.Time
	n  uint64
}

// arrivalRate records a reading n of the arrivals counter at now and
// returns the arrivals per second since the newest reading at least
// SamplePeriod old; false while there is none (the first second is the
// baseline). Reads come from the sampler's ticks and from triggers' reads
// at any moment, so the window is at least a second long: a rate over the
// few milliseconds between two reads either side of a second's boundary
// was a burst's noise (one arrival in 5 ms read as 200 req/s), and it
// added replicas on a steady ramp.
func (ce *cwEndpoint) arrivalRate(now time.Time, n uint64) (float64, bool) {
	if k := len(ce.counts); k > 1 && now.Sub(ce.counts[k-1].at) < SamplePeriod/20 {
		ce.counts[k-1] = arrivalCount{now, n} // reads close together: one is enough
	} else {
		ce.counts = append(ce.counts, arrivalCount{now, n})
	}
	for len(ce.counts) > 1 && now.Sub(ce.counts[1].at) >= SamplePeriod {
		ce.counts = ce.counts[1:]
	}
	base := ce.counts[0]
	if dt := now.Sub(base.at); dt >= SamplePeriod {
		d := n - base.n
		if n < base.n {
			d = n // the counter started again (a new route)
		}
		return float64(d) / dt.Seconds(), true
	}
	return 0, false
}

func (g *Gateway) cwVariantOf(c *counters, endpoint, variant string) *cwVariant {
	if cv := c.cw.Load(); cv != nil {
		return cv
	}
	d := []metricstore.Dimension{{Name: DimensionEndpointName, Value: endpoint}, {Name: DimensionVariantName, Value: variant}}
	h := func(m string) *metricstore.Handle { return g.cw.Handle(NamespaceSageMaker, m, d) }
	cv := &cwVariant{inv: h(MetricInvocations), perInst: h(MetricInvocationsPerInstance), model: h(MetricModelLatency),
		overhead: h(MetricOverheadLatency), e4: h(MetricInvocation4XXErrors), e5: h(MetricInvocation5XXErrors),
		modelErr: h(MetricInvocationModelErrors), concurrent: h(MetricConcurrentRequestsPerModel)}
	if !c.cw.CompareAndSwap(nil, cv) {
		return c.cw.Load()
	}
	return cv
}

func (g *Gateway) cwEndpointOf(es *epStats, endpoint string) *cwEndpoint {
	if ce := es.cw.Load(); ce != nil {
		return ce
	}
	d := []metricstore.Dimension{{Name: DimensionEndpointName, Value: endpoint}}
	h := func(m string) *metricstore.Handle { return g.cw.Handle(NamespaceCapstan, m, d) }
	ce := &cwEndpoint{ttft: h(MetricTimeToFirstToken), queue: h(MetricQueueDepth), perReplica: h(MetricInFlightPerReplica),
		kv: h(MetricKVCacheUtilization), arrivals: h(MetricArrivalRate), replicas: h(MetricReplicas)}
	if !es.cw.CompareAndSwap(nil, ce) {
		return es.cw.Load()
	}
	return ce
}

// invocation is what the store needs of one finished invocation.
type invocation struct {
	endpoint, variant string
	vs                *counters
	replicas          int           // the variant's ready replicas
	status            int           // upstream status; 0: no response
	queueFull         bool          // refused by a full queue (the caller got 429)
	failed            bool          // as counted in EndpointSnapshot.Errors
	total, model      time.Duration // model < 0: no upstream response
}

// recordInvocation records one finished invocation into the metric store
// (a no-op without one, or without a variant to name).
func (g *Gateway) recordInvocation(x invocation) {
	if g.cw == nil || x.vs == nil {
		return
	}
	cv := g.cwVariantOf(x.vs, x.endpoint, x.variant)
	now := g.clock.Now()
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	_ = cv.inv.RecordAt(now, 1)
	_ = cv.perInst.RecordAt(now, 1/float64(max(x.replicas, 1)))
	_ = cv.e4.RecordAt(now, b(x.queueFull || x.status >= 400 && x.status < 500))
	_ = cv.e5.RecordAt(now, b(!x.queueFull && (x.status == 0 || x.status >= 500)))
	_ = cv.modelErr.RecordAt(now, b(x.failed))
	if x.model >= 0 {
		_ = cv.model.RecordAt(now, float64(x.model.Microseconds()))
		_ = cv.overhead.RecordAt(now, float64(max(x.total-x.model, 0).Microseconds()))
	}
}

// recordFailed records an invocation that got no upstream response: a
// full queue (queueFull; the caller got 429) or a failure.
func (g *Gateway) recordFailed(endpoint string, v *variantState, queueFull bool, total time.Duration) {
	if g.cw == nil || v == nil {
		return
	}
	g.recordInvocation(invocation{endpoint: endpoint, variant: v.route.Name, vs: v.stats, replicas: len(v.route.Backends),
		queueFull: queueFull, failed: !queueFull, total: total, model: -1})
}

// recordTTFT records a stream's time to first token.
func (g *Gateway) recordTTFT(es *epStats, endpoint string, d time.Duration) {
	if g == nil || g.cw == nil || es == nil {
		return
	}
	_ = g.cwEndpointOf(es, endpoint).ttft.Record(max(d, 0).Seconds())
}

// RecordModelSetupTime records a serverless cold start of endpoint's
// variant (the time to its first ready replica) as ModelSetupTime, in
// microseconds. A no-op without a metric store.
func (g *Gateway) RecordModelSetupTime(endpoint, variant string, d time.Duration) {
	if g.cw == nil {
		return
	}
	_ = g.cw.Record(NamespaceSageMaker, MetricModelSetupTime, []metricstore.Dimension{
		{Name: DimensionEndpointName, Value: endpoint}, {Name: DimensionVariantName, Value: variant}}, float64(max(d, 0).Microseconds()))
}

// MetricStore is the store the gateway records into (nil: none).
func (g *Gateway) MetricStore() *metricstore.Store { return g.cw }

// Sampler returns the gateway's gauge sampler (nil without a metric store).
func (g *Gateway) Sampler() *Sampler { return g.sampler }

// SampleGauges records endpoint's gauges now: a reader of the store calls
// it first, so a gauge's newest sample is the value now whatever the
// Sampler's loop is doing. A no-op without a metric store.
func (g *Gateway) SampleGauges(endpoint string) {
	if g.sampler != nil {
		g.sampler.Sample(endpoint)
	}
}

// Sampler records the gauges of every routed endpoint into the metric store
// once per SamplePeriod of the gateway's clock: ConcurrentRequestsPerModel
// per variant (the variant's requests in flight, plus the endpoint's queued
// and held requests when it has a single variant, since they are that
// variant's demand) and the capstan built-ins QueueDepth,
// InFlightPerReplica, KVCacheUtilization, ArrivalRate and Replicas. A gauge keeps one
// sample a second: sampled again within the second (a trigger's read does
// that), the newer value replaces it. ArrivalRate is arrivals per second
// over the last second or a little more (cwEndpoint.arrivalRate).
type Sampler struct {
	g *Gateway
}

// Run samples every SamplePeriod until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := s.g.clock.NewTicker(SamplePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.Step()
		}
	}
}

// Step samples every routed endpoint once (one tick of Run).
func (s *Sampler) Step() {
	s.g.mu.RLock()
	eps := make([]string, 0, len(s.g.routes))
	for ep := range s.g.routes {
		eps = append(eps, ep)
	}
	s.g.mu.RUnlock()
	for _, ep := range eps {
		s.Sample(ep)
	}
}

// Sample records endpoint's gauges at the clock's now, unless the
// endpoint has no route (a deleted endpoint's series end; nothing is made
// for a name never routed).
func (s *Sampler) Sample(endpoint string) {
	g := s.g
	rs, ok := g.lookup(endpoint)
	if !ok {
		return
	}
	es := rs.stats
	ce := g.cwEndpointOf(es, endpoint)
	ce.mu.Lock()
	defer ce.mu.Unlock()
	now := g.clock.Now()
	snap := g.Snapshot(endpoint)
	_ = ce.queue.SetAt(now, float64(snap.Queued+snap.EngineWaiting))
	_ = ce.perReplica.SetAt(now, float64(snap.InFlight+snap.Queued)/float64(max(snap.Replicas, 1)))
	_ = ce.kv.SetAt(now, snap.KVUsage)
	_ = ce.replicas.SetAt(now, float64(snap.Replicas))
	for _, v := range rs.variants {
		n := snap.Variants[v.route.Name].InFlight
		if len(rs.variants) == 1 {
			n += snap.Queued
		}
		_ = g.cwVariantOf(v.stats, endpoint, v.route.Name).concurrent.SetAt(now, float64(n))
	}
	if rate, ok := ce.arrivalRate(now, snap.Arrivals); ok {
		_ = ce.arrivals.SetAt(now, rate)
	}
}
