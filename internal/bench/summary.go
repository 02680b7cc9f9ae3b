package bench

import (
	"math"
	"sort"
	"time"
)

// Stats summarise one latency in milliseconds. Percentiles interpolate
// linearly between closest ranks (numpy's default), as vllm bench does.
type Stats struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
}

// percentile of sorted values, p in [0, 100].
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

func computeStats(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	mean := sum / float64(len(s))
	var ss float64
	for _, x := range s {
		ss += (x - mean) * (x - mean)
	}
	return Stats{Count: len(s), Mean: mean, Std: math.Sqrt(ss / float64(len(s))), Min: s[0], Max: s[len(s)-1],
		P50: percentile(s, 50), P90: percentile(s, 90), P95: percentile(s, 95), P99: percentile(s, 99)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Goodput counts requests that succeeded and met every SLO set (DistServe's
// definition, as vllm bench --goodput): attainment is good / all requests
// (failures count against it), per_second is good / stage duration.
type Goodput struct {
	SLO        SLO     `json:"slo"`
	Good       int     `json:"good"`
	Attainment float64 `json:"attainment"`
	PerSecond  float64 `json:"per_second"`
}

// meetsSLO reports whether one request is good under slo.
func meetsSLO(r *Record, slo SLO) bool {
	if !r.OK() {
		return false
	}
	if slo.TTFT > 0 && r.TTFT > slo.TTFT {
		return false
	}
	if slo.TPOT > 0 && r.TPOT() > slo.TPOT {
		return false
	}
	if slo.E2E > 0 && r.E2E > slo.E2E {
		return false
	}
	return true
}

// CDFPoint is one point of an empirical CDF: fraction of values ≤ X.
type CDFPoint struct {
	X float64 `json:"x"`
	F float64 `json:"f"`
}

// TimePoint is one bucket of the throughput timeline (per-second rates).
type TimePoint struct {
	T                     float64 `json:"t"` // bucket start, seconds since stage start
	RequestsPerSecond     float64 `json:"requests_per_second"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
}

// Summary is every figure for one target in one stage.
type Summary struct {
	Target              string  `json:"target"`
	TargetURL           string  `json:"target_url"`
	Stage               string  `json:"stage"`
	Arrival             string  `json:"arrival"`
	OfferedRate         float64 `json:"offered_rate,omitempty"`
	Concurrency         int     `json:"concurrency,omitempty"`
	WorkloadFingerprint string  `json:"workload_fingerprint"`
	DurationSeconds     float64 `json:"duration_seconds"`

	Requests  int            `json:"requests"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Errors    map[string]int `json:"errors,omitempty"`

	RequestsPerSecond         float64 `json:"requests_per_second"`
	OutputTokensPerSecond     float64 `json:"output_tokens_per_second"`
	TotalTokensPerSecond      float64 `json:"total_tokens_per_second"`
	PeakOutputTokensPerSecond float64 `json:"peak_output_tokens_per_second"`
	PeakConcurrency           int     `json:"peak_concurrency"`

	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// UsageCacheHitRate is cached / input tokens from the responses' usage.
	UsageCacheHitRate float64 `json:"usage_cache_hit_rate"`

	TTFT Stats `json:"ttft_ms"`
	TPOT Stats `json:"tpot_ms"` // excludes the first token
	ITL  Stats `json:"itl_ms"`
	E2E  Stats `json:"e2e_ms"`

	Goodput *Goodput `json:"goodput,omitempty"`
	// Phases split a trace stage by the phase of each request's scheduled
	// arrival (--arrival trace only).
	Phases []PhaseSummary `json:"phases,omitempty"`
	Server *ServerMetrics `json:"server,omitempty"`

	TTFTCDF  []CDFPoint  `json:"ttft_cdf"`
	Timeline []TimePoint `json:"timeline"`
}

// summarize computes a Summary from one target's records in one stage.
func summarize(recs []Record, slo SLO) Summary {
	s := Summary{Requests: len(recs), Errors: map[string]int{}}
	var ttft, tpot, itl, e2e []float64
	var end time.Duration
	type ev struct {
		t time.Duration
		d int
	}
	evs := make([]ev, 0, 2*len(recs))
	for i := range recs {
		r := &recs[i]
		end = max(end, r.Start+r.E2E)
		evs = append(evs, ev{r.Start, 1}, ev{r.Start + r.E2E, -1})
		if !r.OK() {
			s.Failed++
			s.Errors[r.Error]++
			continue
		}
		s.Succeeded++
		s.InputTokens += int64(r.InputTokens)
		s.OutputTokens += int64(r.OutputTokens)
		s.CachedTokens += int64(r.CachedTokens)
		ttft = append(ttft, ms(r.TTFT))
		e2e = append(e2e, ms(r.E2E))
		if r.OutputTokens > 1 {
			tpot = append(tpot, ms(r.TPOT()))
		}
		for _, d := range r.ITLs {
			itl = append(itl, ms(d))
		}
	}
	if len(s.Errors) == 0 {
		s.Errors = nil
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].t < evs[j].t || (evs[i].t == evs[j].t && evs[i].d < evs[j].d) })
	cur := 0
	for _, e := range evs {
		cur += e.d
		s.PeakConcurrency = max(s.PeakConcurrency, cur)
	}
	s.TTFT, s.TPOT, s.ITL, s.E2E = computeStats(ttft), computeStats(tpot), computeStats(itl), computeStats(e2e)
	dur := end.Seconds()
	s.DurationSeconds = dur
	if dur > 0 {
		s.RequestsPerSecond = float64(s.Succeeded) / dur
		s.OutputTokensPerSecond = float64(s.OutputTokens) / dur
		s.TotalTokensPerSecond = float64(s.InputTokens+s.OutputTokens) / dur
	}
	if s.InputTokens > 0 {
		s.UsageCacheHitRate = float64(s.CachedTokens) / float64(s.InputTokens)
	}
	if !slo.IsZero() {
		g := &Goodput{SLO: slo}
		for i := range recs {
			if meetsSLO(&recs[i], slo) {
				g.Good++
			}
		}
		if len(recs) > 0 {
			g.Attainment = float64(g.Good) / float64(len(recs))
		}
		if dur > 0 {
			g.PerSecond = float64(g.Good) / dur
		}
		s.Goodput = g
	}
	s.TTFTCDF = cdf(ttft, 100)
	s.Timeline = timeline(recs, end)
	for _, p := range s.Timeline {
		s.PeakOutputTokensPerSecond = max(s.PeakOutputTokensPerSecond, p.OutputTokensPerSecond)
	}
	return s
}

// cdf samples the empirical CDF of v at n+1 evenly spaced quantiles.
func cdf(v []float64, n int) []CDFPoint {
	if len(v) == 0 {
		return []CDFPoint{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	pts := make([]CDFPoint, 0, n+1)
	for i := 0; i <= n; i++ {
		f := float64(i) / float64(n)
		pts = append(pts, CDFPoint{X: percentile(s, f*100), F: f})
	}
	return pts
}

// timeline buckets completions and output tokens over the stage. A request's
// first token lands at Start+TTFT and the rest spread evenly until Start+E2E,
// so long streams show as sustained throughput rather than a spike at the end.
func timeline(recs []Record, end time.Duration) []TimePoint {
	if end <= 0 {
		return []TimePoint{}
	}
	width := max(end/60, time.Millisecond)
	n := int(end/width) + 1
	reqs := make([]float64, n)
	toks := make([]float64, n)
	bucket := func(t time.Duration) int { return min(n-1, max(0, int(t/width))) }
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		reqs[bucket(r.Start+r.E2E)]++
		if r.OutputTokens <= 0 {
			continue
		}
		first := r.Start + r.TTFT
		toks[bucket(first)]++
		rest := r.OutputTokens - 1
		if rest == 0 {
			continue
		}
		span := r.E2E - r.TTFT
		for k := 1; k <= rest; k++ {
			toks[bucket(first+span*time.Duration(k)/time.Duration(rest))]++
		}
	}
	pts := make([]TimePoint, n)
	w := width.Seconds()
	for i := range n {
		pts[i] = TimePoint{T: float64(i) * w, RequestsPerSecond: reqs[i] / w, OutputTokensPerSecond: toks[i] / w}
	}
	return pts
}
