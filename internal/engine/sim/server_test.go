package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capstan-dev/capstan/internal/engine"
)

// harness is an in-process engine behind a real HTTP server.
type harness struct {
	e   *Engine
	srv *Server
	url string
}

func startHarness(t *testing.T, o Options) *harness {
	t.Helper()
	if o.Model == "" {
		o.Model, o.GPU = "llama-3.1-8b", "h100"
	}
	if o.TimeScale == 0 {
		o.TimeScale = 0.02
	}
	e := newTestEngine(t, o, Deps{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	srv := NewServer(e)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	return &harness{e: e, srv: srv, url: hs.URL}
}

func (h *harness) post(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(h.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (h *harness) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return scrape(t, h.url)
}

// scrape parses url's /metrics with the Prometheus text parser.
func scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// metricValue sums the series of a family whose labels include want.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	sum := 0.0
outer:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue outer
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func TestOpenAISDKStreamingChat(t *testing.T) {
	h := startHarness(t, Options{})
	client := openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey("unused"))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:         "llama-3.1-8b",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt("chat", 300))},
		MaxTokens:     openai.Int(12),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	var cached []int64
	for range 2 {
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var chunks int
		var text strings.Builder
		var finish string
		var usage openai.CompletionUsage
		for stream.Next() {
			c := stream.Current()
			if len(c.Choices) > 0 {
				if c.Choices[0].Delta.Content != "" {
					chunks++
					text.WriteString(c.Choices[0].Delta.Content)
				}
				if c.Choices[0].FinishReason != "" {
					finish = c.Choices[0].FinishReason
				}
			}
			if c.Usage.TotalTokens > 0 {
				usage = c.Usage
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if finish != "stop" && finish != "length" {
			t.Fatalf("finish_reason %q", finish)
		}
		if int64(chunks) != usage.CompletionTokens || chunks < 1 {
			t.Fatalf("%d content chunks but completion_tokens %d", chunks, usage.CompletionTokens)
		}
		if usage.TotalTokens != usage.PromptTokens+usage.CompletionTokens || usage.PromptTokens < 300 {
			t.Fatalf("usage %+v", usage)
		}
		if n := len(strings.Fields(text.String())); n != chunks {
			t.Fatalf("text %q has %d words for %d tokens", text.String(), n, chunks)
		}
		cached = append(cached, usage.PromptTokensDetails.CachedTokens)
	}
	if cached[0] != 0 || cached[1] == 0 {
		t.Fatalf("cached_tokens %v: want 0 then > 0", cached)
	}
	fams := h.metrics(t)
	if v := metricValue(fams, "vllm:time_to_first_token_seconds", map[string]string{"model_name": "llama-3.1-8b", "engine": "0"}); v != 2 {
		t.Fatalf("TTFT observations %v, want 2", v)
	}
}

func TestOpenAISDKCompletionStreamAndUnary(t *testing.T) {
	h := startHarness(t, Options{ServedModelName: "my-llama"})
	client := openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey("unused"))
	ctx := context.Background()
	params := openai.CompletionNewParams{
		Model:     "my-llama",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(20),
		Seed:      openai.Int(42),
	}
	stream := client.Completions.NewStreaming(ctx, params, option.WithJSONSet("ignore_eos", true))
	var streamed strings.Builder
	n := 0
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) > 0 && c.Choices[0].Text != "" {
			streamed.WriteString(c.Choices[0].Text)
			n++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 20 {
		t.Fatalf("ignore_eos: %d tokens, want exactly max_tokens 20", n)
	}
	resp, err := client.Completions.New(ctx, params, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Text != streamed.String() {
		t.Fatalf("same seed+prompt: unary %q vs streamed %q", resp.Choices[0].Text, streamed.String())
	}
	if resp.Usage.CompletionTokens != 20 || resp.Choices[0].FinishReason != "length" || resp.Model != "my-llama" {
		t.Fatalf("resp %+v", resp)
	}
	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "my-llama" {
		t.Fatalf("models %+v %v", models, err)
	}
}

func TestErrors(t *testing.T) {
	h := startHarness(t, Options{})
	big := `{"prompt":"` + strings.Repeat("a", engine.MaxRequestBytes) + `"}`
	tests := []struct {
		name, path, body string
		status           int
		typ, code        string
	}{
		{"malformed JSON", "/v1/completions", `{"prompt":`, 400, "invalid_request_error", ""},
		{"empty body", "/v1/chat/completions", ``, 400, "invalid_request_error", ""},
		{"oversized body", "/v1/completions", big, 400, "invalid_request_error", ""},
		{"missing prompt", "/v1/completions", `{"max_tokens":3}`, 400, "invalid_request_error", ""},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400, "invalid_request_error", ""},
		{"missing messages", "/v1/chat/completions", `{"model":"llama-3.1-8b"}`, 400, "invalid_request_error", ""},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, 400, "invalid_request_error", ""},
		{"n=2", "/v1/completions", `{"prompt":"hi","n":2}`, 400, "invalid_request_error", ""},
		{"max_tokens 0", "/v1/completions", `{"prompt":"hi","max_tokens":0}`, 400, "invalid_request_error", ""},
		{"context too long", "/v1/completions", `{"prompt":"hi","max_tokens":200000}`, 400, "invalid_request_error", ""},
		{"bad stop", "/v1/completions", `{"prompt":"hi","stop":7}`, 400, "invalid_request_error", ""},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "NotFoundError", "model_not_found"},
		{"invocations without inputs or messages", "/invocations", `{"foo":1}`, 400, "invalid_request_error", ""},
		{"invocations bad inputs", "/invocations", `{"inputs":5}`, 400, "invalid_request_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := h.post(t, tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, b)
			}
			var eb struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Message == "" || eb.Error.Type != tt.typ {
				t.Fatalf("body %s: want OpenAI error of type %s (%v)", b, tt.typ, err)
			}
			if tt.code != "" && (eb.Error.Code == nil || *eb.Error.Code != tt.code) {
				t.Fatalf("code %v, want %s", eb.Error.Code, tt.code)
			}
		})
	}
}

