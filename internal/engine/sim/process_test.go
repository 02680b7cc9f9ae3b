package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/events"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// startSim runs `capstan engine sim` with args and returns its base URL.
func startSim(t *testing.T, ctx context.Context, args ...string) (*testutil.Process, string) {
	t.Helper()
	bin := testutil.CapstanBinary(t)
	all := append([]string{"engine", "sim", "--model", "llama-3.1-8b", "--gpu", "h100", "--port", "0", "--time-scale", "0.05"}, args...)
	p := testutil.Start(t, ctx, bin, all...)
	line := p.WaitLine(t, "listening on http://", 20*time.Second)
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	return p, url
}

func getMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func chatOnce(t *testing.T, url, content string) string {
	t.Helper()
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":4}`, content)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func exitCode(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("process still running after %v", within)
		return -1
	}
}

func TestProcessGracefulSIGTERM(t *testing.T) {
	p, url := startSim(t, context.Background())
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	// A stream of 300 tokens at 0.05 × ~6.5 ms lasts ~100 ms: SIGTERM lands mid-stream.
	body := `{"prompt":"drain me","max_tokens":300,"ignore_eos":true,"stream":true}`
	resp, err = http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("in-flight stream was cut on SIGTERM; tail %q", tail(string(rest)))
	}
	if n := strings.Count(string(rest), `"text":"`); n < 299 {
		t.Fatalf("stream delivered %d more token chunks, want all", n)
	}
	if code := exitCode(t, p.Cmd, 10*time.Second); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}

func TestProcessCrashAfterRequests(t *testing.T) {
	p, url := startSim(t, context.Background(), "--crash-after-requests", "2")
	chatOnce(t, url, "one")
	chatOnce(t, url, "two")
	if code := exitCode(t, p.Cmd, 10*time.Second); code != 1 {
		t.Fatalf("exit status %d, want 1", code)
	}
}

func TestProcessStartupErrors(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing model", []string{"--gpu", "h100"}, "--model: required"},
		{"unknown gpu", []string{"--model", "llama-3.1-8b", "--gpu", "tpu"}, "unknown GPU"},
		{"model does not fit", []string{"--model", "llama-3.1-70b", "--gpu", "h100"}, "does not fit"},
		{"bad fail rate", []string{"--model", "llama-3.1-8b", "--gpu", "h100", "--fail-rate", "2"}, "--fail-rate"},
		{"tieredstorage size without directory", []string{"--model", "llama-3.1-8b", "--gpu", "h100", "--tiered-storage-bytes", "1073741824"}, "--tiered-storage-dir: required"},
		{"tieredstorage smaller than a block", []string{"--model", "llama-3.1-8b", "--gpu", "h100", "--tiered-storage-dir", t.TempDir(), "--tiered-storage-bytes", "4096"}, "--tiered-storage-bytes: 4096 is less than one KV block"},
		{"tieredstorage directory unusable", []string{"--model", "llama-3.1-8b", "--gpu", "h100", "--tiered-storage-dir", notADir(t), "--tiered-storage-bytes", "1073741824"}, "--tiered-storage-dir " + notADir(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command(bin, append([]string{"engine", "sim", "--port", "0"}, tt.args...)...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tt.want) {
				t.Fatalf("err %v, output %q; want exit 1 mentioning %q", err, out, tt.want)
			}
		})
	}
}

// notADir is a path under a regular file: no store can be opened there.
func notADir(t *testing.T) string {
	t.Helper()
	f := filepath.Join(os.TempDir(), "capstan-sim-not-a-dir")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(f, "tieredstorage")
}

func TestProcessL2SharedAcrossReplicas(t *testing.T) {
	redisURL := testutil.StartRedis(t)
	ctx := context.Background()
	_, a := startSim(t, ctx, "--shared-cache", redisURL)
	_, b := startSim(t, ctx, "--shared-cache", redisURL)
	content := prompt("l2l2", 400)
	out := chatOnce(t, a, content)
	if !strings.Contains(out, `"cached_tokens":0`) {
		t.Fatalf("first request on A: %s", out)
	}
	// Write-through is asynchronous: wait until A reports the store.
	deadline := time.Now().Add(10 * time.Second)
	l2Store := map[string]string{"tier": "l2", "direction": "store"}
	for metricValue(scrape(t, a), "capstan_engine_kv_tier_bytes_total", l2Store) <= 0 {
		if time.Now().After(deadline) {
			t.Fatalf("A never wrote to L2:\n%s", getMetrics(t, a))
		}
		time.Sleep(20 * time.Millisecond)
	}
	out = chatOnce(t, b, content)
	if strings.Contains(out, `"cached_tokens":0`) || !strings.Contains(out, `"cached_tokens":`) {
		t.Fatalf("B did not serve the prompt from L2: %s", out)
	}
	fams := scrape(t, b)
	if hits := metricValue(fams, "capstan_engine_kv_tier_hits_total", map[string]string{"tier": "l2"}); hits < 1 {
		t.Fatalf("B's metrics show %v L2 hits:\n%s", hits, getMetrics(t, b))
	}
	if hits := metricValue(fams, "vllm:prefix_cache_hits_total", nil); hits < 16 {
		t.Fatalf("B's prefix_cache_hits_total %v", hits)
	}
}

