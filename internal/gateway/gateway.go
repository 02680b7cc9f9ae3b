package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// Backend is one replica that can serve a variant.
type Backend struct {
	ID   string // replica id
	Addr string // host:port; metrics are read from http://Addr/metrics
	// KVEventsEndpoint, when set, is where the replica publishes vLLM KV
	// events (ZMQ, e.g. tcp://127.0.0.1:5557); the kvaware policy follows it.
	KVEventsEndpoint string
	// KVEventsReplay is the replica's optional replay endpoint, used to fill
	// a gap in sequence numbers instead of forgetting the replica's blocks.
	KVEventsReplay string
	// Engine is the replica's engine adapter (package engines; "" is the
	// simulator): it says how to read the replica's /metrics and whether
	// SageMaker bodies must be translated for it.
	Engine string
	// Node is the node the replica runs on ("" when unknown): replicas on
	// one node share its tieredstorage KV tier, so a block one of them
	// stored there is near to all of them.
	Node string
	// APIKey is the replica's own key (runtime.Replica.APIKey), sent as
	// Authorization: Bearer on everything the gateway asks of it, in place
	// of the client's credentials; "" sends none.
	APIKey string
}

// newRequest is a request to the backend's path, with its API key.
func (b Backend) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.Addr+path, body)
	if err != nil {
		return nil, err
	}
	if b.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.APIKey)
	}
	return req, nil
}

// VariantRoute is one production variant and its backends.
type VariantRoute struct {
	Name   string
	Weight float64
	// RoutingStrategy: "" or "LEAST_OUTSTANDING_REQUESTS" → least outstanding
	// requests; "RANDOM" → random; "roundrobin" → round robin. Any strategy
	// registered in the Registry works; an unknown one falls back to the
	// default with a warning (SetRoute has no error to return).
	RoutingStrategy string
	Backends        []Backend
	// Revision tells apart two entries of one variant while a rollout
	// shifts traffic between them (blue/green canary and linear): each
	// gets its share as Weight, and TargetVariant picks among them by it.
	Revision string
	// Model is the catalog model id the replicas serve; cache-aware policies
	// seed their block hashes with it (kv.RootHash) so their keys equal the
	// engine's. Empty: learned from a replica's /v1/models "root", else the
	// endpoint name.
	Model string
	// Meter, when set, is called once per request the variant answered,
	// with the time from sending it to its backend to the end of the
	// response body (per-request billing of serverless variants).
	Meter func(d time.Duration) `json:"-"`
}

// Route is everything the gateway needs to serve one endpoint.
type Route struct {
	Endpoint string
	Variants []VariantRoute
	// Unavailable, when non-empty, makes every invocation fail with an
	// *UnavailableError carrying it as the reason (UnavailableExpired: the
	// endpoint's capacity reservation has expired).
	Unavailable string
	// MaxConcurrency bounds requests in flight for the endpoint (0: no
	// bound); up to MaxQueue more wait for a slot, and beyond that callers
	// get a *QueueFullError (HTTP 429 with Retry-After at the edges).
	MaxConcurrency int
	MaxQueue       int
	// Activator, when non-nil, turns "no backend in any variant" from an
	// error into a hold: the request waits (bounded by MaxHeld waiting
	// requests, default DefaultMaxHeld, and HoldTimeout, default
	// DefaultHoldTimeout) and Activator.Activate(endpoint) is called once per
	// hold episode, from a new goroutine. Held requests are released, in
	// arrival order, as soon as a SetRoute gives the endpoint a backend.
	// Beyond MaxHeld or after HoldTimeout the caller gets *ActivationError.
	Activator   Activator
	MaxHeld     int
	HoldTimeout time.Duration
}

