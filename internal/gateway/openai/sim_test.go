package openai_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// replica is one `capstan engine sim` process.
type replica struct {
	addr, kv, replay string
	proc             *testutil.Process
}

// startSims starts n simulated engines (Qwen3-32B on H100 TP2) with extra flags.
func startSims(t *testing.T, n int, kvEvents bool, extra ...string) []replica {
	t.Helper()
	bin := testutil.CapstanBinary(t)
	out := make([]replica, n)
	var wg sync.WaitGroup
	for i := range out {
		args := []string{"engine", "sim", "--model", "qwen3-32b", "--gpu", "h100", "--tensor-parallel", "2", "--port", "0", "--seed", "1"}
		if kvEvents {
			out[i].kv = fmt.Sprintf("tcp://127.0.0.1:%d", testutil.FreePort(t))
			out[i].replay = fmt.Sprintf("tcp://127.0.0.1:%d", testutil.FreePort(t))
			args = append(args, "--kv-events", strings.Replace(out[i].kv, "127.0.0.1", "*", 1),
				"--kv-events-replay", strings.Replace(out[i].replay, "127.0.0.1", "*", 1))
		}
		args = append(args, extra...)
		out[i].proc = testutil.Start(t, context.Background(), bin, args...)
	}
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := out[i].proc.WaitLine(t, "listening on http://", 30*time.Second)
			out[i].addr = strings.TrimSpace(l[strings.Index(l, "http://")+len("http://"):])
		}()
	}
	wg.Wait()
	return out
}

func simRoute(name, strategy string, rs []replica) gateway.Route {
	v := gateway.VariantRoute{Name: "AllTraffic", Weight: 1, RoutingStrategy: strategy}
	for i, r := range rs {
		v.Backends = append(v.Backends, gateway.Backend{ID: fmt.Sprintf("r%d", i), Addr: r.addr, KVEventsEndpoint: r.kv, KVEventsReplay: r.replay})
	}
	return gateway.Route{Endpoint: name, Variants: []gateway.VariantRoute{v}}
}

func client(f *front) oa.Client {
	return oa.NewClient(option.WithBaseURL(f.srv.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func TestSDKThroughGateway(t *testing.T) {
	sims := startSims(t, 2, false, "--time-scale", "0.01")
	f := newFront(t, simRoute("chat-ep", "roundrobin", sims))
	c := client(f)
	ctx := context.Background()
	msgs := []oa.ChatCompletionMessageParamUnion{oa.SystemMessage("You are terse."), oa.UserMessage("Tell me a story about a lighthouse keeper.")}

	t.Run("chat streaming", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(ctx, oa.ChatCompletionNewParams{Model: "chat-ep", Messages: msgs, MaxTokens: oa.Int(24),
			StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}}, option.WithJSONSet("ignore_eos", true))
		chunks, text, completion := 0, "", int64(0)
		for stream.Next() {
			ch := stream.Current()
			chunks++
			if len(ch.Choices) > 0 {
				text += ch.Choices[0].Delta.Content
			}
			if ch.Usage.CompletionTokens > 0 {
				completion = ch.Usage.CompletionTokens
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if chunks < 10 || text == "" || completion != 24 {
			t.Fatalf("chunks %d text %q completion tokens %d", chunks, text, completion)
		}
	})
	t.Run("chat", func(t *testing.T) {
		res, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "chat-ep", Messages: msgs, MaxTokens: oa.Int(8)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content == "" || res.Usage.PromptTokens == 0 {
			t.Fatalf("response %+v", res)
		}
	})
	t.Run("completions streaming", func(t *testing.T) {
		stream := c.Completions.NewStreaming(ctx, oa.CompletionNewParams{Model: "chat-ep", MaxTokens: oa.Int(12),
			Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String("Once upon a time")}}, option.WithJSONSet("ignore_eos", true))
		n := 0
		for stream.Next() {
			n++
		}
		if err := stream.Err(); err != nil || n < 12 {
			t.Fatalf("chunks %d err %v", n, err)
		}
	})
	t.Run("unknown model is a 404 the SDK understands", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "missing", Messages: msgs})
		var apiErr *oa.Error
		if !errorsAs(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(ctx)
		if err != nil || len(page.Data) != 1 || page.Data[0].ID != "chat-ep" {
			t.Fatalf("models %+v err %v", page, err)
		}
	})
	if n := promtest.CollectAndCount(f.reg, "capstan_gateway_time_to_first_token_seconds"); n != 1 {
		t.Fatalf("ttft series %d", n)
	}
	if n := promtest.CollectAndCount(f.reg, "capstan_gateway_inter_token_latency_seconds"); n != 1 {
		t.Fatalf("itl series %d", n)
	}
}

