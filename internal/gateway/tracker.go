package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/engines"
)

// BackendStats is what the gateway last read from a backend's /metrics
// (mapped from the engine's own names by its adapter, package engines) and
// /v1/models.
type BackendStats struct {
	Scraped      bool
	Waiting      int     // requests queued (vllm:num_requests_waiting)
	Running      int     // requests decoding (vllm:num_requests_running)
	KVUsage      float64 // KV cache in use, 0..1 (vllm:kv_cache_usage_perc)
	BlockSize    int     // vllm:cache_config_info{block_size}
	NumGPUBlocks int     // vllm:cache_config_info{num_gpu_blocks}
	ModelRoot    string  // /v1/models data[0].root: the catalog model id
}

// EngineRead is the gateway's last read of one backend's /metrics. In
// capstan serve it is the one read of engine metrics: routing, the
// autoscaling snapshot, the KV report and the metrics store all use it.
type EngineRead struct {
	Took time.Duration // how long the read took, on the gateway's clock
	// Err says the read failed; Stats are then empty.
	Err error
	// Stats are mapped by the backend's engine adapter; Stats.Families has
	// every series read, by the engine's own names.
	Stats engines.Stats
}

type backendHealth struct {
	stats        BackendStats
	read         *EngineRead
	consecFails  int
	ejectedUntil time.Time
	probeFailed  bool
}

// tracker holds per-backend stats and health, by backend id.
type tracker struct {
	mu sync.Mutex
	m  map[string]*backendHealth
}

func newTracker() *tracker { return &tracker{m: map[string]*backendHealth{}} }

func (t *tracker) get(id string) *backendHealth {
	h, ok := t.m[id]
	if !ok {
		h = &backendHealth{}
		t.m[id] = h
	}
	return h
}

func (t *tracker) snapshot(id string, now time.Time) (BackendStats, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.m[id]
	if !ok {
		return BackendStats{}, false
	}
	return h.stats, h.probeFailed || now.Before(h.ejectedUntil)
}

func (t *tracker) succeeded(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.m[id]; ok {
		h.consecFails = 0
		h.ejectedUntil = time.Time{}
	}
}

// failed counts a failure; it reports whether this one ejected the backend.
func (t *tracker) failed(id string, after int, until time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.get(id)
	h.consecFails++
	if h.consecFails == after {
		h.ejectedUntil = until
		return true
	}
	return false
}

func (t *tracker) setStats(id string, s BackendStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.get(id)
	if s.ModelRoot == "" {
		s.ModelRoot = h.stats.ModelRoot
	}
	h.stats = s
}

func (t *tracker) setRead(id string, r EngineRead) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(id).read = &r
}

func (t *tracker) lastRead(id string) (EngineRead, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.m[id]; ok && h.read != nil {
		return *h.read, true
	}
	return EngineRead{}, false
}

func (t *tracker) setProbe(id string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.get(id)
	h.probeFailed = !ok
	if ok {
		h.consecFails = 0
		h.ejectedUntil = time.Time{}
	}
}

func (t *tracker) modelRoot(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.m[id]; ok {
		return h.stats.ModelRoot
	}
	return ""
}

// forget drops backends no route mentions any more.
func (t *tracker) forget(keep map[string]Backend) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.m {
		if _, ok := keep[id]; !ok {
			delete(t.m, id)
		}
	}
}

// backends returns every backend of every route, by id.
func (g *Gateway) backends() map[string]Backend {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := map[string]Backend{}
	for _, rs := range g.routes {
		for _, v := range rs.route.Variants {
			for _, b := range v.Backends {
				out[b.ID] = b
			}
		}
	}
	return out
}

// Run scrapes metrics, probes health and follows KV events of every routed
// backend until ctx ends. Without Run the gateway still routes; cache-aware
// policies then work from defaults and their own decisions only.
func (g *Gateway) Run(ctx context.Context) error {
	t := g.clock.NewTicker(g.opts.ScrapeInterval)
	defer t.Stop()
	subs := map[string]context.CancelFunc{} // by backend id + endpoint
	defer func() {
		for _, c := range subs {
			c()
		}
	}()
	for {
		bs := g.backends()
		g.syncSubscriptions(ctx, bs, subs)
		g.ScrapeOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// ScrapeOnce reads /metrics and probes /health of every routed backend once,
// concurrently, and returns when all are done (one cycle of Run, for tests).
func (g *Gateway) ScrapeOnce(ctx context.Context) {
	bs := g.backends()
	g.tracker.forget(bs)
	if g.up != nil {
		keep := make(map[string]bool, len(bs))
		for _, b := range bs {
			keep[b.Addr] = true
		}
		g.up.closeIdleExcept(keep)
	}
	ctx, cancel := context.WithTimeout(ctx, max(g.opts.ScrapeInterval, 500*time.Millisecond))
	defer cancel()
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Go(func() {
			began := g.clock.Now()
			st, es, err := g.scrape(ctx, b)
			g.tracker.setRead(b.ID, EngineRead{Took: clock.Since(g.clock, began), Err: err, Stats: es})
			if err != nil {
				g.log.Debug("backend scrape failed", "backend", b.ID, "err", err)
			} else {
				g.tracker.setStats(b.ID, st)
			}
			ok := g.probe(ctx, b)
			_, was := g.tracker.snapshot(b.ID, g.clock.Now())
			g.tracker.setProbe(b.ID, ok)
			if !ok && !was {
				g.log.Warn("backend failed its health check", "backend", b.ID, "addr", b.Addr)
			}
		})
	}
	wg.Wait()
}

func (g *Gateway) probe(ctx context.Context, b Backend) bool {
	req, err := b.newRequest(ctx, http.MethodGet, "/health", nil)
	if err != nil {
		return false
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	// A backend without /health (404) is judged by its answers alone.
	return resp.StatusCode < 500
}

// scrape reads the backend's /metrics: the gauges the routing policies use,
// and the whole read, mapped by the backend's engine adapter.
func (g *Gateway) scrape(ctx context.Context, b Backend) (BackendStats, engines.Stats, error) {
	req, err := b.newRequest(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return BackendStats{}, engines.Stats{}, err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return BackendStats{}, engines.Stats{}, fmt.Errorf("scrape %s: %w", b.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return BackendStats{}, engines.Stats{}, fmt.Errorf("scrape %s: status %d", b.ID, resp.StatusCode)
	}
	m, err := engines.ReadMetrics(resp.Body, engines.MustByName(b.Engine).Metrics)
	if err != nil {
		return BackendStats{}, engines.Stats{}, fmt.Errorf("scrape %s: %w", b.ID, err)
	}
	st := BackendStats{Scraped: true, Waiting: m.Waiting, Running: m.Running, KVUsage: m.KVUsage,
		BlockSize: m.BlockSize, NumGPUBlocks: m.NumGPUBlocks}
	if g.tracker.modelRoot(b.ID) == "" {
		st.ModelRoot = g.modelRoot(ctx, b)
	}
	return st, m, nil
}

func (g *Gateway) modelRoot(ctx context.Context, b Backend) string {
	req, err := b.newRequest(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return ""
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Root string `json:"root"`
		} `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) != nil || len(body.Data) == 0 {
		return ""
	}
	return body.Data[0].Root
}
