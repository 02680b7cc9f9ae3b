package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// startSim runs `capstan engine sim` and returns its base URL. Time scale 1
// keeps the engine's own TTFT (simulated time) comparable with wall-clock
// measurements.
func startSim(t *testing.T, bin string, seed int) string {
	t.Helper()
	p := testutil.Start(t, t.Context(), bin, "engine", "sim", "--model", "llama-3.1-8b", "--gpu", "h100",
		"--port", "0", "--time-scale", "1", "--seed", strconv.Itoa(seed))
	line := p.WaitLine(t, "listening on ", 30*time.Second)
	return strings.TrimSpace(line[strings.Index(line, "http://"):])
}

// runBenchBinary runs the real `capstan bench` and returns its parsed JSON.
func runBenchBinary(t *testing.T, bin string, args ...string) (*Result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.json")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "--out", out, "--progress", "0"}, args...)...)
	stdout, err := cmd.Output()
	if err != nil {
		stderr := ""
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("capstan bench %v: %v\n%s%s", args, err, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res, string(stdout)
}

// TestAcceptanceAgainstEngineSim checks that what capstan bench measures agrees
// with what the engine reports in its own /metrics.
func TestAcceptanceAgainstEngineSim(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	tests := []struct {
		name     string
		api      string
		workload string
		requests int
		output   int
		cached   bool
	}{
		{"chat random", "openai-chat", "random:input=200,output=24", 24, 24, false},
		{"completions shared-prefix", "openai-completions", "shared-prefix:preset=tiny,system=256", 15, 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := startSim(t, bin, 1)
			res, table := runBenchBinary(t, bin, "--target", url, "--api", tt.api, "--model", "llama-3.1-8b",
				"--workload", tt.workload, "--concurrency", "4", "--requests", strconv.Itoa(tt.requests), "--detailed")
			if !strings.Contains(table, "TTFT ms mean/p50/p90/p95/p99") {
				t.Fatalf("no table on stdout:\n%s", table)
			}
			s := res.Stages[0].Summaries[0]
			if s.Succeeded != tt.requests || s.Failed != 0 {
				t.Fatalf("ok/failed %d/%d: %v", s.Succeeded, s.Failed, s.Errors)
			}
			sm := s.Server
			if sm == nil || sm.PromptTokens == nil || sm.GenerationTokens == nil || sm.TTFTMeanMs == nil {
				t.Fatalf("engine metrics missing: %+v", sm)
			}
			// Token counts: exact, from both sides, and equal to the workload's by the rule.
			if int64(*sm.PromptTokens) != s.InputTokens || int64(*sm.GenerationTokens) != s.OutputTokens {
				t.Fatalf("tokens in/out: bench %d/%d, engine %v/%v", s.InputTokens, s.OutputTokens, *sm.PromptTokens, *sm.GenerationTokens)
			}
			if s.OutputTokens != int64(tt.requests*tt.output) {
				t.Fatalf("output tokens %d, want %d (ignore_eos)", s.OutputTokens, tt.requests*tt.output)
			}
			for _, r := range res.Records {
				if r.InputTokens != r.ExpectedInputTokens {
					t.Fatalf("request %d: engine counted %d prompt tokens, the rule %d", r.Ticket, r.InputTokens, r.ExpectedInputTokens)
				}
			}
			// TTFT: the engine measures from arrival; the client adds HTTP and
			// scheduling on a busy 2-core machine, never less.
			diff := s.TTFT.Mean - *sm.TTFTMeanMs
			if diff < -1 || diff > math.Max(30, 0.3**sm.TTFTMeanMs) {
				t.Fatalf("TTFT mean: bench %.2fms, engine %.2fms", s.TTFT.Mean, *sm.TTFTMeanMs)
			}
			if tt.cached {
				if sm.CacheHitRate == nil || *sm.CacheHitRate <= 0 || math.Abs(*sm.CacheHitRate-s.UsageCacheHitRate) > 1e-9 {
					t.Fatalf("cache hit rate: usage %v, engine %+v", s.UsageCacheHitRate, sm.CacheHitRate)
				}
			}
		})
	}
}

// TestAcceptanceSeededWorkloadIsIdentical runs the same seeded workload twice
// against fresh engines and checks that the engine saw the same requests.
func TestAcceptanceSeededWorkloadIsIdentical(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	run := func(seed string) (string, []int) {
		url := startSim(t, bin, 1)
		res, _ := runBenchBinary(t, bin, "--target", url, "--model", "llama-3.1-8b", "--workload",
			"random:input=64,output=4,dist=uniform,spread=0.5", "--rate", "50", "--requests", "20", "--seed", seed, "--detailed")
		recs := slices.Clone(res.Records)
		slices.SortFunc(recs, func(a, b Record) int { return a.Ticket - b.Ticket })
		var lens []int
		for _, r := range recs {
			lens = append(lens, r.InputTokens) // as counted by the engine
		}
		return res.Stages[0].Summaries[0].WorkloadFingerprint, lens
	}
	fa, la := run("11")
	fb, lb := run("11")
	fc, lc := run("12")
	if fa != fb || !slices.Equal(la, lb) {
		t.Fatalf("same seed differs: %s %v / %s %v", fa, la, fb, lb)
	}
	if fa == fc || slices.Equal(la, lc) {
		t.Fatalf("seeds 11 and 12 gave the same workload: %v", la)
	}
}

// TestCLIRejectsBadFlags checks flag validation errors name the flag.
func TestCLIRejectsBadFlags(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no target", []string{"--model", "m", "--rate", "1", "--requests", "1"}, "--target"},
		{"bad api", []string{"--target", "http://x", "--api", "grpc", "--model", "m", "--rate", "1", "--requests", "1"}, "--api"},
		{"no bound", []string{"--target", "http://x", "--model", "m", "--rate", "1"}, "--duration or --requests"},
		{"bad slo", []string{"--target", "http://x", "--model", "m", "--rate", "1", "--requests", "1", "--slo", "ttft=soon"}, "slo"},
		{"bad workload", []string{"--target", "http://x", "--model", "m", "--rate", "1", "--requests", "1", "--workload", "random:foo=1"}, "unknown parameter"},
		{"bad target", []string{"--target", "ftp://x", "--model", "m", "--rate", "1", "--requests", "1"}, "http(s) base URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.CommandContext(t.Context(), bin, append([]string{"bench"}, tt.args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("err %v, output %q, want it to mention %q", err, out, tt.want)
			}
		})
	}
}