// TestKillReplicaMidStream: kill -9 the replica serving a stream; the
// stream ends with an error the SDK raises, and new requests go elsewhere.
func TestKillReplicaMidStream(t *testing.T) {
	sims := startSims(t, 2, false, "--time-scale", "1")
	f := newFront(t, simRoute("ep", "roundrobin", sims))
	var resp *http.Response
	c := client(f)
	stream := c.Chat.Completions.NewStreaming(context.Background(), oa.ChatCompletionNewParams{Model: "ep",
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("go on forever")}, MaxTokens: oa.Int(2000)},
		option.WithJSONSet("ignore_eos", true), option.WithResponseInto(&resp))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	victim := resp.Header.Get("X-Capstan-Backend")
	idx := map[string]int{"r0": 0, "r1": 1}[victim]
	if err := sims[idx].proc.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "upstream_error") {
		t.Fatalf("stream ended with %v, want the gateway's upstream error", err)
	}
	for i := 0; i < 4; i++ {
		r, body := post(t, f.srv.URL+"/v1/completions", `{"model":"ep","prompt":"hello","max_tokens":2}`)
		if r.StatusCode != 200 || r.Header.Get("X-Capstan-Backend") == victim {
			t.Fatalf("request %d: status %d backend %s: %s", i, r.StatusCode, r.Header.Get("X-Capstan-Backend"), body)
		}
	}
}

// sharedPrompt is a long system prompt (many KV blocks) plus a question.
func sharedPrompt(question string) string {
	return fmt.Sprintf(`{"model":"ep","max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":%q}]}`,
		strings.Repeat("You are a careful assistant for the lighthouse company. ", 60), question)
}

func cachedTokens(t *testing.T, body string) int {
	t.Helper()
	i := strings.Index(body, `"cached_tokens":`)
	if i < 0 {
		t.Fatalf("no cached_tokens in %s", body)
	}
	var n int
	fmt.Sscanf(body[i+len(`"cached_tokens":`):], "%d", &n)
	return n
}

func TestCacheAwareRouting(t *testing.T) {
	sims := startSims(t, 4, true, "--time-scale", "0")
	tests := []struct {
		name     string
		strategy string
		// warm, when set, primes one replica directly (not through the
		// gateway) so only the KV events can tell the router where it is.
		warmDirect bool
	}{
		{name: "prefixaware follows its own decisions", strategy: "prefixaware"},
		{name: "kvaware follows the engines' events", strategy: "kvaware", warmDirect: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFront(t, simRoute("ep", tt.strategy, sims))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.gw.ScrapeOnce(ctx) // learn block size and model id first: they seed the hashes
			go f.gw.Run(ctx)
			want := ""
			if tt.warmDirect {
				r, body := post(t, "http://"+sims[2].addr+"/v1/chat/completions", strings.Replace(sharedPrompt("warm-up "+tt.strategy), `"model":"ep",`, "", 1))
				if r.StatusCode != 200 {
					t.Fatalf("warm-up: %d %s", r.StatusCode, body)
				}
				want = "r2"
				// The subscription may join after the warm-up's events went
				// out (ZeroMQ slow joiner): later batches reveal the gap and
				// the router replays from 0.
				deadline := time.Now().Add(15 * time.Second)
				for i := 0; f.gw.KVBlocks("r2") < 100; i++ {
					if time.Now().After(deadline) {
						t.Fatalf("index holds %d blocks of r2", f.gw.KVBlocks("r2"))
					}
					post(t, "http://"+sims[2].addr+"/v1/completions", fmt.Sprintf(`{"prompt":"ping %d %s","max_tokens":1}`, i, strings.Repeat("z ", 40)))
					time.Sleep(100 * time.Millisecond)
				}
			}
			for i := 0; i < 6; i++ {
				r, body := post(t, f.srv.URL+"/v1/chat/completions", sharedPrompt(fmt.Sprintf("question %s %d", tt.strategy, i)))
				if r.StatusCode != 200 {
					t.Fatalf("status %d: %s", r.StatusCode, body)
				}
				got := r.Header.Get("X-Capstan-Backend")
				if want == "" {
					want = got
				}
				if got != want {
					t.Fatalf("request %d went to %s, the prefix lives on %s", i, got, want)
				}
				if (i > 0 || tt.warmDirect) && cachedTokens(t, body) < 400 {
					t.Fatalf("request %d: cached tokens %d", i, cachedTokens(t, body))
				}
			}
			if hits := promtest.ToFloat64(gaugeVec(t, f.reg, "capstan_gateway_routing_decisions_total")); hits != 6 {
				t.Fatalf("routing decisions %v, want 6", hits)
			}
		})
	}
}

func TestSessionStickyThroughGateway(t *testing.T) {
	sims := startSims(t, 3, false, "--time-scale", "0")
	f := newFront(t, simRoute("ep", "session", sims))
	for _, sess := range []string{"alice", "bob", "carol"} {
		first := ""
		for turn := 0; turn < 4; turn++ {
			r, body := post(t, f.srv.URL+"/v1/completions", `{"model":"ep","prompt":"turn","max_tokens":1}`, "X-Session-Id", sess)
			if r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, body)
			}
			if first == "" {
				first = r.Header.Get("X-Capstan-Backend")
			} else if got := r.Header.Get("X-Capstan-Backend"); got != first {
				t.Fatalf("session %s moved from %s to %s", sess, first, got)
			}
		}
	}
}

func errorsAs(err error, target **oa.Error) bool {
	for err != nil {
		if e, ok := err.(*oa.Error); ok {
			*target = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

var _ = bufio.NewReader