// Options configure a Gateway.
type Options struct {
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Transport, when set, carries the data path's requests (tests inject
	// one); by default they go over the gateway's own lean HTTP/1.1 client
	// (upstream.go) and only scrapes and probes use net/http.
	Transport http.RoundTripper
	// Seed seeds variant choice and random routing; 0 means seed from the clock.
	Seed uint64
	// MaxAttempts bounds tries per invocation across backends (default 3).
	MaxAttempts int
	// Registry supplies routing plugins (default NewRegistry()).
	Registry *Registry
	// ScrapeInterval is how often Run reads each backend's /metrics (queue
	// depth, KV utilisation, cache config) and probes /health (default 1s).
	ScrapeInterval time.Duration
	// EjectAfter consecutive failures (connect errors, 5xx) eject a backend
	// for EjectFor (defaults 5 and 10s); a successful health probe or request
	// readmits it early.
	EjectAfter int
	EjectFor   time.Duration
	// RetryAfter is the Retry-After hint of a full queue (default 1s).
	RetryAfter time.Duration
	// MetricStore, when set, receives the CloudWatch-style metrics of every
	// finished invocation (cloudwatch.go), and Sampler records the gauges
	// into it. nil: no recording.
	MetricStore *metricstore.Store
}

// Invocation is one request to an endpoint.
type Invocation struct {
	Endpoint, TargetVariant, Path string
	Header                        http.Header
	Body                          []byte
}

// Result is the chosen variant and backend and the upstream response.
// The caller must Close Response.Body; the in-flight count is released then.
type Result struct {
	Variant   string
	BackendID string
	Response  *http.Response
	// Strategy is the variant's routing strategy key; PredictedCachedTokens
	// is how many prompt tokens the cache-aware policy expected the chosen
	// backend to hold (0 for other policies).
	Strategy              string
	PredictedCachedTokens int

	start time.Time       // when Invoke began: the origin of Measure's times
	stats *epStats        // for the Observer's TTFT sums
	vm    *variantMetrics // the variant's cached metric children
	obs   Observer        // what Gateway.Observer hands out (no allocation per request)
}

// Gateway routes invocations to replica backends.
type Gateway struct {
	clock    clock.Clock
	log      *slog.Logger
	metrics  *metrics
	client   *http.Client
	up       *upstream // nil when Options.Transport is set
	registry *Registry
	maxTries int

	randMu sync.Mutex
	rng    *rand.Rand

	mu     sync.RWMutex
	routes map[string]*routeState

	fmu      sync.Mutex
	inFlight map[string]int // by backend id
	draining map[string]int // Drain calls waiting, by backend id
	idle     map[string]chan struct{}

	tracker *tracker
	kvIndex *kvIndex
	opts    Options
	queues  sync.Map // endpoint → *admission
	holds   sync.Map // endpoint → *holdQueue
	stats   sync.Map // endpoint → *epStats
	cw      *metricstore.Store
	sampler *Sampler
}

type routeState struct {
	route    Route
	variants []*variantState
	stats    *epStats
}

type variantState struct {
	route    VariantRoute
	strategy string
	sched    *scheduler
	stats    *counters
	metrics  *variantMetrics
}

// New returns a Gateway with no routes.
func New(opts Options) *Gateway {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var up *upstream
	if opts.Transport == nil {
		opts.Transport = defaultTransport()
		up = newUpstream(opts.Clock)
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 3
	}
	if opts.Registry == nil {
		opts.Registry = NewRegistry()
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = time.Second
	}
	if opts.EjectAfter <= 0 {
		opts.EjectAfter = 5
	}
	if opts.EjectFor <= 0 {
		opts.EjectFor = 10 * time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(opts.Clock.Now().UnixNano())
	}
	g := &Gateway{
		clock:    opts.Clock,
		log:      opts.Logger,
		metrics:  newMetrics(opts.Registerer),
		client:   &http.Client{Transport: opts.Transport, CheckRedirect: noRedirect},
		up:       up,
		registry: opts.Registry,
		maxTries: opts.MaxAttempts,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		routes:   map[string]*routeState{},
		inFlight: map[string]int{},
		draining: map[string]int{},
		idle:     map[string]chan struct{}{},
		tracker:  newTracker(),
		kvIndex:  newKVIndex(opts.Clock),
		opts:     opts,
		cw:       opts.MetricStore,
	}
	if g.cw != nil {
		g.sampler = &Sampler{g: g}
	}
	return g
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // replicas are local; never send them through a proxy
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.DisableCompression = true // pass bodies through untouched
	return t
}