// TestAcceptanceSageMakerThroughServe drives `capstan serve`'s SageMaker
// runtime API (signed InvokeEndpointWithResponseStream, event-stream framing)
// with the real binary, against an endpoint created through the control API.
func TestAcceptanceSageMakerThroughServe(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	p := testutil.Start(t, t.Context(), bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--engine-time-scale", "0.05")
	line := p.WaitLine(t, "serving on http://", 30*time.Second)
	base := strings.TrimSpace(line[strings.Index(line, "http://"):])
	call := func(op string, body string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "SageMaker."+op)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", op, resp.StatusCode, b)
		}
		return string(b)
	}
	call("CreateModel", `{"ModelName":"m","PrimaryContainer":{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}},"ExecutionRoleArn":"arn:aws:iam::000000000000:role/x"}`)
	call("CreateEndpointConfig", `{"EndpointConfigName":"c","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InitialInstanceCount":1,"InstanceType":"ml.p5.48xlarge"}]}`)
	call("CreateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"c"}`)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(call("DescribeEndpoint", `{"EndpointName":"ep"}`), `"InService"`) {
		if time.Now().After(deadline) {
			t.Fatal("endpoint not InService after 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "dummy")
	res, _ := runBenchBinary(t, bin, "--target", base, "--api", "sagemaker", "--endpoint", "ep",
		"--workload", "shared-prefix:preset=tiny", "--concurrency", "4", "--requests", "15", "--detailed")
	s := res.Stages[0].Summaries[0]
	if s.Succeeded != 15 {
		t.Fatalf("ok %d, errors %v (first: %+v)", s.Succeeded, s.Errors, res.Records[0])
	}
	if s.OutputTokens != 15*10 || s.CachedTokens == 0 {
		t.Fatalf("output %d tokens (want 150), cached %d", s.OutputTokens, s.CachedTokens)
	}
	for _, r := range res.Records {
		if !r.UsageReported || r.InputTokens != r.ExpectedInputTokens || len(r.ITLs) != 9 {
			t.Fatalf("record %+v", r)
		}
	}
}
