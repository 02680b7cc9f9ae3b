package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as the trivial streaming server the generator benchmarks
// drive: run in its own process so its sockets do not count against the
// generator's file-descriptor limit (10,000 streams need 10,000 on each side).
func TestMain(m *testing.M) {
	if os.Getenv("CAPSTAN_BENCH_TRIVIAL_SERVER") != "" {
		trivialServerMain()
		return
	}
	os.Exit(m.Run())
}

// trivialServerMain streams two tokens and a usage chunk per request. With
// ?hold=N in the path's query it holds each stream open until N are open at
// once, which proves that many concurrent streams.
func trivialServerMain() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	var open atomic.Int64
	var mu sync.Mutex
	release := make(chan struct{})
	hold, _ := strconv.Atoi(os.Getenv("CAPSTAN_BENCH_HOLD"))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		fl.Flush()
		if hold > 0 {
			if open.Add(1) == int64(hold) {
				mu.Lock()
				close(release)
				mu.Unlock()
			}
			select {
			case <-release:
			case <-time.After(60 * time.Second):
			}
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	})
	fmt.Printf("listening on http://%s\n", ln.Addr())
	_ = (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

func startTrivialServer(b *testing.B, hold int) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CAPSTAN_BENCH_TRIVIAL_SERVER=1", "CAPSTAN_BENCH_HOLD="+strconv.Itoa(hold))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		b.Fatalf("trivial server: %q %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchConfig(url string, n, conc int) Config {
	return Config{
		Targets: []Target{{Name: "local", URL: url}}, API: APIChat, Model: "m",
		Workload: WorkloadSpec{Name: "random", Params: map[string]string{"input": "16", "output": "2"}},
		Seed:     1, Arrival: ArrivalConcurrency, Concurrency: conc, Requests: n, Stream: true,
	}
}

// nopClient answers instantly: what is left is the generator's own cost.
type nopClient struct{}

func (nopClient) Do(_ context.Context, req *Request, rec *Record) {
	rec.ExpectedInputTokens, rec.InputTokens, rec.OutputTokens = 16, 16, req.Item.OutputTokens
	rec.TTFT, rec.E2E = time.Millisecond, 2*time.Millisecond
	rec.ITLs = append(rec.ITLs, time.Millisecond)
}

// BenchmarkGeneratorOverhead is the generator's own cost per request:
// workload generation, scheduling, recording and summarising, no network.
func BenchmarkGeneratorOverhead(b *testing.B) {
	cfg := benchConfig("http://127.0.0.1:1", b.N, 64)
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := Run(context.Background(), cfg, Deps{NewClient: func(Target) (Client, error) { return nopClient{}, nil }}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRequestsPerSecond drives the trivial local server with 64
// closed-loop streams and reports requests/s and the generator's CPU share.
func BenchmarkRequestsPerSecond(b *testing.B) {
	url := startTrivialServer(b, 0)
	cfg := benchConfig(url, max(b.N, 1), 64)
	cpu0 := cpuTime(b)
	b.ResetTimer()
	res, err := Run(context.Background(), cfg, Deps{})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	s := res.Stages[0].Summaries[0]
	if s.Failed > 0 {
		b.Fatalf("errors: %v", s.Errors)
	}
	b.ReportMetric(float64(s.Succeeded)/b.Elapsed().Seconds(), "req/s")
	// The server is another process, so this process's CPU is the generator's
	// (HTTP client included).
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(s.Succeeded), "cpu-µs/req")
}

// BenchmarkConcurrentStreams holds 10,000 streams open at once against the
// trivial server (it releases them only when all 10,000 are open).
func BenchmarkConcurrentStreams(b *testing.B) {
	const streams = 10_000
	for range b.N {
		b.StopTimer()
		url := startTrivialServer(b, streams)
		cfg := benchConfig(url, streams, streams)
		cfg.Timeout = 2 * time.Minute
		b.StartTimer()
		res, err := Run(context.Background(), cfg, Deps{})
		if err != nil {
			b.Fatal(err)
		}
		s := res.Stages[0].Summaries[0]
		if s.Succeeded != streams || s.PeakConcurrency < streams {
			b.Fatalf("ok %d, peak concurrency %d, errors %v", s.Succeeded, s.PeakConcurrency, s.Errors)
		}
		b.ReportMetric(float64(s.PeakConcurrency), "peak-streams")
	}
}