func (g *Gateway) randFloat() float64 {
	g.randMu.Lock()
	defer g.randMu.Unlock()
	return g.rng.Float64()
}

// SetRoute installs or replaces the route for r.Endpoint atomically. A
// backend absent from the new route gets no new requests; its in-flight
// requests finish. Routing state (e.g. a round-robin cursor) survives when a
// variant keeps its strategy.
func (g *Gateway) SetRoute(r Route) {
	r = cloneRoute(r)
	es := g.endpointStats(r.Endpoint)
	g.mu.Lock()
	old := g.routes[r.Endpoint]
	rs := &routeState{route: r, stats: es}
	for _, v := range r.Variants {
		var prev *variantState
		if old != nil {
			for _, ov := range old.variants {
				if ov.route.Name == v.Name && ov.route.Revision == v.Revision && ov.strategy == strategyKey(v.RoutingStrategy) {
					prev = ov
				}
			}
		}
		key := strategyKey(v.RoutingStrategy)
		vs := &variantState{route: v, strategy: key, stats: es.variant(v.Name),
			metrics: newVariantMetrics(g.metrics, r.Endpoint, v.Name, key)}
		if prev != nil {
			vs.sched = prev.sched
		} else {
			vs.sched = g.newScheduler(r.Endpoint, v)
		}
		rs.variants = append(rs.variants, vs)
	}
	g.routes[r.Endpoint] = rs
	g.syncNodesLocked()
	g.mu.Unlock()
	g.routeChanged(r.Endpoint)
}

// syncNodesLocked gives the KV index every routed backend's node, before
// any follower of a new backend can deliver its events. g.mu held.
func (g *Gateway) syncNodesLocked() {
	nodes := map[string]string{}
	for _, rs := range g.routes {
		for _, v := range rs.route.Variants {
			for _, b := range v.Backends {
				nodes[b.ID] = b.Node
			}
		}
	}
	g.kvIndex.SetNodes(nodes)
}

func (g *Gateway) newScheduler(endpoint string, v VariantRoute) *scheduler {
	deps := Deps{Rand: g.randFloat, KV: g.kvIndex}
	p, ok := g.registry.profile(v.RoutingStrategy)
	if !ok {
		g.log.Warn("unknown routing strategy; using the default",
			"endpoint", endpoint, "variant", v.Name, "strategy", v.RoutingStrategy, "default", DefaultStrategy)
		p, _ = g.registry.profile("")
	}
	s, err := g.registry.newScheduler(p, deps)
	if err != nil {
		// Only a broken in-tree registration gets here; fall back so traffic flows.
		g.log.Error("routing profile invalid; using the default", "endpoint", endpoint, "variant", v.Name, "err", err)
		p, _ = g.registry.profile("")
		s, _ = g.registry.newScheduler(p, deps)
	}
	return s
}

func cloneRoute(r Route) Route {
	vs := make([]VariantRoute, len(r.Variants))
	for i, v := range r.Variants {
		v.Backends = append([]Backend(nil), v.Backends...)
		vs[i] = v
	}
	r.Variants = vs
	return r
}

// DeleteRoute removes the endpoint's route; in-flight requests finish.
func (g *Gateway) DeleteRoute(endpoint string) {
	g.mu.Lock()
	delete(g.routes, endpoint)
	g.syncNodesLocked()
	g.mu.Unlock()
	g.routeChanged(endpoint)
}

// Route returns a copy of the endpoint's route.
func (g *Gateway) Route(endpoint string) (Route, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	rs, ok := g.routes[endpoint]
	if !ok {
		return Route{}, false
	}
	return cloneRoute(rs.route), true
}

// Endpoints lists the routed endpoint names, sorted.
func (g *Gateway) Endpoints() []string {
	g.mu.RLock()
	out := make([]string, 0, len(g.routes))
	for name := range g.routes {
		out = append(out, name)
	}
	g.mu.RUnlock()
	sort.Strings(out)
	return out
}

// KVBlocks is how many KV blocks the gateway's precise index (fed by the
// backend's KV events, plus speculative entries of kvaware decisions)
// believes the backend holds.
func (g *Gateway) KVBlocks(backendID string) int { return g.kvIndex.Len(backendID) }

