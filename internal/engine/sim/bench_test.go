package sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/tier"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// BenchmarkSchedulerStep256 measures one engine step (schedule + apply) for
// a steady decode batch of 256 sequences. Every 1000 steps the batch is
// replaced with the timer stopped, so the measured steps are all decode steps.
func BenchmarkSchedulerStep256(b *testing.B) {
	o := testOptions()
	var e *Engine
	refill := func() {
		e = newTestEngine(b, o, Deps{})
		for i := range 256 {
			r := request{prompt: kv.Tokenize(prompt(strconv.Itoa(i), 128)), maxTokens: 1000, ignoreEOS: true, seed: uint64(i)}
			e.prepare(context.Background(), &r)
			if _, err := e.Submit(r); err != nil {
				b.Fatal(err)
			}
		}
		// Prefill 256 × 128 tokens in chunks of 8192 until every step is a
		// pure decode step of 256 tokens.
		for range 10 {
			if e.RunStep(); len(e.running) == 256 && e.step.Tokens == 256 {
				return
			}
		}
		b.Fatalf("%d running after the prefill steps, want 256 decoding", len(e.running))
	}
	refill()
	b.ReportAllocs()
	b.ResetTimer()
	steps := 0
	for b.Loop() {
		if steps == 980 {
			b.StopTimer()
			refill()
			steps = 0
			b.StartTimer()
		}
		e.RunStep()
		steps++
	}
}

// lruStore is a bounded in-memory stand-in for the tieredstorage store:
// tier.L1's LRU behind the shared-tier interface, so the benchmark's node
// store fills up and evicts as a real one does.
type lruStore struct{ c *tier.L1 }

var _ L2Cache = lruStore{}

func (s lruStore) MatchPrefix(_ context.Context, hs []kv.BlockHash) (int, error) {
	return s.c.MatchPrefix(hs), nil
}

func (s lruStore) Put(_ context.Context, hs []kv.BlockHash) error {
	s.c.Put(hs...)
	return nil
}

// BenchmarkEngineCost measures the engine's own CPU per generated token
// (process CPU, so the shared tiers' writer goroutines and the Redis client
// count; no HTTP) with the tiers off and on, under one workload: 128
// requests in flight, each a 256-token prompt drawn at random from 1,024
// (revisits) and 32 output tokens, on a GPU cache of 4,096 blocks (a quarter
// of the pool's 16,384). Tiers on: a 4,096-block L1, an 8,192-block LRU
// standing in for tieredstorage, and (last setting) a real Redis for the
// rest. One op is one engine step; compare cpu-ns/token.
func BenchmarkEngineCost(b *testing.B) {
	const (
		inFlight  = 128
		poolSize  = 1024
		promptLen = 256
		maxTokens = 32
	)
	pool := make([][]uint32, poolSize)
	for i := range pool {
		pool[i] = kv.Tokenize(prompt(fmt.Sprintf("%04d", i), promptLen))
	}
	o := tinyOptions(4096)
	for _, setting := range []string{"off", "l1+tieredstorage", "l1+tieredstorage+redis"} {
		b.Run("tiers="+setting, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e := newTestEngine(b, o, Deps{})
			if setting != "off" {
				var redis L2Cache
				if strings.HasSuffix(setting, "+redis") {
					r, err := tier.NewRedis(ctx, testutil.StartRedis(b), e.model.ID, 0)
					if err != nil {
						b.Fatal(err)
					}
					defer r.Close()
					redis = r
				}
				e.l1 = tier.NewL1(4096*e.kvBlock, e.kvBlock)
				e.setShared(lruStore{tier.NewL1(8192*e.kvBlock, e.kvBlock)}, redis)
				e.startWriters(ctx)
			}
			r := rng{s: 1}
			var live []*seq
			step := func() {
				for len(live) < inFlight {
					req := request{prompt: pool[r.next()%poolSize], maxTokens: maxTokens, ignoreEOS: true, seed: r.next()}
					e.prepare(ctx, &req)
					s, err := e.Submit(req)
					if err != nil {
						b.Fatal(err)
					}
					live = append(live, s)
				}
				e.RunStep()
				keep := live[:0]
				for _, s := range live {
					if !s.over {
						keep = append(keep, s)
					}
				}
				clear(live[len(keep):])
				live = keep
			}
			// Warm up until the caches are in their steady state.
			for range 2000 {
				step()
			}
			tok0, cpu0 := promtest.ToFloat64(e.metrics.GenerationTokens), cpuTime()
			q0, h0 := promtest.ToFloat64(e.metrics.PrefixQueries), promtest.ToFloat64(e.metrics.PrefixHits)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				step()
			}
			b.StopTimer()
			tokens := promtest.ToFloat64(e.metrics.GenerationTokens) - tok0
			b.ReportMetric(float64(cpuTime()-cpu0)/tokens, "cpu-ns/token")
			b.ReportMetric((promtest.ToFloat64(e.metrics.PrefixHits)-h0)/(promtest.ToFloat64(e.metrics.PrefixQueries)-q0), "prefix-hit-rate")
		})
	}
}

