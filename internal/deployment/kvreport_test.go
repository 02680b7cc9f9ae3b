package deployment

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/engine/sim"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// engineMetrics is an engine's exposition as the simulated engine writes
// it, with the tieredstorage tier and the used-bytes gauge that engines
// export once they have them.
func engineMetrics(usage float64, gpuBlocks int, queries, hits float64, l1, ts, l2 int, tsUsed float64) string {
	const lb = `engine="0",model_name="llama-3.1-8b"`
	return fmt.Sprintf(`# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{%[1]s} %[2]g
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",%[1]s,gpu_memory_utilization="0.9",num_cpu_blocks="100",num_gpu_blocks="%[3]d"} 1
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{%[1]s} %[4]g
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{%[1]s} %[5]g
# TYPE capstan_engine_kv_tier_hits_total counter
capstan_engine_kv_tier_hits_total{%[1]s,tier="l1"} %[6]d
capstan_engine_kv_tier_hits_total{%[1]s,tier="tieredstorage"} %[7]d
capstan_engine_kv_tier_hits_total{%[1]s,tier="l2"} %[8]d
# TYPE capstan_engine_kv_tier_used_bytes gauge
capstan_engine_kv_tier_used_bytes{%[1]s,tier="tieredstorage"} %[9]g
`, lb, usage, gpuBlocks, queries, hits, l1, ts, l2, tsUsed)
}

