package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

func baseConfig(url string) Config {
	return Config{
		Targets: []Target{{Name: "a", URL: url}}, API: APIChat, Model: "llama-3.1-8b",
		Workload: WorkloadSpec{Name: "random", Params: map[string]string{"input": "64", "output": "8"}},
		Seed:     1, Arrival: ArrivalConcurrency, Concurrency: 4, Requests: 20, Stream: true, ScrapeMetrics: true,
	}
}

func runOK(t *testing.T, cfg Config) *Result {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunMeasuresWhatTheServerReports(t *testing.T) {
	for _, api := range []API{APIChat, APICompletions, APISageMaker} {
		t.Run(string(api), func(t *testing.T) {
			srv := newFakeServer(t, 30*time.Millisecond, 2*time.Millisecond)
			cfg := baseConfig(srv.URL)
			cfg.API = api
			cfg.Detailed = true
			res := runOK(t, cfg)
			s := res.Stages[0].Summaries[0]
			if s.Succeeded != 20 || s.Failed != 0 {
				t.Fatalf("ok/failed %d/%d errors %v", s.Succeeded, s.Failed, s.Errors)
			}
			for _, r := range res.Records {
				if !r.UsageReported || r.InputTokens != r.ExpectedInputTokens {
					t.Fatalf("input tokens: usage %d, by the rule %d", r.InputTokens, r.ExpectedInputTokens)
				}
				if r.OutputTokens != 8 || len(r.ITLs) != 7 {
					t.Fatalf("output %d tokens, %d ITLs", r.OutputTokens, len(r.ITLs))
				}
				// The server waits 30 ms before the first token and 2 ms
				// before each of the 7 others. (Not e2e ≥ ttft + 14 ms: a
				// first token read late on a loaded machine arrives with
				// the others already buffered behind it.)
				if r.TTFT < 30*time.Millisecond || r.E2E < 30*time.Millisecond+7*2*time.Millisecond {
					t.Fatalf("ttft %v e2e %v below the server's delays", r.TTFT, r.E2E)
				}
			}
			sm := s.Server
			if sm == nil || sm.GenerationTokens == nil || int64(*sm.GenerationTokens) != s.OutputTokens || int64(*sm.PromptTokens) != s.InputTokens {
				t.Fatalf("server tokens %+v vs measured in %d out %d", sm, s.InputTokens, s.OutputTokens)
			}
			// The client's TTFT includes the network; the server's starts at arrival.
			if d := s.TTFT.Mean - *sm.TTFTMeanMs; d < 0 || d > 50 {
				t.Fatalf("client TTFT mean %.2fms vs server %.2fms", s.TTFT.Mean, *sm.TTFTMeanMs)
			}
		})
	}
}

// recordingClient notes the clock time of every request.
type recordingClient struct {
	clk   clock.Clock
	mu    sync.Mutex
	times []time.Time
}

func (c *recordingClient) Do(_ context.Context, req *Request, rec *Record) {
	c.mu.Lock()
	c.times = append(c.times, c.clk.Now())
	c.mu.Unlock()
	rec.ExpectedInputTokens, rec.InputTokens, rec.OutputTokens = 1, 1, req.Item.OutputTokens
}

func TestOpenLoopFollowsTheScheduleOnAFakeClock(t *testing.T) {
	for _, arrival := range []string{ArrivalConstant, ArrivalPoisson} {
		t.Run(arrival, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			fc := clock.NewFake(start)
			rc := &recordingClient{clk: fc}
			cfg := baseConfig("http://127.0.0.1:1")
			cfg.Arrival, cfg.Rate, cfg.Requests, cfg.ScrapeMetrics = arrival, 10, 6, false
			done := make(chan error, 1)
			go func() {
				_, err := Run(context.Background(), cfg, Deps{Clock: fc, NewClient: func(Target) (Client, error) { return rc, nil }})
				done <- err
			}()
			want := []time.Duration{}
			sched := newSchedule(arrival, 10, cfg.Seed, 0)
			for range 6 {
				want = append(want, sched.next())
			}
			sent := func() int {
				rc.mu.Lock()
				defer rc.mu.Unlock()
				return len(rc.times)
			}
			for i := 1; i < 6; i++ {
				for sent() < i { // the arrival's goroutine has sent before time moves on
					time.Sleep(time.Millisecond)
				}
				fc.BlockUntil(1)
				fc.Set(start.Add(want[i]))
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			got := []time.Duration{}
			for _, tm := range rc.times {
				got = append(got, tm.Sub(start))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("requests sent at %v, want %v", got, want)
			}
		})
	}
}

func TestSeededRunIsIdentical(t *testing.T) {
	bodies := func(seed uint64) ([]string, string) {
		srv := newFakeServer(t, time.Millisecond, 0)
		cfg := baseConfig(srv.URL)
		cfg.Seed = seed
		cfg.Workload = WorkloadSpec{Name: "shared-prefix", Params: map[string]string{"preset": "tiny"}}
		cfg.Arrival, cfg.Rate, cfg.Requests = ArrivalPoisson, 200, 15
		res := runOK(t, cfg)
		b := srv.received()
		slices.Sort(b)
		return b, res.Stages[0].Summaries[0].WorkloadFingerprint
	}
	a, fa := bodies(7)
	b, fb := bodies(7)
	c, fc := bodies(8)
	if len(a) != 15 || !slices.Equal(a, b) || fa != fb {
		t.Fatalf("same seed: %d bodies, equal=%v, fingerprints %s %s", len(a), slices.Equal(a, b), fa, fb)
	}
	if slices.Equal(a, c) || fa == fc {
		t.Fatal("different seeds sent the same workload")
	}
}

func TestCompareSendsTheSameWorkloadToEveryTarget(t *testing.T) {
	fast := newFakeServer(t, 5*time.Millisecond, time.Millisecond)
	slow := newFakeServer(t, 40*time.Millisecond, time.Millisecond)
	cfg := baseConfig(fast.URL)
	cfg.Targets = []Target{{Name: "fast", URL: fast.URL}, {Name: "slow", URL: slow.URL}}
	cfg.Arrival, cfg.Rate, cfg.Requests = ArrivalConstant, 100, 12
	res := runOK(t, cfg)
	a, b := fast.received(), slow.received()
	slices.Sort(a)
	slices.Sort(b)
	if len(a) != 12 || !slices.Equal(a, b) {
		t.Fatalf("targets got different workloads (%d vs %d requests)", len(a), len(b))
	}
	r := res.Stages[0].Ratios
	if len(r) != 1 || r[0].Target != "slow" || r[0].Values["ttft_p50"] < 2 {
		t.Fatalf("ratios %+v: slow's TTFT should be several times fast's", r)
	}
}

func TestSweepStagesSpanSyncToThroughput(t *testing.T) {
	srv := newFakeServer(t, 5*time.Millisecond, time.Millisecond)
	cfg := baseConfig(srv.URL)
	cfg.Arrival, cfg.SweepPoints, cfg.MaxConcurrency, cfg.Requests = ArrivalSweep, 4, 8, 16
	res := runOK(t, cfg)
	if len(res.Stages) != 4 {
		t.Fatalf("%d stages, want 4", len(res.Stages))
	}
	lo, hi := res.Stages[0].Summaries[0].RequestsPerSecond, res.Stages[1].Summaries[0].RequestsPerSecond
	if hi <= lo {
		t.Fatalf("throughput stage %.1f req/s not above synchronous %.1f", hi, lo)
	}
	if r2, r3 := res.Stages[2].Rate, res.Stages[3].Rate; !(lo < r2 && r2 < r3 && r3 < hi) {
		t.Fatalf("sweep rates %v, %v not strictly between %v and %v", r2, r3, lo, hi)
	}
	for _, st := range res.Stages {
		if st.Summaries[0].Succeeded != 16 {
			t.Fatalf("stage %s: %d requests", st.Name, st.Summaries[0].Succeeded)
		}
	}
}

func TestMultiTurnSendsSessionsAndHitsTheCache(t *testing.T) {
	srv := newFakeServer(t, time.Millisecond, 0)
	cfg := baseConfig(srv.URL)
	cfg.Workload = WorkloadSpec{Name: "multi-turn", Params: map[string]string{"sessions": "3", "turns": "3", "system": "64", "question": "16", "output": "4", "think": "1ms"}}
	cfg.Concurrency, cfg.Requests = 3, 9
	res := runOK(t, cfg)
	s := res.Stages[0].Summaries[0]
	if s.Succeeded != 9 {
		t.Fatalf("%d requests", s.Succeeded)
	}
	srv.mu.Lock()
	sessions := slices.Clone(srv.sessions)
	srv.mu.Unlock()
	for _, h := range sessions {
		id, user, _ := strings.Cut(h, "|")
		if id == "" || id != user {
			t.Fatalf("X-Session-Id %q and user %q", id, user)
		}
	}
	if s.UsageCacheHitRate <= 0.3 || s.Server == nil || s.Server.CacheHitRate == nil || math.Abs(*s.Server.CacheHitRate-s.UsageCacheHitRate) > 1e-9 {
		t.Fatalf("cache hit rate usage %v server %+v", s.UsageCacheHitRate, s.Server)
	}
}

func TestSageMakerRejectedSignatureIsAnError(t *testing.T) {
	srv := newFakeServer(t, time.Millisecond, 0)
	cfg := baseConfig(srv.URL)
	cfg.API, cfg.Requests, cfg.ScrapeMetrics = APISageMaker, 3, false
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	res, err := Run(context.Background(), cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Stages[0].Summaries[0]; s.Errors["http_403"] != 3 {
		t.Fatalf("errors %v, want 3 × http_403", s.Errors)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if _, err := Run(context.Background(), cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("missing credentials: %v", err)
	}
}

func TestErrorsAreCountedByKind(t *testing.T) {
	srv := newFakeServer(t, time.Millisecond, 0)
	srv.failEvery = 4
	cfg := baseConfig(srv.URL)
	cfg.SLO = SLO{TTFT: time.Minute}
	res := runOK(t, cfg)
	s := res.Stages[0].Summaries[0]
	if s.Failed != 5 || s.Errors["http_500"] != 5 || s.Goodput.Good != 15 {
		t.Fatalf("failed %d errors %v good %d", s.Failed, s.Errors, s.Goodput.Good)
	}
	cfg.Targets[0].URL = "http://127.0.0.1:1"
	cfg.ScrapeMetrics = false
	s = runOK(t, cfg).Stages[0].Summaries[0]
	if s.Errors[errConnect] != 20 {
		t.Fatalf("unreachable target: errors %v", s.Errors)
	}
}

func TestOutputsAndHTMLRenderInChromium(t *testing.T) {
	srv := newFakeServer(t, 2*time.Millisecond, time.Millisecond)
	other := newFakeServer(t, 4*time.Millisecond, time.Millisecond)
	dir := t.TempDir()
	cfg := baseConfig(srv.URL)
	cfg.Targets = append(cfg.Targets, Target{Name: "b </script><b>", URL: other.URL})
	cfg.Arrival, cfg.SweepPoints, cfg.MaxConcurrency, cfg.Requests = ArrivalSweep, 3, 4, 10
	cfg.Out, cfg.Report = filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	cfg.SLO = SLO{TTFT: 500 * time.Millisecond}
	runOK(t, cfg)

	var back Result
	b, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Stages) != 3 || back.Config.Seed != 1 || back.Stages[2].Summaries[1].Goodput == nil || back.WorkloadParams["input"] != "64" {
		t.Fatalf("json round trip: %+v", back.Stages)
	}
	html, _ := os.ReadFile(cfg.Report)
	if regexp.MustCompile(`(?i)(src|href)\s*=\s*"https?:`).Match(html) {
		t.Fatal("report references the network")
	}

	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("chromium is required for this test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--enable-logging=stderr", "--v=0", "--dump-dom", "file://"+cfg.Report)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Uncaught") || strings.Contains(string(dom), `data-render-error="`) {
		t.Fatalf("page script failed:\n%s", stderr.String())
	}
	if !strings.Contains(string(dom), `data-charts-rendered="3"`) {
		t.Fatalf("charts not rendered; stderr:\n%s", stderr.String())
	}
	for _, id := range []string{"chart-latency-vs-rate", "chart-ttft-cdf", "chart-throughput"} {
		if !regexp.MustCompile(`<svg id="` + id + `"[^>]*>.*?<polyline[^>]+points="[0-9]`).Match(dom) {
			t.Errorf("chart %s has no plotted line", id)
		}
	}
}