// cpuTime is user+system CPU of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is user+system CPU of another process, from /proc/PID/stat.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ = 100
}

// streamClient reads one SSE completion stream and returns its token chunks.
func streamOnce(c *http.Client, url, body string) (int, error) {
	resp, err := c.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return n, fmt.Errorf("stream ended early after %d tokens: %w", n, err)
		}
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			return n, nil
		}
		if bytes.Contains(line, []byte(`"finish_reason":null`)) {
			n++
		}
	}
}

// shortPrompt is the body of streaming request i: a prompt shorter than one
// KV block, so no cache tier is involved.
func shortPrompt(i int64, maxTokens int) string {
	return fmt.Sprintf(`{"prompt":"request %d of the streaming benchmark","max_tokens":%d,"ignore_eos":true,"stream":true}`, i, maxTokens)
}

// driveStreams sends total streaming requests, body(i, maxTokens) each, over
// conc client goroutines.
func driveStreams(b *testing.B, url string, total, conc, maxTokens int, body func(i int64, maxTokens int) string) (tokens int64) {
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DialContext: (&net.Dialer{}).DialContext}
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	var next atomic.Int64
	var got atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(total) {
					return
				}
				n, err := streamOnce(c, url, body(i, maxTokens))
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				got.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	return got.Load()
}

func startBenchSim(b *testing.B, args ...string) (*testutil.Process, string) {
	bin := testutil.CapstanBinary(b)
	all := append([]string{"engine", "sim", "--model", "llama-3.1-8b", "--gpu", "h100", "--port", "0", "--log-level", "warn"}, args...)
	p := testutil.Start(b, context.Background(), bin, all...)
	line := p.WaitLine(b, "listening on http://", 20*time.Second)
	return p, strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
}

// BenchmarkStreamingCPU measures CPU per 100k streamed tokens with every
// simulated latency at zero (--time-scale 0): 32-token streams, 200
// concurrent clients, real HTTP/SSE against a capstan process. b.N is the
// number of requests. Reports server CPU-s (from /proc), client CPU-s
// (getrusage of the benchmark process) and their sum per 100k tokens.
func BenchmarkStreamingCPU(b *testing.B) {
	p, url := startBenchSim(b, "--time-scale", "0")
	streamingCPU(b, p.Cmd.Process.Pid, url, shortPrompt)
}