// BackendStats returns the backend's last scraped stats and whether it is
// currently ejected.
func (g *Gateway) BackendStats(backendID string) (BackendStats, bool) {
	return g.tracker.snapshot(backendID, g.clock.Now())
}

// LastEngineRead is the gateway's last read of the backend's /metrics (Run
// reads every routed backend each ScrapeInterval); false when it has none:
// the backend is in no route, or Run has not reached it yet.
func (g *Gateway) LastEngineRead(backendID string) (EngineRead, bool) {
	return g.tracker.lastRead(backendID)
}

// InFlight returns the number of requests in flight to the backend.
func (g *Gateway) InFlight(backendID string) int {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	return g.inFlight[backendID]
}

// Draining reports whether a Drain of the backend is waiting for its
// requests to finish.
func (g *Gateway) Draining(backendID string) bool {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	return g.draining[backendID] > 0
}

// Drain marks the backend draining (no new requests while Drain waits) and
// returns once nothing is in flight to it, or with ctx's error.
func (g *Gateway) Drain(ctx context.Context, backendID string) error {
	g.fmu.Lock()
	g.draining[backendID]++
	defer func() {
		g.fmu.Lock()
		if g.draining[backendID]--; g.draining[backendID] <= 0 {
			delete(g.draining, backendID)
		}
		g.fmu.Unlock()
	}()
	for {
		if g.inFlight[backendID] == 0 {
			g.fmu.Unlock()
			return nil
		}
		ch, ok := g.idle[backendID]
		if !ok {
			ch = make(chan struct{})
			g.idle[backendID] = ch
		}
		g.fmu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("drain %s: %w", backendID, ctx.Err())
		}
		g.fmu.Lock()
	}
}

// errStaleBackend: the picked backend left the route before the request was sent.
var errStaleBackend = errors.New("backend left the route")

// maxStaleRepicks bounds re-picks after route changes, so a route flapping
// faster than requests are sent cannot spin a request forever.
const maxStaleRepicks = 8

// inRoute reports whether backendID serves some variant of the endpoint's
// current route.
func (g *Gateway) inRoute(endpoint, backendID string) bool {
	rs, ok := g.lookup(endpoint)
	if !ok {
		return false
	}
	for _, v := range rs.variants {
		for _, b := range v.route.Backends {
			if b.ID == backendID {
				return true
			}
		}
	}
	return false
}

func (g *Gateway) acquire(backendID string) {
	g.fmu.Lock()
	g.inFlight[backendID]++
	g.fmu.Unlock()
}

func (g *Gateway) release(backendID string) {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	if g.inFlight[backendID]--; g.inFlight[backendID] > 0 {
		return
	}
	delete(g.inFlight, backendID)
	if ch, ok := g.idle[backendID]; ok {
		close(ch)
		delete(g.idle, backendID)
	}
}

func (g *Gateway) candidates(bs []Backend) []Candidate {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	out := make([]Candidate, len(bs))
	for i, b := range bs {
		out[i] = Candidate{Backend: b, InFlight: g.inFlight[b.ID], Draining: g.draining[b.ID] > 0}
	}
	now := g.clock.Now()
	for i := range out {
		out[i].Stats, out[i].Ejected = g.tracker.snapshot(out[i].Backend.ID, now)
	}
	return out
}

func (g *Gateway) lookup(endpoint string) (*routeState, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	rs, ok := g.routes[endpoint]
	return rs, ok
}