func TestDurationBoundAndProgress(t *testing.T) {
	srv := newFakeServer(t, time.Millisecond, time.Millisecond)
	cfg := baseConfig(srv.URL)
	cfg.Arrival, cfg.Rate, cfg.Requests, cfg.Duration = ArrivalConstant, 100, 0, 300*time.Millisecond
	cfg.ProgressInterval = 50 * time.Millisecond
	var progress, table strings.Builder
	res, err := Run(context.Background(), cfg, Deps{Progress: &progress, Out: &table})
	if err != nil {
		t.Fatal(err)
	}
	// Constant 100 req/s for 300ms: arrivals at 0, 10, …, 290ms.
	if s := res.Stages[0].Summaries[0]; s.Requests != 30 {
		t.Fatalf("%d requests, want 30", s.Requests)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "progress: constant") || !strings.Contains(lines[len(lines)-1], "done 30 failed 0") {
		t.Fatalf("progress lines:\n%s", progress.String())
	}
	if !strings.Contains(table.String(), "requests ok/failed") || !strings.Contains(table.String(), "30/0") {
		t.Fatalf("table:\n%s", table.String())
	}
	progress.Reset()
	cfg.Duration, cfg.Requests = 0, 5
	if _, err := Run(context.Background(), cfg, Deps{Progress: &progress, ProgressTTY: true}); err != nil {
		t.Fatal(err)
	}
	if p := progress.String(); !strings.Contains(p, "\r\033[K[") || !strings.Contains(p, "] 100% ") {
		t.Fatalf("tty progress %q", p)
	}
}
