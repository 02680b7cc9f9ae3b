package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ServerMetrics are the target's own counters over one stage (after − before),
// read from its Prometheus /metrics. Fields are nil when the target does not
// expose the metric. Names are matched by suffix so vLLM's (`vllm:…`) and
// capstan's (`capstan_…`) both work, vLLM's preferred; label sets are summed
// (a gateway in front of several engines reports each).
type ServerMetrics struct {
	PrefixCacheHits    *float64 `json:"prefix_cache_hits,omitempty"`
	PrefixCacheQueries *float64 `json:"prefix_cache_queries,omitempty"`
	CacheHitRate       *float64 `json:"cache_hit_rate,omitempty"`
	PromptTokens       *float64 `json:"prompt_tokens,omitempty"`
	GenerationTokens   *float64 `json:"generation_tokens,omitempty"`
	RequestSuccess     *float64 `json:"request_success,omitempty"`
	TTFTCount          *float64 `json:"ttft_count,omitempty"`
	TTFTMeanMs         *float64 `json:"ttft_mean_ms,omitempty"`
}

// metricSample sums of one scrape, by series name (labels dropped).
type metricSample map[string]float64

const maxMetricsBytes = 32 << 20

// scrape reads base+"/metrics".
func scrape(ctx context.Context, hc *http.Client, base string) (metricSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d", base, resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, maxMetricsBytes))
}

// parseMetrics reads Prometheus text (or OpenMetrics) exposition, summing each
// series name over its label sets. Only names and values matter here, so a
// small line reader is enough and accepts every dialect.
func parseMetrics(r io.Reader) (metricSample, error) {
	m := metricSample{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := labelsEnd(rest)
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		m[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return m, nil
}

// labelsEnd finds the '}' closing a label set, skipping quoted values.
func labelsEnd(s string) int {
	inQuote := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case c == '}' && !inQuote:
			return i
		}
	}
	return -1
}

// find returns the value of the series whose name ends in one of suffixes,
// preferring a vllm: name, and skipping external (connector) caches.
func (m metricSample) find(suffixes ...string) (float64, bool) {
	var best string
	for name := range m {
		if strings.Contains(name, "external") {
			continue
		}
		for _, suf := range suffixes {
			if name == suf || strings.HasSuffix(name, ":"+suf) || strings.HasSuffix(name, "_"+suf) {
				if best == "" || (strings.HasPrefix(name, "vllm:") && !strings.HasPrefix(best, "vllm:")) || (strings.HasPrefix(name, "vllm:") == strings.HasPrefix(best, "vllm:") && name < best) {
					best = name
				}
			}
		}
	}
	if best == "" {
		return 0, false
	}
	return m[best], true
}

// diffMetrics computes a stage's ServerMetrics from two scrapes.
func diffMetrics(before, after metricSample) *ServerMetrics {
	if before == nil || after == nil {
		return nil
	}
	delta := func(suffixes ...string) *float64 {
		a, ok1 := after.find(suffixes...)
		b, ok2 := before.find(suffixes...)
		if !ok1 || !ok2 {
			if ok1 && !ok2 {
				b = 0 // a counter first exposed during the stage started at zero
			} else {
				return nil
			}
		}
		d := a - b
		return &d
	}
	sm := &ServerMetrics{
		PrefixCacheHits:    delta("prefix_cache_hits_total", "prefix_cache_hits"),
		PrefixCacheQueries: delta("prefix_cache_queries_total", "prefix_cache_queries"),
		PromptTokens:       delta("prompt_tokens_total", "prompt_tokens"),
		GenerationTokens:   delta("generation_tokens_total", "generation_tokens"),
		RequestSuccess:     delta("request_success_total", "request_success"),
		TTFTCount:          delta("time_to_first_token_seconds_count"),
	}
	if sm.PrefixCacheHits != nil && sm.PrefixCacheQueries != nil && *sm.PrefixCacheQueries > 0 {
		r := *sm.PrefixCacheHits / *sm.PrefixCacheQueries
		sm.CacheHitRate = &r
	}
	if sum := delta("time_to_first_token_seconds_sum"); sum != nil && sm.TTFTCount != nil && *sm.TTFTCount > 0 {
		mean := *sum / *sm.TTFTCount * 1000
		sm.TTFTMeanMs = &mean
	}
	if *sm == (ServerMetrics{}) {
		return nil
	}
	return sm
}
