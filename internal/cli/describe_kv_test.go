package cli

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// kvMetrics is a replica's /metrics as the simulated engine writes it,
// plus the tieredstorage series and the store's used-bytes gauge.
const kvMetrics = `# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="small"} 0.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",model_name="small",num_cpu_blocks="4096",num_gpu_blocks="1000"} 1
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="small"} 1000
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="small"} 600
# TYPE capstan_engine_kv_tier_hits_total counter
capstan_engine_kv_tier_hits_total{engine="0",model_name="small",tier="l1"} 10
capstan_engine_kv_tier_hits_total{engine="0",model_name="small",tier="tieredstorage"} 5
capstan_engine_kv_tier_hits_total{engine="0",model_name="small",tier="l2"} 2
# TYPE capstan_engine_kv_tier_used_bytes gauge
capstan_engine_kv_tier_used_bytes{engine="0",model_name="small",tier="tieredstorage"} 1e+08
`

// TestDescribeKVCache: describe shows each tier's size, use and hit rate,
// computed by the server from the replicas' /metrics.
func TestDescribeKVCache(t *testing.T) {
	e := newCLIEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, kvMetrics) }))
	t.Cleanup(srv.Close)
	e.rt.SetDefaultAddr(strings.TrimPrefix(srv.URL, "http://"))
	e.mustRun(t, smallIEC+"  kvCacheSpec: {l1CacheSize: 8Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 1Gi}}\n", "apply", "-f", "-")
	e.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
	out := squeeze(e.mustRun(t, "", "describe", "iec", "small"))
	// Both replicas (one node) read the same exposition: 2 × 1000
	// prompt tokens, 2 × 600 from cache of which 2 × (10+5+2) blocks of
	// 16 tokens came from the lower tiers (l2 is not configured, so not
	// listed, but its tokens are not the GPU's).
	for _, want := range []string{
		"KV Cache: L1 on (8Gi), L2 tieredstorage (1Gi)\n",
		"KV Cache Tiers:\n TIER SCOPE SIZE USE HIT RATE\n",
		" GPU per replica 2 × 2 GiB 50.0% 32.8%\n",
		" L1 per replica 2 × 8 GiB - 16.0%\n",
		" tieredstorage per node 1 × 1 GiB 9.3% 8.0%\n",
		" Metrics of 2/2 replicas. Hit rate: the share of the 2000 prompt tokens looked up that the tier served.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q", want)
		}
	}
	if strings.Contains(out, " Redis ") {
		t.Error("Redis listed without a redis L2")
	}
	if i, j := strings.Index(out, "KV Cache Tiers:\n"), strings.Index(out, "Conditions:"); i < 0 || j < i {
		t.Error("the KV Cache Tiers section is not between Status and Conditions")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestDescribeKVCacheSection(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		r    manifest.KVCacheReport
		err  error
		want string
	}{
		{"redis, no metrics yet", manifest.KVCacheReport{Replicas: 1, Tiers: []manifest.KVTierReport{
			{Name: "GPU", Scope: "replica", Units: 1, CapacityTokens: 4096},
			{Name: "Redis", Scope: "shared"}}}, nil, `KV Cache Tiers:
  TIER    SCOPE         SIZE              USE   HIT RATE
  GPU     per replica   1 × 4096 tokens   -     -
  Redis   shared        -                 -     -
  No metrics from the 1 replica(s) yet: sizes are from their flags.
`},
		{"scaled to zero", manifest.KVCacheReport{Tiers: []manifest.KVTierReport{
			{Name: "GPU", Scope: "replica"},
			{Name: "L1", Scope: "replica", EachBytes: 30 << 30},
			{Name: "tieredstorage", Scope: "node", EachBytes: 100 << 30},
			{Name: "Redis", Scope: "shared", EachBytes: 1 << 30, CapacityBytes: 1 << 30, Usage: f(0.25), HitRate: f(0)}}}, nil, `KV Cache Tiers:
  TIER            SCOPE         SIZE           USE     HIT RATE
  GPU             per replica   -              -       -
  L1              per replica   30 GiB each    -       -
  tieredstorage   per node      100 GiB each   -       -
  Redis           shared        1 GiB          25.0%   0.0%
  No replica runs: sizes are from the spec.
`},
		{"nothing looked up", manifest.KVCacheReport{Replicas: 2, Scraped: 2, Tiers: []manifest.KVTierReport{
			{Name: "GPU", Scope: "replica", Units: 2, EachBytes: 5538578432, CapacityBytes: 2 * 5538578432, Usage: f(0)}}}, nil, `KV Cache Tiers:
  TIER   SCOPE         SIZE          USE    HIT RATE
  GPU    per replica   2 × 5.2 GiB   0.0%   -
  Metrics of 2/2 replicas. No prompt looked up yet.
`},
		{"an old server", manifest.KVCacheReport{}, errors.New("boom"), "KV Cache Tiers:\n  <unavailable: boom>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			describeKVCache(&b, tc.r, tc.err)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