// chooseVariant picks TargetVariant, or a variant at random by weight among
// those with positive weight and at least one backend.
func (g *Gateway) chooseVariant(rs *routeState, target string) (*variantState, error) {
	known := false
	for _, v := range rs.variants {
		known = known || v.route.Name == target
	}
	if target != "" && !known {
		return nil, fmt.Errorf("endpoint %s: variant %q: %w", rs.route.Endpoint, target, ErrUnknownVariant)
	}
	// A targeted variant is chosen whatever its weight; its revisions (a
	// rollout in progress) by theirs.
	eligible := func(v *variantState) bool {
		if len(v.route.Backends) == 0 {
			return false
		}
		if target != "" {
			return v.route.Name == target
		}
		return v.route.Weight > 0
	}
	weight := func(v *variantState) float64 {
		if target != "" && v.route.Weight <= 0 {
			return 1e-9 // still pickable when it is the only one with backends
		}
		return v.route.Weight
	}
	total := 0.0
	for _, v := range rs.variants {
		if eligible(v) {
			total += weight(v)
		}
	}
	if total <= 0 {
		if target != "" {
			return nil, noBackendf("endpoint %s variant %s has no backends", rs.route.Endpoint, target)
		}
		return nil, noBackendf("endpoint %s has no variant with weight and backends", rs.route.Endpoint)
	}
	x := g.randFloat() * total
	var last *variantState
	for _, v := range rs.variants {
		if eligible(v) {
			last = v
			if x < weight(v) {
				return v, nil
			}
			x -= weight(v)
		}
	}
	return last, nil // float rounding at the top end
}

// clientCredentials are the client's credentials for capstan (an API key,
// a SigV4 signature, the console's cookie): never forwarded to an engine,
// which gets its own key instead (Backend.APIKey).
var clientCredentials = map[string]bool{"Authorization": true, "Cookie": true}

