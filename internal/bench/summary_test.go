package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestComputeStats(t *testing.T) {
	s := computeStats([]float64{5, 1, 4, 2, 3})
	want := Stats{Count: 5, Mean: 3, Std: math.Sqrt(2), Min: 1, Max: 5, P50: 3, P90: 4.6, P95: 4.8, P99: 4.96}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"mean", s.Mean, want.Mean}, {"std", s.Std, want.Std}, {"min", s.Min, 1}, {"max", s.Max, 5},
		{"p50", s.P50, want.P50}, {"p90", s.P90, want.P90}, {"p95", s.P95, want.P95}, {"p99", s.P99, want.P99}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if (computeStats(nil) != Stats{}) {
		t.Error("empty input should give zero stats")
	}
}

func rec(ttft, e2e time.Duration, out int, errKind string) Record {
	return Record{TTFT: ttft, E2E: e2e, OutputTokens: out, InputTokens: 10, Error: errKind}
}

func TestGoodputCraftedCases(t *testing.T) {
	ms := time.Millisecond
	recs := []Record{
		rec(100*ms, 1100*ms, 101, ""),    // ttft 100, tpot 10: good under all
		rec(600*ms, 1600*ms, 101, ""),    // ttft too slow for 500ms
		rec(100*ms, 6100*ms, 101, ""),    // tpot 60ms: too slow for 50ms, e2e 6.1s
		rec(500*ms, 5500*ms, 101, ""),    // exactly on both limits: good (≤)
		rec(50*ms, 200*ms, 1, ""),        // one token: TPOT 0
		rec(10*ms, 20*ms, 0, "http_500"), // failed: never good
	}
	for i := range recs {
		recs[i].Start = time.Duration(i) * 100 * ms
	}
	tests := []struct {
		name string
		slo  string
		good int
	}{
		{"ttft only", "ttft=500ms", 4},
		{"tpot only", "tpot=50ms", 4},
		{"ttft and tpot", "ttft=500ms,tpot=50ms", 3},
		{"e2e", "e2e=2s", 3},
		{"all three", "ttft=500ms,tpot=50ms,e2e=5s", 2},
		{"tight", "ttft=10ms", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slo, err := ParseSLO(tt.slo)
			if err != nil {
				t.Fatal(err)
			}
			s := summarize(recs, slo)
			if s.Goodput == nil || s.Goodput.Good != tt.good {
				t.Fatalf("good = %+v, want %d", s.Goodput, tt.good)
			}
			if want := float64(tt.good) / 6; math.Abs(s.Goodput.Attainment-want) > 1e-9 {
				t.Fatalf("attainment %v, want %v", s.Goodput.Attainment, want)
			}
			if want := float64(tt.good) / s.DurationSeconds; math.Abs(s.Goodput.PerSecond-want) > 1e-9 {
				t.Fatalf("per second %v, want %v", s.Goodput.PerSecond, want)
			}
		})
	}
	s := summarize(recs, SLO{})
	if s.Goodput != nil || s.Succeeded != 5 || s.Failed != 1 || s.Errors["http_500"] != 1 {
		t.Fatalf("summary without SLO: %+v", s)
	}
	// Duration runs to the last completion: record 2 ends at 0.2s + 6.1s.
	if math.Abs(s.DurationSeconds-6.3) > 1e-9 {
		t.Fatalf("duration %v, want 6.3", s.DurationSeconds)
	}
	if s.TPOT.Count != 4 || math.Abs(s.TPOT.Max-60) > 1e-9 {
		t.Fatalf("tpot stats %+v (one-token request must be excluded)", s.TPOT)
	}
}

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in   string
		want SLO
		err  string
	}{
		{"", SLO{}, ""},
		{"ttft=500ms,tpot=50ms", SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond}, ""},
		{"e2el=3s", SLO{E2E: 3 * time.Second}, ""},
		{"ttft=fast", SLO{}, "positive duration"},
		{"ttft=-1s", SLO{}, "positive duration"},
		{"qps=3s", SLO{}, "unknown objective"},
		{"ttft", SLO{}, "not name=duration"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSLO(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestParseAndDiffMetrics(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(`# HELP x
vllm:prefix_cache_hits_total{model_name="a b}"} 10
vllm:prefix_cache_hits_total{model_name="c"} 5
vllm:prefix_cache_queries_total 100
vllm:external_prefix_cache_hits_total 999
capstan_prefix_cache_hits_total 1
vllm:time_to_first_token_seconds_sum 1.5
vllm:time_to_first_token_seconds_count 3
`))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := parseMetrics(strings.NewReader(`vllm:prefix_cache_hits_total{model_name="a b}"} 40
vllm:prefix_cache_hits_total{model_name="c"} 5
vllm:prefix_cache_queries_total 200 1700000000000
vllm:external_prefix_cache_hits_total 5000
capstan_prefix_cache_hits_total 7
vllm:time_to_first_token_seconds_sum 3.5
vllm:time_to_first_token_seconds_count 7
vllm:generation_tokens_total 50
`))
	d := diffMetrics(before, after)
	if d == nil || d.PrefixCacheHits == nil || *d.PrefixCacheHits != 30 || *d.PrefixCacheQueries != 100 || *d.CacheHitRate != 0.3 {
		t.Fatalf("cache: %+v", d)
	}
	if d.TTFTMeanMs == nil || math.Abs(*d.TTFTMeanMs-500) > 1e-9 {
		t.Fatalf("ttft mean %v, want 500", d.TTFTMeanMs)
	}
	if d.GenerationTokens == nil || *d.GenerationTokens != 50 || d.PromptTokens != nil {
		t.Fatalf("tokens: gen %v prompt %v", d.GenerationTokens, d.PromptTokens)
	}
	capOnly, _ := parseMetrics(strings.NewReader("capstan_prefix_cache_hits_total 3\ncapstan_prefix_cache_queries_total 4\n"))
	capAfter, _ := parseMetrics(strings.NewReader("capstan_prefix_cache_hits_total 5\ncapstan_prefix_cache_queries_total 8\n"))
	if d := diffMetrics(capOnly, capAfter); d == nil || *d.CacheHitRate != 0.5 {
		t.Fatalf("capstan names: %+v", d)
	}
}

func TestScheduleIsExactAndSeeded(t *testing.T) {
	c := newSchedule(ArrivalConstant, 4, 1, 0)
	for i := range 10 {
		if got, want := c.next(), time.Duration(i)*250*time.Millisecond; got != want {
			t.Fatalf("constant arrival %d at %v, want %v", i, got, want)
		}
	}
	a, b := newSchedule(ArrivalPoisson, 100, 5, 0), newSchedule(ArrivalPoisson, 100, 5, 0)
	var last time.Duration
	const n = 20000
	for range n {
		x, y := a.next(), b.next()
		if x != y {
			t.Fatal("same seed, different Poisson arrivals")
		}
		last = x
	}
	// Mean gap 10ms; over 20000 gaps the sample mean is within ~2% with overwhelming probability.
	if mean := last.Seconds() / (n - 1); math.Abs(mean-0.01) > 0.0005 {
		t.Fatalf("Poisson mean gap %v, want 10ms", mean)
	}
}