func TestProcessKVEventsOverZMQ(t *testing.T) {
	port := testutil.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, url := startSim(t, ctx, "--kv-events", fmt.Sprintf("tcp://*:%d", port), "--served-model-name", "m1")
	sub, err := events.NewSubscriber(ctx, fmt.Sprintf("tcp://127.0.0.1:%d", port), "kv@")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	text := prompt("zmq1", 64)
	want := kv.BlockHashes(kv.RootHash("llama-3.1-8b"), kv.Tokenize(text), 16)
	// PUB/SUB drops messages until the subscription propagates: send distinct
	// requests until one's events arrive.
	got := make(chan events.Message, 16)
	go func() {
		for {
			m, err := sub.Recv(ctx)
			if err != nil {
				return
			}
			got <- m
		}
	}()
	for i := 0; ; i++ {
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":1}`, text)
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		select {
		case m := <-got:
			if !strings.HasPrefix(m.Topic, "kv@127.0.0.1:") || !strings.HasSuffix(m.Topic, "@m1") {
				t.Fatalf("topic %q", m.Topic)
			}
			for _, ev := range m.Batch.Events {
				st, ok := ev.(events.BlockStored)
				if !ok || st.Medium != "GPU" {
					continue
				}
				if len(st.BlockHashes) != len(want) || st.BlockHashes[0] != uint64(want[0]) || st.ParentBlockHash != nil || st.BlockSize != 16 {
					t.Fatalf("BlockStored %+v, want hashes %v", st, want)
				}
				return
			}
			t.Fatalf("batch without GPU BlockStored: %+v", m.Batch)
		case <-time.After(300 * time.Millisecond):
			if ctx.Err() != nil {
				t.Fatal("no KV events received")
			}
			// The first request's blocks are cached now; clear by using a new prompt.
			text = prompt(fmt.Sprintf("z%03d", i), 64)
			want = kv.BlockHashes(kv.RootHash("llama-3.1-8b"), kv.Tokenize(text), 16)
		}
	}
}

func TestProcessStdoutContract(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	t.Run("one listening line on stdout, logs on stderr", func(t *testing.T) {
		cmd := exec.Command(bin, "engine", "sim", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--port", "0", "--time-scale", "0")
		var stdout, stderr syncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(stderr.String(), "engine sim ready") {
			if time.Now().After(deadline) {
				t.Fatalf("not ready; stderr %q", stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		url := strings.TrimSpace(strings.TrimPrefix(stdout.String(), "listening on "))
		out := chatOnce(t, url, "hello")
		if !strings.Contains(out, `"model":"meta-llama/Llama-3.1-8B-Instruct"`) {
			t.Fatalf("served model name should default to the --model value: %s", out)
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		if code := exitCode(t, cmd, 10*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGINT", code)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "listening on http://127.0.0.1:") {
			t.Fatalf("stdout %q, want exactly one listening line", stdout.String())
		}
	})
	t.Run("calibration table", func(t *testing.T) {
		out, err := exec.Command(bin, "engine", "sim", "--calibration-table").Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "| decode ITL, batch 1 | llama-3.1-8b | h100 | TP1 | 6.48 ms |") {
			t.Fatalf("table:\n%s", out)
		}
	})
}

// syncBuffer is a strings.Builder safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProcessRedisKilledMidRun: writes to Redis are announced as REMOTE
// BlockStored events; once Redis dies, every request still succeeds, and
// the failed lookups and writes show in capstan_engine_kv_tier_errors_total.
func TestProcessRedisKilledMidRun(t *testing.T) {
	redisURL := testutil.StartRedis(t)
	port := testutil.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, url := startSim(t, ctx, "--shared-cache", redisURL, "--cpu-cache-bytes", "1073741824",
		"--kv-events", fmt.Sprintf("tcp://*:%d", port))
	sub, err := events.NewSubscriber(ctx, fmt.Sprintf("tcp://127.0.0.1:%d", port), "kv@")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	remote := make(chan []uint64, 16)
	go func() {
		for {
			m, err := sub.Recv(ctx)
			if err != nil {
				return
			}
			for _, ev := range m.Batch.Events {
				if st, ok := ev.(events.BlockStored); ok && st.Medium == events.MediumRemote {
					remote <- st.BlockHashes
				}
			}
		}
	}()
	// PUB/SUB drops messages until the subscription propagates: send new
	// prompts until one's REMOTE event arrives.
	for i := 0; ; i++ {
		text := prompt(fmt.Sprintf("r%03d", i), 64)
		chatOnce(t, url, text)
		select {
		case hs := <-remote:
			if len(hs) == 0 {
				t.Fatal("REMOTE BlockStored without hashes")
			}
		case <-time.After(300 * time.Millisecond):
			if ctx.Err() != nil {
				t.Fatal("no REMOTE BlockStored event for blocks written to Redis")
			}
			continue
		}
		break
	}

	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	ctl := *opts
	ctl.MaxRetries = -1 // the shutdown's dropped connection is expected: no redial
	rc := redis.NewClient(&ctl)
	_ = rc.ShutdownNoSave(ctx).Err() // the server exits without answering
	rc.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", opts.Addr, time.Second)
		if err != nil {
			break // Redis is gone
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("Redis still accepts connections after SHUTDOWN")
		}
	}

	for i := range 5 {
		chatOnce(t, url, prompt(fmt.Sprintf("d%03d", i), 300)) // fails the test on any non-200
	}
	lookup := map[string]string{"tier": "l2", "op": "lookup"}
	write := map[string]string{"tier": "l2", "op": "write"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams := scrape(t, url)
		if metricValue(fams, "capstan_engine_kv_tier_errors_total", lookup) >= 5 && metricValue(fams, "capstan_engine_kv_tier_errors_total", write) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want ≥5 failed lookups and a failed write after Redis died:\n%s", getMetrics(t, url))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