// hopHeaders are not forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// Invoke picks a variant and a backend and forwards the request. It retries
// on another backend when the connection fails or a 5xx arrives (nothing has
// reached the caller yet), at most MaxAttempts tries; the last 5xx response
// is returned as is when every try fails that way. A route with
// MaxConcurrency waits for a slot first (or fails with *QueueFullError).
func (g *Gateway) Invoke(ctx context.Context, inv Invocation) (*Result, error) {
	start := g.clock.Now()
	rs, v, pass, err := g.resolve(ctx, inv)
	defer pass() // idempotent; normally passed right after the first pick
	if err != nil {
		if rs != nil {
			var vs *counters
			variant := ""
			if v != nil {
				vs, variant = v.stats, v.route.Name
			}
			d := clock.Since(g.clock, start)
			finish(rs.stats, vs, d, true)
			g.metrics.requests.WithLabelValues(inv.Endpoint, variant, "error").Inc()
			if v == nil && len(rs.variants) == 1 {
				v = rs.variants[0] // the metric store names the endpoint's only variant
			}
			g.recordFailed(inv.Endpoint, v, false, d)
		}
		return nil, err
	}
	variant, es := v.route.Name, rs.stats
	release, err := g.admit(ctx, rs.route, pass)
	if err != nil {
		d, full := clock.Since(g.clock, start), IsQueueFull(err)
		finish(es, v.stats, d, !full)
		g.metrics.requests.WithLabelValues(inv.Endpoint, variant, statusOf(err)).Inc()
		g.recordFailed(inv.Endpoint, v, full, d)
		return nil, err
	}
	req := &SchedRequest{Endpoint: inv.Endpoint, Variant: variant, Model: v.route.Model, Path: inv.Path, Header: inv.Header, Body: inv.Body, Tried: map[string]bool{}}
	var lastErr, routeErr error
	var sent time.Time
	stale := 0
	for attempt := 0; attempt < g.maxTries; attempt++ {
		c, ok := v.sched.pick(ctx, req, g.candidates(v.route.Backends))
		pass() // the routing decision is made: the next held request may go
		var err error
		var resp *http.Response
		if !ok {
			// Every backend of the route as read is draining or tried. If
			// the route changed since (a rollout retired them), route again.
			if cur, _ := g.lookup(inv.Endpoint); cur == rs {
				break
			}
			err = errStaleBackend
		} else {
			req.Tried[c.Backend.ID] = true
			sent = g.clock.Now()
			resp, err = g.forward(ctx, inv, c.Backend, es, v)
		}
		if errors.Is(err, errStaleBackend) {
			// Route again, as a new request would: the next pick sees the
			// new backends, or the request is held while there are none.
			nrs, nv, npass, rerr := g.resolveFrom(ctx, inv, true)
			if rerr != nil {
				routeErr = rerr
				break
			}
			rs, pass = nrs, npass
			v, variant = nv, nv.route.Name
			req.Variant, req.Model, req.Tried = variant, v.route.Model, map[string]bool{}
			attempt-- // not a failed try: nothing was sent
			if stale++; stale > maxStaleRepicks {
				pass()
				break
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				release()
				d := clock.Since(g.clock, start)
				finish(es, v.stats, d, true)
				g.metrics.requests.WithLabelValues(inv.Endpoint, variant, "error").Inc()
				g.recordFailed(inv.Endpoint, v, false, d)
				return nil, fmt.Errorf("invoke %s/%s on %s: %w", inv.Endpoint, variant, c.Backend.ID, ctx.Err())
			}
			g.failed(c.Backend.ID)
			lastErr = err
			g.log.Warn("backend unreachable; retrying elsewhere", "endpoint", inv.Endpoint, "variant", variant, "backend", c.Backend.ID, "err", err, "request_id", inv.Header.Get("X-Request-Id"))
			g.metrics.retries.WithLabelValues(inv.Endpoint, variant, "connect").Inc()
			continue
		}
		if resp.StatusCode >= 500 {
			g.failed(c.Backend.ID)
		} else if !isLocalAnswer(resp) {
			g.tracker.succeeded(c.Backend.ID)
		}
		lastTry := attempt == g.maxTries-1 || len(req.Tried) == len(v.route.Backends)
		if resp.StatusCode >= 500 && !lastTry {
			// Discard a little of the body so the connection can be reused.
			_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
			resp.Body.Close() // releases the in-flight count
			g.metrics.retries.WithLabelValues(inv.Endpoint, variant, "5xx").Inc()
			g.log.Warn("backend answered 5xx; retrying elsewhere", "endpoint", inv.Endpoint, "variant", variant, "backend", c.Backend.ID, "status", resp.StatusCode, "request_id", inv.Header.Get("X-Request-Id"))
			continue
		}
		vm := v.metrics
		vm.request(resp.StatusCode)
		if req.predictedBlocks > 0 {
			vm.counter(childDecisionHit).Inc()
		} else {
			vm.counter(childDecisionMiss).Inc()
		}
		vs, failed, meter, from, code, replicas := v.stats, resp.StatusCode >= 500, v.route.Meter, sent, resp.StatusCode, len(v.route.Backends)
		resp.Body = &trackedBody{ReadCloser: resp.Body, done: func() {
			release()
			now := g.clock.Now()
			d, model := now.Sub(start), now.Sub(from)
			finish(es, vs, d, failed)
			vm.observer(childLatency).Observe(d.Seconds())
			if meter != nil {
				meter(model)
			}
			if g.cw != nil {
				g.recordInvocation(invocation{endpoint: vm.endpoint, variant: vm.variant, vs: vs, replicas: replicas,
					status: code, failed: failed, total: d, model: model})
			}
		}}
		return &Result{Variant: variant, BackendID: c.Backend.ID, Response: resp,
			Strategy: v.strategy, PredictedCachedTokens: req.predictedBlocks * req.blockSize, start: start, stats: es, vm: vm}, nil
	}
	release()
	d := clock.Since(g.clock, start)
	finish(es, v.stats, d, true)
	g.metrics.requests.WithLabelValues(inv.Endpoint, variant, "error").Inc()
	g.recordFailed(inv.Endpoint, v, false, d)
	if cur, ok := g.lookup(inv.Endpoint); ok && cur.route.Unavailable != "" {
		// The endpoint stopped serving (its reservation ended) while this
		// request was being routed, and its replicas are draining: it gets
		// the answer every new request gets.
		return nil, &UnavailableError{Reason: cur.route.Unavailable}
	}
	if routeErr != nil {
		return nil, routeErr
	}
	if lastErr != nil {
		return nil, fmt.Errorf("endpoint %s variant %s: %w: %w", inv.Endpoint, variant, ErrNoBackend, lastErr)
	}
	return nil, noBackendf("endpoint %s variant %s: every backend is draining or was tried", inv.Endpoint, variant)
}

func noPass() {}

// resolve finds the endpoint's route and picks a variant. While the route
// has an activator and no backend, the request is held (see hold); the
// returned pass must be called once the request has made its routing
// decision. On error rs is the route when there is one (for accounting).
func (g *Gateway) resolve(ctx context.Context, inv Invocation) (rs *routeState, v *variantState, pass func(), err error) {
	return g.resolveFrom(ctx, inv, false)
}