func metricsServer(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func near(p *float64, want float64) bool { return p != nil && math.Abs(*p-want) < 1e-9 }

func tierOf(r manifest.KVCacheReport, name string) (manifest.KVTierReport, bool) {
	for _, t := range r.Tiers {
		if t.Name == name {
			return t, true
		}
	}
	return manifest.KVTierReport{}, false
}

// TestKVReport: two replicas on one node with L1 and tieredstorage; the
// report sums sizes per replica (GPU, L1) and per node (tieredstorage),
// and splits the looked-up prompt tokens by the tier that served them.
func TestKVReport(t *testing.T) {
	h := newHarness(t, withDataDir(t.TempDir()))
	h.svc.Controller().diskFree = plentyOfDisk
	// Replica 0 served 600 of 1000 tokens from cache: 10 blocks (160
	// tokens) from L1, 5 (80) from tieredstorage, 2 (32) from l2 (not
	// configured: not a tier of this deployment); replica 1 400 of 1000,
	// 10 blocks from tieredstorage. The store holds 1e9 bytes by one
	// replica's reading and 2e9 by the other's (later) one.
	h.rt.SetAddr("iec.default.demo.r1.0", metricsServer(t, engineMetrics(0.5, 1000, 1000, 600, 10, 5, 2, 1e9)))
	h.rt.SetAddr("iec.default.demo.r1.1", metricsServer(t, engineMetrics(0.25, 1000, 1000, 400, 0, 10, 0, 2e9)))
	h.apply(iec("demo", 2, 1, "  kvCacheSpec: {l1CacheSize: 8Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 20Gi}}\n"))
	h.reconcile(kIEC("demo"))
	h.gw.ScrapeOnce(context.Background()) // the gateway reads every routed replica's /metrics
	rep, err := h.svc.KVCache(context.Background(), manifest.KindInferenceEndpointConfig, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replicas != 2 || rep.Scraped != 2 || rep.QueriedTokens != 2000 || len(rep.Tiers) != 3 {
		t.Fatalf("report %+v", rep)
	}
	gpu, _ := tierOf(rep, manifest.KVTierGPU)
	// 1000 blocks × 16 tokens × 131072 bytes (llama-3.1-8b) per replica.
	if gpu.Scope != manifest.KVScopeReplica || gpu.Units != 2 || gpu.CapacityTokens != 32000 || gpu.EachBytes != 16000*131072 ||
		gpu.CapacityBytes != 2*16000*131072 || !near(gpu.Usage, 0.375) || !near(gpu.HitRate, (600-272+400-160)/2000.0) {
		t.Errorf("GPU %+v usage %v hit %v", gpu, *gpu.Usage, *gpu.HitRate)
	}
	l1, _ := tierOf(rep, manifest.KVTierL1)
	if l1.Units != 2 || l1.EachBytes != 8<<30 || l1.CapacityBytes != 16<<30 || l1.Usage != nil || !near(l1.HitRate, 160/2000.0) {
		t.Errorf("L1 %+v", l1)
	}
	ts, _ := tierOf(rep, manifest.KVTierTieredStorage)
	if ts.Scope != manifest.KVScopeNode || ts.Units != 1 || ts.EachBytes != 20<<30 || ts.CapacityBytes != 20<<30 ||
		!near(ts.Usage, 2e9/float64(20<<30)) || !near(ts.HitRate, 240/2000.0) {
		t.Errorf("tieredstorage %+v", ts)
	}

	t.Run("a replica that does not answer", func(t *testing.T) {
		h.rt.SetAddr("iec.default.demo.r1.1", "127.0.0.1:1")
		h.reconcile(kIEC("demo"))             // the route follows the replica's address
		h.gw.ScrapeOnce(context.Background()) // the gateway reads every routed replica's /metrics
		rep, err := h.svc.KVCache(context.Background(), manifest.KindInferenceEndpointConfig, "default", "demo")
		if err != nil {
			t.Fatal(err)
		}
		gpu, _ := tierOf(rep, manifest.KVTierGPU)
		l1, _ := tierOf(rep, manifest.KVTierL1)
		// Sizes still count it (from its flags); rates only the one read.
		if rep.Replicas != 2 || rep.Scraped != 1 || gpu.Units != 1 || l1.Units != 2 || !near(gpu.HitRate, 328/1000.0) {
			t.Errorf("report %+v", rep)
		}
	})
}

// TestKVReportRedisAndNoReplicas: Redis is a shared tier without a size;
// with no replica running the tiers and their sizes come from the spec.
func TestKVReportRedisAndNoReplicas(t *testing.T) {
	h := newHarness(t)
	h.rt.SetDefaultAddr(metricsServer(t, engineMetrics(0.1, 500, 100, 50, 0, 0, 2, 0)))
	h.apply(iec("demo", 1, 1, `  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: "redis://127.0.0.1:6379"}}`+"\n"))
	h.reconcile(kIEC("demo"))
	h.gw.ScrapeOnce(context.Background()) // the gateway reads every routed replica's /metrics
	rep, err := h.svc.KVCache(context.Background(), manifest.KindInferenceEndpointConfig, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, t := range rep.Tiers {
		names = append(names, t.Name)
	}
	redis, _ := tierOf(rep, manifest.KVTierRedis)
	if strings.Join(names, ",") != "GPU,L1,Redis" || redis.Scope != manifest.KVScopeShared || redis.CapacityBytes != 0 || !near(redis.HitRate, 32/100.0) {
		t.Fatalf("tiers %v, Redis %+v", names, redis)
	}

	h.apply(iec("idle", 0, 1, "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}\n"))
	h.reconcile(kIEC("idle"))
	h.gw.ScrapeOnce(context.Background())
	rep, err = h.svc.KVCache(context.Background(), manifest.KindInferenceEndpointConfig, "default", "idle")
	if err != nil {
		t.Fatal(err)
	}
	l1, _ := tierOf(rep, manifest.KVTierL1)
	ts, _ := tierOf(rep, manifest.KVTierTieredStorage)
	if rep.Replicas != 0 || len(rep.Tiers) != 3 || l1.Units != 0 || l1.EachBytes != 30<<30 || ts.EachBytes != 100<<30 || ts.HitRate != nil {
		t.Fatalf("idle report %+v", rep)
	}
}

// TestKVReportRealEngine reads a real simulated engine's /metrics: a
// prompt sent twice is served from the GPU cache the second time.
func TestKVReportRealEngine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(sim.Run(ctx, sim.Options{Model: "llama-3.1-8b", GPU: "a10g", CPUCacheBytes: 1 << 30}, pw, slog.New(slog.DiscardHandler)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr := strings.TrimPrefix(strings.TrimSpace(line), "listening on http://")
	prompt := strings.Repeat("the quick brown fox jumps over the lazy dog ", 40)
	for range 2 {
		resp, err := http.Post("http://"+addr+"/v1/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"model":"llama-3.1-8b","prompt":%q,"max_tokens":1}`, prompt)))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("completion: %s", resp.Status)
		}
	}

	h := newHarness(t)
	h.rt.SetDefaultAddr(addr)
	h.apply(iec("demo", 1, 1, "  kvCacheSpec: {l1CacheSize: 1Gi}\n"))
	h.reconcile(kIEC("demo"))
	h.gw.ScrapeOnce(context.Background()) // the gateway reads every routed replica's /metrics
	rep, err := h.svc.KVCache(context.Background(), manifest.KindInferenceEndpointConfig, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	gpu, _ := tierOf(rep, manifest.KVTierGPU)
	l1, _ := tierOf(rep, manifest.KVTierL1)
	t.Logf("report %+v; GPU usage %v hit rate %v", rep, *gpu.Usage, *gpu.HitRate)
	if rep.Scraped != 1 || rep.QueriedTokens <= 0 || gpu.CapacityTokens <= 0 || gpu.CapacityBytes != gpu.CapacityTokens*131072 ||
		gpu.HitRate == nil || *gpu.HitRate < 0.3 || gpu.Usage == nil || l1.EachBytes != 1<<30 || !near(l1.HitRate, 0) {
		t.Fatalf("report %+v; GPU %+v", rep, gpu)
	}
}
