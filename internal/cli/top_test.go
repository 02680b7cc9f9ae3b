package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	smrtypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/engine/sim"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/server"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// topServer is a real capstan server (server.Start, as capstan serve runs
// it, default config) whose replicas are all served by one in-process
// simulated engine, with AWS SDK clients for it.
type topServer struct {
	url string
	sm  *sm.Client
	smr *smr.Client
}

func startTopServer(t *testing.T, cfg config.Config) *topServer {
	t.Helper()
	addr := runTopSim(t)
	rt := fake.New()
	rt.SetDefaultAddr(addr)
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Default()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Start(ctx, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Runtime:    func(clock.Clock, *slog.Logger, string) (runtime.Runtime, error) { return rt, nil },
		RuntimeAPI: server.RuntimeAPI(cfg), Resync: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Stop(context.Background()) })
	url := "http://" + srv.Addr
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), Retryer: testutil.AWSRetryer}
	return &topServer{url: url,
		sm:  sm.NewFromConfig(awsCfg, func(o *sm.Options) { o.BaseEndpoint = aws.String(url) }),
		smr: smr.NewFromConfig(awsCfg, func(o *smr.Options) { o.BaseEndpoint = aws.String(url) })}
}

// runTopSim runs one simulated engine (no simulated waiting) until the
// test ends and returns its address.
func runTopSim(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(sim.Run(ctx, sim.Options{Model: "llama-3.1-8b", GPU: "h100"}, pw, slog.New(slog.DiscardHandler)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("simulated engine: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on http://"))
}

// runCapstan runs one command line through the real root command.
func runCapstan(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := NewRootCommand()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// topRow finds the row of endpoint ep in top's plain output and returns its
// cells, or nil.
func topRow(out, ep string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 9 && f[0] == ep {
			return f
		}
	}
	return nil
}

// The scenario: a SageMaker endpoint and a JumpStartModel deployment
// (serving under its sageMakerEndpoint name) take requests while
// `capstan top --once --interval 1s` watches; both rows show a request
// rate, the deployment its ready replicas.
func TestTopEndToEnd(t *testing.T) {
	s := startTopServer(t, config.Config{})
	ctx := context.Background()
	if _, err := s.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("m1"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("c1"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m1"),
			InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(1)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("chat-ep"), EndpointConfigName: aws.String("c1")}); err != nil {
		t.Fatal(err)
	}
	const jsm = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: deepseek, namespace: team-a}
spec:
  sageMakerEndpoint: {name: ds-ep}
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
`
	if _, errOut, err := runCapstan(t, jsm, "--server", s.url, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	// Both serve: the endpoint InService, the deployment answering.
	streamed := func(ctx context.Context) error {
		out, err := s.smr.InvokeEndpointWithResponseStream(ctx, &smr.InvokeEndpointWithResponseStreamInput{
			EndpointName: aws.String("chat-ep"), ContentType: aws.String("application/json"),
			Body: []byte(`{"messages":[{"role":"user","content":"Tell me about GPUs"}],"max_tokens":4}`)})
		if err != nil {
			return err
		}
		defer out.GetStream().Close()
		for ev := range out.GetStream().Events() {
			_, _ = ev.(*smrtypes.ResponseStreamMemberPayloadPart)
		}
		return out.GetStream().Err()
	}
	plain := func(ctx context.Context) error {
		_, err := s.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("ds-ep"), ContentType: aws.String("application/json"),
			Body: []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("Explain paged attention in one line. ", 12) + `"}],"max_tokens":4}`)})
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, call := range []func(context.Context) error{streamed, plain} {
		for err := call(ctx); err != nil; err = call(ctx) {
			if time.Now().After(deadline) {
				t.Fatalf("endpoints never served: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Traffic to both for as long as top watches.
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sent atomic.Int64
	for _, call := range []func(context.Context) error{streamed, plain} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lctx.Err() == nil {
				if call(lctx) == nil {
					sent.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	out, errOut, err := runCapstan(t, "", "--server", s.url, "top", "--once", "--interval", "1s")
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("top: %v %s", err, errOut)
	}
	t.Logf("top (%d requests sent):\n%s", sent.Load(), out)
	if !strings.Contains(out, "latency TTFT (streamed requests)") || !strings.Contains(out, "window 1.0s") {
		t.Errorf("header: %q", out)
	}
	if blocks := strings.Count(out, "ENDPOINT  "); blocks != 1 {
		t.Errorf("--once printed %d blocks", blocks)
	}
	tests := []struct {
		ep, source string
		replicas   []string // any of
		latency    bool     // streamed: TTFT quantiles shown
		kvHit      bool     // a repeated long prompt: served from cache
	}{
		// capstan_endpoint_replicas may be absent; then "-".
		{"chat-ep", "endpoint", []string{"1/1", "-"}, true, false},
		{"ds-ep", "jsm/team-a/deepseek", []string{"1/1"}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.ep, func(t *testing.T) {
			r := topRow(out, tc.ep)
			if r == nil {
				t.Fatalf("no row for %s", tc.ep)
			}
			if r[1] != tc.source {
				t.Errorf("source %q, want %q", r[1], tc.source)
			}
			if rate, err := strconv.ParseFloat(r[2], 64); err != nil || rate <= 0 {
				t.Errorf("rate %q, want > 0", r[2])
			}
			if got := r[3] != "-" && r[4] != "-"; got != tc.latency {
				t.Errorf("TTFT p50/p95 %q %q, want shown=%v", r[3], r[4], tc.latency)
			}
			if hit := strings.HasSuffix(r[6], "%") && r[6] != "0%"; tc.kvHit && !hit {
				t.Errorf("KV hit %q, want a share above 0%%", r[6])
			}
			ok := false
			for _, w := range tc.replicas {
				ok = ok || r[5] == w
			}
			if !ok {
				t.Errorf("replicas %q, want one of %q", r[5], tc.replicas)
			}
		})
	}
}

// With adminTokens configured /metrics needs one; top sends --token or
// CAPSTAN_TOKEN and says which flag is missing otherwise.
func TestTopSendsAdminToken(t *testing.T) {
	s := startTopServer(t, config.Config{AdminTokens: []string{"admin-secret-token-1234"}})
	t.Setenv("CAPSTAN_TOKEN", "")
	if _, _, err := runCapstan(t, "", "--server", s.url, "top", "--once", "--interval", "100ms"); err == nil || !strings.Contains(err.Error(), "--token") {
		t.Errorf("without a token: %v", err)
	}
	out, errOut, err := runCapstan(t, "", "--server", s.url, "top", "--once", "--interval", "100ms", "--token", "admin-secret-token-1234")
	if err != nil || !strings.Contains(out, "ENDPOINT") {
		t.Errorf("with --token: %v %s %q", err, errOut, out)
	}
	t.Setenv("CAPSTAN_TOKEN", "admin-secret-token-1234")
	if out, _, err := runCapstan(t, "", "--server", s.url, "top", "--count", "2", "--interval", "100ms"); err != nil || strings.Count(out, "ENDPOINT") != 2 {
		t.Errorf("with CAPSTAN_TOKEN, --count 2: %v %q", err, out)
	}
}

func TestTopFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--interval", "10ms"}, "--interval 10ms"},
		{[]string{"--interval", "2h"}, "--interval 2h0m0s"},
		{[]string{"--count", "-1"}, "--count -1"},
		{[]string{"--once", "--count", "3"}, "--once is --count 1"},
		{[]string{"extra"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runCapstan(t, "", append([]string{"--server", "http://127.0.0.1:1", "top"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("unreachable server", func(t *testing.T) {
		_, _, err := runCapstan(t, "", "--server", "http://127.0.0.1:1", "top", "--once", "--interval", "100ms")
		if err == nil || !strings.Contains(err.Error(), "cannot reach the capstan server at http://127.0.0.1:1") {
			t.Errorf("err = %v", err)
		}
	})
}

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// scrapeServer answers /metrics with the captured scrapes of
// internal/top/testdata in turn, repeating the last.
func scrapeServer(t *testing.T, names ...string) *httptest.Server {
	t.Helper()
	var scrapes [][]byte
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("..", "top", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		scrapes = append(scrapes, b)
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(scrapes[min(int(n.Add(1)-1), len(scrapes)-1)])
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The window, and so every rate, is measured with top's clock: two
// refreshes of a fake clock stepped 2 s each read exactly 2 s windows.
func TestTopWindowFromClock(t *testing.T) {
	srv := scrapeServer(t, "mixed-1.txt", "mixed-2.txt")
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cmd := topCommand(&topOptions{g: &globalOptions{server: srv.URL}, clk: clk, http: srv.Client()})
	var out bytes.Buffer
	cmd.SetArgs([]string{"--count", "2", "--interval", "2s"})
	cmd.SetOut(&out)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(context.Background()) }()
	for range 2 {
		clk.BlockUntil(1)
		clk.Step(2 * time.Second)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(strings.TrimSuffix(out.String(), "\n\n"), "\n\n")
	if len(blocks) != 2 {
		t.Fatalf("%d blocks:\n%s", len(blocks), out.String())
	}
	for i, w := range []struct{ header, llama string }{
		{"2026-01-02T03:04:07Z  window 2.0s  latency TTFT", "llama endpoint 20.00 2.2ms 4.0ms 3/4 75% 4 2"},
		{"2026-01-02T03:04:09Z  window 2.0s  latency TTFB", "llama endpoint 0.00 - - 3/4 - 4 2"},
	} {
		if !strings.HasPrefix(blocks[i], w.header) || !strings.Contains(squeeze(blocks[i]), w.llama) {
			t.Errorf("block %d:\n%s\nwant header %q and row %q", i, blocks[i], w.header, w.llama)
		}
	}
}

// In a terminal top redraws in place (clear + home, CR LF line ends), the
// busiest endpoint first, until q. The server answers the captured scrapes
// of internal/top/testdata in turn.
func TestTopTerminal(t *testing.T) {
	srv := scrapeServer(t, "mixed-1.txt", "mixed-2.txt")

	g := &globalOptions{server: srv.URL}
	cmd := topCommand(&topOptions{g: g, clk: clock.Real{}, http: srv.Client(), tty: func(io.Writer) bool { return true }})
	var out syncBuffer
	inR, inW := io.Pipe()
	cmd.SetArgs([]string{"--interval", "100ms"})
	cmd.SetIn(inR)
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\x1b[H\x1b[2J") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no second redraw: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := inW.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("q: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("q did not quit")
	}
	screens := strings.Split(out.String(), "\x1b[H\x1b[2J")
	if !strings.Contains(screens[1], "measuring the first 100ms window") {
		t.Errorf("first screen: %q", screens[1])
	}
	hidden := screens[0]
	screens = screens[1:]
	first := screens[1]
	lines := strings.Split(first, "\r\n")
	if strings.Contains(strings.ReplaceAll(first, "\r\n", ""), "\n") || len(lines) < 4 {
		t.Fatalf("screen lines: %q", first)
	}
	if !strings.HasPrefix(lines[2], "llama ") || !strings.HasPrefix(lines[3], "small ") {
		t.Errorf("not busiest first:\n%s", strings.Join(lines, "\n"))
	}
	if hidden != hideCursor || !strings.HasSuffix(out.String(), showCursor) {
		t.Errorf("cursor not hidden while drawing and shown after: %q … %q", hidden, out.String()[max(0, out.Len()-20):])
	}
	if !strings.Contains(first, "q or Ctrl-C quits") {
		t.Errorf("no footer: %q", first)
	}
	// The second refresh compares two identical scrapes: no traffic.
	if f := strings.Fields(strings.Split(screens[2], "\r\n")[2]); len(f) < 3 || f[2] != "0.00" {
		t.Errorf("second refresh: %q", screens[2])
	}
}