func TestQueueFullGives429(t *testing.T) {
	h := startHarness(t, Options{MaxNumSeqs: 1, MaxWaiting: 1, TimeScale: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"prompt":"hold the line","max_tokens":2000,"ignore_eos":true,"stream":true}`
	for i := range 2 {
		req, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/v1/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if i == 0 {
			// Wait for the first token so request 0 is running, not waiting.
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp, b := h.post(t, "/v1/completions", `{"prompt":"one too many"}`)
	if resp.StatusCode != 429 || !strings.Contains(string(b), "rate_limit") {
		t.Fatalf("status %d body %s, want 429", resp.StatusCode, b)
	}
	cancel() // clients leave: the engine must abort both
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams := h.metrics(t)
		if metricValue(fams, "vllm:request_success_total", map[string]string{"finished_reason": "abort"}) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("aborted requests not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInvocations(t *testing.T) {
	h := startHarness(t, Options{})
	t.Run("messages is OpenAI chat", func(t *testing.T) {
		resp, b := h.post(t, "/invocations", `{"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}],"max_tokens":3,"ignore_eos":true}`)
		var out struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || out.Object != "chat.completion" || out.Usage.CompletionTokens != 3 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})
	t.Run("inputs is TGI", func(t *testing.T) {
		resp, b := h.post(t, "/invocations", `{"inputs":"What is AI?","parameters":{"max_new_tokens":5,"seed":1,"ignore_eos":true}}`)
		var out []struct {
			GeneratedText string `json:"generated_text"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || len(out) != 1 || len(strings.Fields(out[0].GeneratedText)) != 5 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		t.Run("stream", func(t *testing.T) {
			resp, b := h.post(t, "/invocations", `{"inputs":"What is AI?","stream":true,"parameters":{"max_new_tokens":5,"seed":1,"ignore_eos":true}}`)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header)
			}
			type tgiEvent struct {
				Token struct {
					ID   int    `json:"id"`
					Text string `json:"text"`
				} `json:"token"`
				GeneratedText *string `json:"generated_text"`
			}
			var events []tgiEvent
			for _, line := range strings.Split(string(b), "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					var ev tgiEvent
					if err := json.Unmarshal([]byte(data), &ev); err != nil {
						t.Fatalf("bad event %q: %v", data, err)
					}
					events = append(events, ev)
				}
			}
			if len(events) != 5 {
				t.Fatalf("%d events, want 5:\n%s", len(events), b)
			}
			var joined strings.Builder
			for i, ev := range events {
				joined.WriteString(ev.Token.Text)
				if (ev.GeneratedText != nil) != (i == 4) {
					t.Fatalf("event %d generated_text %v; only the last carries it", i, ev.GeneratedText)
				}
			}
			if *events[4].GeneratedText != joined.String() || joined.String() != out[0].GeneratedText {
				t.Fatalf("generated_text %q, tokens %q, unary %q", *events[4].GeneratedText, joined.String(), out[0].GeneratedText)
			}
		})
	})
}

func TestRequestIDAndHealth(t *testing.T) {
	h := startHarness(t, Options{})
	req, _ := http.NewRequest("GET", h.url+"/health", nil)
	req.Header.Set("X-Request-Id", "abc-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "abc-123" {
		t.Fatalf("status %d id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	resp, _ = h.post(t, "/v1/completions", `{"prompt":"x","max_tokens":1}`)
	if resp.Header.Get("X-Request-Id") == "" {
		t.Fatal("no generated X-Request-Id")
	}
	for _, p := range []string{"/ping", "/health", "/v1/models", "/metrics"} {
		resp, err := http.Get(h.url + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, resp.StatusCode, err)
		}
		resp.Body.Close()
	}
}

func TestFaults(t *testing.T) {
	t.Run("fail-rate 1 answers 500 with OpenAI error", func(t *testing.T) {
		h := startHarness(t, Options{FailRate: 1})
		resp, b := h.post(t, "/v1/completions", `{"prompt":"x"}`)
		if resp.StatusCode != 500 || !strings.Contains(string(b), `"type":"server_error"`) {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})
	t.Run("fail-rate 0.5 fails some", func(t *testing.T) {
		h := startHarness(t, Options{FailRate: 0.5, Seed: 9})
		fails := 0
		for range 40 {
			resp, _ := h.post(t, "/v1/completions", `{"prompt":"x","max_tokens":1}`)
			if resp.StatusCode == 500 {
				fails++
			}
		}
		if fails < 8 || fails > 32 {
			t.Fatalf("%d of 40 failed at rate 0.5", fails)
		}
	})
	t.Run("startup-delay", func(t *testing.T) {
		const delay = time.Second
		start := time.Now()
		h := startHarness(t, Options{StartupDelay: delay})
		for _, p := range []string{"/health", "/ping"} {
			resp, err := http.Get(h.url + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Fatalf("%s during startup: %d, want 503", p, resp.StatusCode)
			}
		}
		if resp, _ := h.post(t, "/v1/completions", `{"prompt":"x"}`); resp.StatusCode != 503 {
			t.Fatalf("inference during startup: %d, want 503", resp.StatusCode)
		}
		for {
			resp, err := http.Get(h.url + "/health")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatal("never became healthy")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if el := time.Since(start); el < delay {
			t.Fatalf("healthy after %v, before the %v delay", el, delay)
		}
	})
}

func TestMetricsShapeAndNoDroppedUpdates(t *testing.T) {
	h := startHarness(t, Options{TimeScale: 0.01})
	const n = 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := i%2 == 0
			body := fmt.Sprintf(`{"prompt":%q,"max_tokens":8,"stream":%v}`, prompt(fmt.Sprint(i), 40), stream)
			resp, err := http.Post(h.url+"/v1/completions", "application/json", bytes.NewReader([]byte(body)))
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != n {
		t.Fatalf("%d of %d requests succeeded", ok, n)
	}
	fams := h.metrics(t)
	lbl := map[string]string{"model_name": "llama-3.1-8b", "engine": "0"}
	if got := metricValue(fams, "vllm:request_success_total", lbl); got != n {
		t.Errorf("request_success_total %v, want %d", got, n)
	}
	if got := metricValue(fams, "vllm:e2e_request_latency_seconds", lbl); got != n {
		t.Errorf("e2e observations %v, want %d", got, n)
	}
	if got := metricValue(fams, "vllm:prompt_tokens_total", lbl); got != n*40 {
		t.Errorf("prompt_tokens_total %v, want %d", got, n*40)
	}
	gen := metricValue(fams, "vllm:generation_tokens_total", lbl)
	itl := metricValue(fams, "vllm:inter_token_latency_seconds", lbl)
	if gen < n || itl != gen-n {
		t.Errorf("generation tokens %v, ITL observations %v: want ITL = tokens - requests", gen, itl)
	}
	for name, typ := range map[string]dto.MetricType{
		"vllm:num_requests_running": dto.MetricType_GAUGE, "vllm:num_requests_waiting": dto.MetricType_GAUGE,
		"vllm:kv_cache_usage_perc": dto.MetricType_GAUGE, "vllm:prefix_cache_queries_total": dto.MetricType_COUNTER,
		"vllm:prefix_cache_hits_total": dto.MetricType_COUNTER, "vllm:time_to_first_token_seconds": dto.MetricType_HISTOGRAM,
		"vllm:inter_token_latency_seconds": dto.MetricType_HISTOGRAM, "vllm:e2e_request_latency_seconds": dto.MetricType_HISTOGRAM,
		"vllm:request_queue_time_seconds": dto.MetricType_HISTOGRAM, "vllm:num_preemptions_total": dto.MetricType_COUNTER,
		"vllm:cache_config_info": dto.MetricType_GAUGE, "capstan_engine_kv_tier_hits_total": dto.MetricType_COUNTER,
		"capstan_engine_kv_tier_bytes_total": dto.MetricType_COUNTER,
	} {
		f, ok := fams[name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is %v, want %v", name, f.GetType(), typ)
		}
	}
	ttft := fams["vllm:time_to_first_token_seconds"].Metric[0].Histogram
	var bounds []float64
	for _, b := range ttft.Bucket {
		if !math.IsInf(b.GetUpperBound(), 1) {
			bounds = append(bounds, b.GetUpperBound())
		}
	}
	if fmt.Sprint(bounds) != fmt.Sprint(ttftBuckets) {
		t.Errorf("TTFT buckets %v differ from vLLM's %v", bounds, ttftBuckets)
	}
	cfg := fams["vllm:cache_config_info"].Metric[0]
	labels := map[string]string{}
	for _, l := range cfg.Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["block_size"] != "16" || labels["num_gpu_blocks"] != fmt.Sprint(h.e.NumGPUBlocks()) || labels["enable_prefix_caching"] != "True" {
		t.Errorf("cache_config_info labels %v", labels)
	}
}

func TestResetPrefixCacheEndpoint(t *testing.T) {
	h := startHarness(t, Options{})
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":1}`, prompt("rset", 200))
	cached := func() int {
		resp, b := h.post(t, "/v1/completions", body)
		var out struct{ Usage usage }
		if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return out.Usage.PromptTokensDetails.CachedTokens
	}
	if a, b := cached(), cached(); a != 0 || b != 192 {
		t.Fatalf("cached %d then %d, want 0 then 192", a, b)
	}
	if resp, _ := h.post(t, "/reset_prefix_cache", ""); resp.StatusCode != 200 {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	if c := cached(); c != 0 {
		t.Fatalf("cached %d after reset, want 0", c)
	}
}

// TestPlacementInfoLabelsTheSlice: the engine says what it runs on, so a
// dashboard can split replicas on MIG slices from whole-GPU ones.
func TestPlacementInfoLabelsTheSlice(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want map[string]string
	}{
		{"whole GPU", Options{}, map[string]string{"device": "gpu", "gpu": "h100", "mig_profile": "", "tensor_parallel": "1"}},
		{"MIG slice", Options{Model: "llama-3.1-8b", GPU: "h100", MIGProfile: "3g.40gb"}, map[string]string{"device": "gpu", "gpu": "h100", "mig_profile": "3g.40gb", "tensor_parallel": "1"}},
		{"CPU instance", Options{Model: "qwen2.5-0.5b", GPU: "ml.m5.xlarge"}, map[string]string{"device": "cpu", "gpu": "ml.m5.xlarge", "mig_profile": "", "tensor_parallel": "1"}},
		{"Inferentia2", Options{Model: "qwen2.5-0.5b", GPU: "inferentia2"}, map[string]string{"device": "accelerator", "gpu": "inferentia2", "mig_profile": "", "tensor_parallel": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, tc.o)
			f, ok := h.metrics(t)["capstan_engine_placement_info"]
			if !ok || len(f.Metric) != 1 {
				t.Fatalf("capstan_engine_placement_info: %v", f)
			}
			got := map[string]string{}
			for _, l := range f.Metric[0].Label {
				if _, want := tc.want[l.GetName()]; want {
					got[l.GetName()] = l.GetValue()
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("labels %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAPIKey: with an API key, every route but the health checks wants it
// as a bearer token, in OpenAI's error shape when it is missing or wrong.
func TestAPIKey(t *testing.T) {
	h := startHarness(t, Options{APIKey: "k-0123456789"})
	for _, tc := range []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/health", "", 200},
		{"GET", "/ping", "", 200},
		{"GET", "/metrics", "", 401},
		{"GET", "/v1/models", "", 401},
		{"POST", "/v1/completions", "", 401},
		{"POST", "/v1/completions", "Bearer wrong", 401},
		{"POST", "/v1/completions", "k-0123456789", 401}, // no scheme
		{"POST", "/invocations", "Bearer k-0123456789", 200},
		{"GET", "/metrics", "Bearer k-0123456789", 200},
	} {
		var body io.Reader
		if tc.method == "POST" {
			body = strings.NewReader(`{"model":"llama-3.1-8b","prompt":"hi","inputs":"hi","max_tokens":1,"parameters":{"max_new_tokens":1}}`)
		}
		req, err := http.NewRequest(tc.method, h.url+tc.path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s (%q): %d %s, want %d", tc.method, tc.path, tc.auth, resp.StatusCode, b, tc.want)
		}
		if tc.want == 401 && !strings.Contains(string(b), `"code":"invalid_api_key"`) {
			t.Errorf("%s %s: refusal %s, want OpenAI's invalid_api_key error", tc.method, tc.path, b)
		}
	}
}