// resolveFrom is resolve; arrived says the request was counted already (it
// is routed again after a route change).
func (g *Gateway) resolveFrom(ctx context.Context, inv Invocation, arrived bool) (rs *routeState, v *variantState, pass func(), err error) {
	pass = noPass
	for ; ; arrived = true {
		var ok bool
		if rs, ok = g.lookup(inv.Endpoint); !ok {
			return nil, nil, pass, fmt.Errorf("endpoint %q: %w", inv.Endpoint, ErrUnknownEndpoint)
		}
		if !arrived {
			// Counted before any hold or queue: an arrival rate leads the
			// in-flight and finished counts when a burst begins.
			rs.stats.arrivals.Add(1)
		}
		if rs.route.Unavailable != "" {
			return rs, nil, pass, &UnavailableError{Reason: rs.route.Unavailable}
		}
		if !holdable(rs) {
			v, err = g.chooseVariant(rs, inv.TargetVariant)
			return rs, v, pass, err
		}
		// Released, then the backends left again before we routed: hand the
		// turn on and hold again.
		pass()
		if pass, err = g.hold(ctx, rs); err != nil {
			return rs, nil, noPass, err
		}
	}
}
func (g *Gateway) failed(id string) {
	if g.tracker.failed(id, g.opts.EjectAfter, g.clock.Now().Add(g.opts.EjectFor)) {
		g.metrics.ejections.WithLabelValues(id).Inc()
		g.log.Warn("backend ejected after consecutive failures", "backend", id, "for", g.opts.EjectFor)
	}
}

// forward sends one attempt; on success the response body releases the
// backend's in-flight count and the gauge when closed. The request is
// translated for the backend's engine (translate.go) from inv, the
// caller's, on every attempt: a retry may reach another engine.
func (g *Gateway) forward(ctx context.Context, inv Invocation, b Backend, es *epStats, v *variantState) (*http.Response, error) {
	path := inv.Path
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	tr := translate(b.Engine, path, inv)
	if tr.local != nil {
		return tr.local, nil // refused here: nothing reaches the backend
	}
	if tr.path != "" {
		path, inv.Body, inv.Header = tr.path, tr.body, tr.header
	}
	g.acquire(b.ID)
	// The backend was picked from the route as it was when this request read
	// it. If a route change removed it since, a Drain may already have seen
	// zero in flight and the replica may be stopping: step back and re-pick.
	if !g.inRoute(inv.Endpoint, b.ID) {
		g.release(b.ID)
		return nil, errStaleBackend
	}
	gauge := v.metrics.gauge(childInFlight)
	gauge.Inc()
	es.inFlight.Add(1)
	v.stats.inFlight.Add(1)
	done := func() {
		gauge.Dec()
		es.inFlight.Add(-1)
		v.stats.inFlight.Add(-1)
		g.release(b.ID)
	}
	resp, err := g.send(ctx, b, path, inv)
	if err != nil {
		done()
		return nil, fmt.Errorf("backend %s (%s): %w", b.ID, b.Addr, err)
	}
	resp.Body = &trackedBody{ReadCloser: resp.Body, done: done}
	if tr.tgi != nil {
		translateResponse(resp, tr.tgi)
	}
	return resp, nil
}

// send makes one HTTP request to the backend: over the lean client, or
// through Options.Transport when one was given.
func (g *Gateway) send(ctx context.Context, b Backend, path string, inv Invocation) (*http.Response, error) {
	if g.up != nil {
		return g.up.do(ctx, b.Addr, b.APIKey, path, inv.Header, inv.Body)
	}
	hreq, err := b.newRequest(ctx, http.MethodPost, path, bytes.NewReader(inv.Body))
	if err != nil {
		return nil, err
	}
	for k, vs := range inv.Header {
		if !clientCredentials[k] {
			hreq.Header[k] = append([]string(nil), vs...)
		}
	}
	for _, h := range hopHeaders {
		hreq.Header.Del(h)
	}
	return g.client.Do(hreq)
}

// trackedBody runs done once, on the first Close.
type trackedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
