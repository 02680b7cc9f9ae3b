package engines

import (
	"fmt"
	"io"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricMap names, for one engine, the series behind each of capstan's
// engine figures. An empty name is a figure the engine does not export; it
// reads as zero and Stats says it is missing.
type MetricMap struct {
	// Running and Waiting are gauges of requests being decoded and queued.
	Running, Waiting string
	// KVUsage is the share of KV cache in use, 0..1.
	KVUsage string
	// CacheConfig is an info series whose block_size and num_gpu_blocks
	// labels size the KV cache (vLLM's cache_config_info).
	CacheConfig string
	// PrefixQueries and PrefixHits are counters of prompt tokens looked up
	// in, and found in, the prefix cache.
	PrefixQueries, PrefixHits string
	// PromptTokens and GenerationTokens are counters of tokens processed.
	PromptTokens, GenerationTokens string
	// PromptExcludesCached: PromptTokens leaves out the prompt tokens
	// found in the prefix cache (PrefixHits), so the prompt's tokens are
	// the two together, as are the prefix cache's lookups (llama.cpp).
	PromptExcludesCached bool
	// TokenHistograms: the token figures are histograms of tokens per
	// request (TGI), read as their sums; they have no one-for-one catalog
	// counter.
	TokenHistograms bool
}

// vllmMetrics are vLLM's names, which capstan's simulator exports too.
var vllmMetrics = MetricMap{
	Running:          "vllm:num_requests_running",
	Waiting:          "vllm:num_requests_waiting",
	KVUsage:          "vllm:kv_cache_usage_perc",
	CacheConfig:      "vllm:cache_config_info",
	PrefixQueries:    "vllm:prefix_cache_queries_total",
	PrefixHits:       "vllm:prefix_cache_hits_total",
	PromptTokens:     "vllm:prompt_tokens_total",
	GenerationTokens: "vllm:generation_tokens_total",
}

// CatalogNames pairs each of the engine's series that is, one for one, a
// series of capstan's catalog (vLLM's names, which the dashboards and
// alert rules query) with that name. Figures an engine computes
// differently (llama.cpp's prompt counter, which leaves cached tokens out)
// are not paired: renaming them would mislead.
func (m MetricMap) CatalogNames() [][2]string {
	var out [][2]string
	pair := func(own, catalog string) {
		if own != "" && own != catalog {
			out = append(out, [2]string{own, catalog})
		}
	}
	pair(m.Running, vllmMetrics.Running)
	pair(m.Waiting, vllmMetrics.Waiting)
	pair(m.KVUsage, vllmMetrics.KVUsage)
	pair(m.PrefixHits, vllmMetrics.PrefixHits)
	if m.PrefixHits == "" || !m.PromptExcludesCached {
		pair(m.PrefixQueries, vllmMetrics.PrefixQueries)
	}
	if !m.TokenHistograms {
		if !m.PromptExcludesCached {
			pair(m.PromptTokens, vllmMetrics.PromptTokens)
		}
		pair(m.GenerationTokens, vllmMetrics.GenerationTokens)
	}
	return out
}

// Stats are one read of an engine's /metrics in capstan's terms.
type Stats struct {
	Running, Waiting        int
	KVUsage                 float64
	BlockSize, NumGPUBlocks int
	PrefixQueries           float64
	PrefixHits              float64
	PromptTokens, GenTokens float64
	// HasKVUsage and HasPrefix say whether the engine exported those
	// figures (a missing one is not a zero).
	HasKVUsage, HasPrefix bool
	// Families are every series read, by name, for readers of
	// engine-specific extras (the simulator's KV tier counters).
	Families map[string]*dto.MetricFamily
}

// MaxMetricsBytes bounds one /metrics read.
const MaxMetricsBytes = 8 << 20

// ReadMetrics parses Prometheus text exposition (at most MaxMetricsBytes of
// r) and maps it by m: the one reader of engine metrics, for routing, the
// KV report and autoscaling alike.
func ReadMetrics(r io.Reader, m MetricMap) (Stats, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, MaxMetricsBytes))
	if err != nil {
		return Stats{}, fmt.Errorf("engine metrics: %w", err)
	}
	sum := func(name string) (float64, bool) {
		f, ok := fams[name]
		if name == "" || !ok {
			return 0, false
		}
		v := 0.0
		for _, mt := range f.GetMetric() {
			v += SampleValue(mt)
		}
		return v, true
	}
	st := Stats{Families: fams}
	run, _ := sum(m.Running)
	wait, _ := sum(m.Waiting)
	st.Running, st.Waiting = int(run), int(wait)
	st.KVUsage, st.HasKVUsage = sum(m.KVUsage)
	var q, h bool
	st.PrefixQueries, q = sum(m.PrefixQueries)
	st.PrefixHits, h = sum(m.PrefixHits)
	st.PromptTokens, _ = sum(m.PromptTokens)
	if m.PromptExcludesCached {
		st.PromptTokens += st.PrefixHits
		st.PrefixQueries, q = st.PromptTokens, true
	}
	st.HasPrefix = q && h
	st.GenTokens, _ = sum(m.GenerationTokens)
	if f, ok := fams[m.CacheConfig]; ok && m.CacheConfig != "" && len(f.GetMetric()) > 0 {
		for _, lp := range f.GetMetric()[0].GetLabel() {
			switch lp.GetName() {
			case "block_size":
				st.BlockSize, _ = strconv.Atoi(lp.GetValue())
			case "num_gpu_blocks":
				st.NumGPUBlocks, _ = strconv.Atoi(lp.GetValue())
			}
		}
	}
	return st, nil
}

// LabelValue is the value of m's label name ("" when it has none).
func LabelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// SampleValue is m's value: a gauge's, counter's or untyped sample's, or a
// histogram's sum.
func SampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetHistogram() != nil:
		// A histogram of token counts (TGI) sums to the tokens processed.
		return m.GetHistogram().GetSampleSum()
	}
	return 0
}
