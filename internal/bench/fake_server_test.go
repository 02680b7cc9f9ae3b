package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/capstan-dev/capstan/internal/awsauth"
	"github.com/capstan-dev/capstan/internal/kv"
)

// fakeServer is a small OpenAI-compatible engine for tests: it streams
// max_tokens chunks with a fixed gap after a fixed first-token delay, reports
// usage with a prefix cache over 16-token blocks, counts what it served in
// vLLM-named /metrics, and serves the SageMaker streaming route too.
type fakeServer struct {
	*httptest.Server
	ttft, itl time.Duration
	failEvery int // every n-th request gets a 500 (0: never)

	mu       sync.Mutex
	n        int
	bodies   []string
	sessions []string
	blocks   map[kv.BlockHash]bool
	prompt   int
	gen      int
	hits     int
	queries  int
	ttftSum  float64
	ttftN    int
	success  int
}

const fakeBlock = 16

func newFakeServer(t testing.TB, ttft, itl time.Duration) *fakeServer {
	f := &fakeServer{ttft: ttft, itl: itl, blocks: map[kv.BlockHash]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, false, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, true, false) })
	// capstan's own SigV4 verifier, with the credentials and region runOK sets.
	v := &awsauth.Verifier{Secrets: map[string]string{"AKIDEXAMPLE": "secret"}, Region: "us-east-1"}
	mux.Handle("POST /endpoints/{name}/invocations-response-stream", v.Middleware(awsauth.Scope{Service: "sagemaker", MaxBodyBytes: 6_291_456},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, true, true) })))
	mux.HandleFunc("GET /metrics", f.metrics)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request, chat, sagemaker bool) {
	arrival := time.Now()
	raw, _ := io.ReadAll(r.Body)
	var body openAIBody
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	prompt := body.Prompt
	if chat {
		msgs := make([]kv.Message, len(body.Messages))
		for i, m := range body.Messages {
			msgs[i] = kv.Message{Role: m.Role, Content: m.Content}
		}
		prompt = kv.ChatPrompt(msgs)
	}
	toks := kv.Tokenize(prompt)
	hashes := kv.BlockHashes(kv.RootHash(body.Model), toks, fakeBlock)
	f.mu.Lock()
	f.n++
	n := f.n
	f.bodies = append(f.bodies, string(raw))
	f.sessions = append(f.sessions, r.Header.Get("X-Session-Id")+"|"+body.User)
	cached := 0
	for _, h := range hashes {
		if !f.blocks[h] {
			break
		}
		cached += fakeBlock
	}
	for _, h := range hashes {
		f.blocks[h] = true
	}
	f.mu.Unlock()
	if f.failEvery > 0 && n%f.failEvery == 0 {
		http.Error(w, `{"error":{"message":"injected"}}`, http.StatusInternalServerError)
		return
	}
	var out io.Writer = w
	var es *eventstream.Encoder
	if sagemaker {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		es = eventstream.NewEncoder()
		out = writerFunc(func(p []byte) (int, error) {
			msg := eventstream.Message{Payload: p}
			msg.Headers.Set(":event-type", eventstream.StringValue("PayloadPart"))
			msg.Headers.Set(":content-type", eventstream.StringValue("application/octet-stream"))
			msg.Headers.Set(":message-type", eventstream.StringValue("event"))
			return len(p), es.Encode(w, msg)
		})
	} else {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	fl := w.(http.Flusher)
	time.Sleep(f.ttft)
	f.mu.Lock()
	f.ttftSum += time.Since(arrival).Seconds()
	f.ttftN++
	f.mu.Unlock()
	for i := range body.MaxTokens {
		if i > 0 {
			time.Sleep(f.itl)
		}
		var c string
		if chat {
			c = fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":"t%d "}}]}`, i)
		} else {
			c = fmt.Sprintf(`{"choices":[{"index":0,"text":"t%d "}]}`, i)
		}
		if sagemaker && i%2 == 1 {
			// Split a frame mid-line: PayloadPart boundaries are arbitrary.
			line := "data: " + c + "\n\n"
			_, _ = io.WriteString(out, line[:7])
			_, _ = io.WriteString(out, line[7:])
		} else {
			fmt.Fprintf(out, "data: %s\n\n", c)
		}
		fl.Flush()
	}
	// Count before the response ends, as an engine does, so a scrape right
	// after the client sees the end includes this request.
	f.mu.Lock()
	f.prompt += len(toks)
	f.gen += body.MaxTokens
	f.hits += cached
	f.queries += len(toks)
	f.success++
	f.mu.Unlock()
	fmt.Fprintf(out, `data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`+"\n\n", len(toks), body.MaxTokens, cached)
	if !sagemaker {
		fmt.Fprint(out, "data: [DONE]\n\n")
	}
	fl.Flush()
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

func (f *fakeServer) metrics(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{model_name=\"m\",engine=\"0\"} %d\n", f.prompt)
	fmt.Fprintf(&b, "vllm:generation_tokens_total{model_name=\"m\",engine=\"0\"} %d\n", f.gen)
	fmt.Fprintf(&b, "vllm:prefix_cache_hits_total{model_name=\"m\"} %d\nvllm:prefix_cache_queries_total{model_name=\"m\"} %d\n", f.hits, f.queries)
	fmt.Fprintf(&b, "vllm:external_prefix_cache_hits_total{model_name=\"m\"} 12345\n")
	fmt.Fprintf(&b, "vllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} %d\n", f.success)
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} %d\n", f.ttftN)
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} %g\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} %d\n", f.ttftSum, f.ttftN)
	_, _ = w.Write(b.Bytes())
}

func (f *fakeServer) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}