// BenchmarkStreamingCPUTiers is BenchmarkStreamingCPU with prompts that fill
// KV blocks: 256-token prompts drawn at random from 1,024 (revisits; about
// one request in nine is a prompt's first), on a GPU cache of about 6,000
// blocks (--gpu-memory-utilization 0.36, a third of the pool's 16,384), with
// the tiers off and on as a manifest can set them — an 8 GiB L1 with a real
// Redis, or with a 64 GiB tieredstorage (room for the whole pool) — and with
// all three at once (the engine allows it; a manifest names one L2). The
// bar: server CPU per streamed token with tiers on within 1.5× of tiers off.
func BenchmarkStreamingCPUTiers(b *testing.B) {
	body := func(i int64, maxTokens int) string {
		r := rng{s: uint64(i)}
		text := prompt(fmt.Sprintf("%04d", r.next()%1024), 256)
		return fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"ignore_eos":true,"stream":true}`, text, maxTokens)
	}
	base := []string{"--time-scale", "0", "--gpu-memory-utilization", "0.36"}
	for _, tt := range []struct {
		name string
		args func(b *testing.B) []string
	}{
		{"tiers=off", func(*testing.B) []string { return nil }},
		{"tiers=l1+redis", func(b *testing.B) []string {
			return []string{"--cpu-cache-bytes", "8589934592", "--shared-cache", testutil.StartRedis(b)}
		}},
		{"tiers=l1+tieredstorage", func(b *testing.B) []string {
			return []string{"--cpu-cache-bytes", "8589934592", "--tiered-storage-dir", b.TempDir(), "--tiered-storage-bytes", "68719476736"}
		}},
		{"tiers=l1+tieredstorage+redis", func(b *testing.B) []string {
			return []string{"--cpu-cache-bytes", "8589934592", "--shared-cache", testutil.StartRedis(b),
				"--tiered-storage-dir", b.TempDir(), "--tiered-storage-bytes", "68719476736"}
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			p, url := startBenchSim(b, append(base, tt.args(b)...)...)
			streamingCPU(b, p.Cmd.Process.Pid, url, body)
		})
	}
}

// streamingCPU drives b.N (at least 200) 32-token streams over 200 clients
// against the engine process pid at url, after a warm-up of 400, and
// reports CPU per 100k streamed tokens.
func streamingCPU(b *testing.B, pid int, url string, body func(int64, int) string) {
	driveStreams(b, url, 400, 200, 32, body) // warm connections and the engine
	n := max(b.N, 200)
	srv0, cli0 := procCPU(b, pid), cpuTime()
	b.ResetTimer()
	tokens := driveStreams(b, url, n, 200, 32, body)
	b.StopTimer()
	srv, cli := procCPU(b, pid)-srv0, cpuTime()-cli0
	if tokens != int64(n)*32 {
		b.Fatalf("got %d tokens, want %d", tokens, n*32)
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(tokens) * 1e5 }
	b.ReportMetric(per(srv), "server-cpu-s/100k-tok")
	b.ReportMetric(per(cli), "client-cpu-s/100k-tok")
	b.ReportMetric(per(srv+cli), "total-cpu-s/100k-tok")
	fams := scrape(b, url)
	b.ReportMetric(metricValue(fams, "vllm:prefix_cache_hits_total", nil)/metricValue(fams, "vllm:prefix_cache_queries_total", nil), "prefix-hit-rate")
	hits := metricValue(fams, "capstan_engine_kv_tier_hits_total", nil)
	b.ReportMetric(max(hits, 0)/float64(n+400), "tier-hit-blocks/req")
}

// BenchmarkConcurrentStreams2000 holds 2,000 streaming requests open at once,
// all in one running batch (--max-num-seqs 2048), 128 tokens each at
// --time-scale 0.05, and checks every stream completes.
func BenchmarkConcurrentStreams2000(b *testing.B) {
	p, url := startBenchSim(b, "--time-scale", "0.05", "--max-num-seqs", "2048")
	for b.Loop() {
		srv0 := procCPU(b, p.Cmd.Process.Pid)
		start := time.Now()
		tokens := driveStreams(b, url, 2000, 2000, 128, shortPrompt)
		if tokens != 2000*128 {
			b.Fatalf("%d tokens, want %d", tokens, 2000*128)
		}
		b.ReportMetric(time.Since(start).Seconds(), "wall-s/2000-streams")
		b.ReportMetric((procCPU(b, p.Cmd.Process.Pid) - srv0).Seconds(), "server-cpu-s/2000-streams")
	}
	if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid)); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
				b.ReportMetric(kb/1024, "server-peak-rss-MiB")
			}
		}
	}
}

// BenchmarkStartupToHealthy starts the binary and polls /health every
// millisecond; the metric is the time from exec to the first 200.
func BenchmarkStartupToHealthy(b *testing.B) {
	bin := testutil.CapstanBinary(b)
	c := &http.Client{Timeout: time.Second}
	for b.Loop() {
		port := testutil.FreePort(b)
		start := time.Now()
		p := testutil.Start(b, context.Background(), bin, "engine", "sim", "--model", "llama-3.1-8b", "--gpu", "h100", "--port", strconv.Itoa(port), "--log-level", "warn")
		url := fmt.Sprintf("http://127.0.0.1:%d/health", port)
		for {
			resp, err := c.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Since(start) > 10*time.Second {
				b.Fatal("not healthy after 10s")
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "ms-to-healthy")
		_ = p.Cmd.Process.Kill()
		_ = p.Cmd.Wait()
	}
}
