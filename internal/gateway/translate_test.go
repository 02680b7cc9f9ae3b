package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/engine/sim"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden")

// fakeEngine is an httptest server answering OpenAI /v1/completions the
// way llama-server (style "llamacpp") or vLLM (style "vllm") does, and
// recording every request it gets. Its text is the words of fakeWords, as
// many as max_tokens; a stop string equal to a word (trimmed) ends the text
// before it, and running out of words is the end-of-sequence token.
type fakeEngine struct {
	srv   *httptest.Server
	style string

	mu   sync.Mutex
	reqs []fakeRequest
}

type fakeRequest struct{ path, contentType, body string }

var fakeWords = []string{"The", " quick", ` "brown"`, " fox", "\n", " jumps"}

func newFakeEngine(t *testing.T, style string) *fakeEngine {
	t.Helper()
	f := &fakeEngine{style: style}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEngine) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeEngine) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.reqs...)
}

func (f *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeRequest{r.URL.Path, r.Header.Get("Content-Type"), string(body)})
	f.mu.Unlock()
	switch {
	case r.URL.Path == "/v1/completions":
		f.completions(w, body)
	case r.URL.Path == "/v1/chat/completions":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	case r.URL.Path == "/invocations" && f.style == "vllm":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"echo":%s}`, body)
	default: // llama-server has no /invocations
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
	}
}

func (f *fakeEngine) completions(w http.ResponseWriter, body []byte) {
	var req struct {
		Prompt        string `json:"prompt"`
		MaxTokens     int    `json:"max_tokens"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Stop []string `json:"stop"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch req.Prompt {
	case "fail400":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}`)
		return
	case "fail500":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"code":500,"message":"boom","type":"server_error"}}`)
		return
	}
	var words []string
	finish, stopReason := "stop", "null"
	for _, wd := range fakeWords {
		if len(words) == req.MaxTokens {
			finish = "length"
			break
		}
		if i := indexOf(req.Stop, strings.TrimSpace(wd)); i >= 0 && strings.TrimSpace(wd) != "" {
			b, _ := json.Marshal(req.Stop[i])
			stopReason = string(b)
			break
		}
		words = append(words, wd)
	}
	prompt := len(strings.Fields(req.Prompt))
	usage := fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d}`, len(words), prompt, len(words)+prompt)
	stopField := ""
	if f.style == "vllm" {
		stopField = `,"stop_reason":` + stopReason
	}
	if !req.Stream {
		text, _ := json.Marshal(strings.Join(words, ""))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":%s,"index":0,"logprobs":null,"finish_reason":%q%s}],"usage":%s}`,
			text, finish, stopField, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(text, fin, extra string) {
		t, _ := json.Marshal(text)
		fr := "null"
		if fin != "" {
			fr = `"` + fin + `"`
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":%s,\"index\":0,\"logprobs\":null,\"finish_reason\":%s%s}],\"created\":1,\"model\":\"m\",\"object\":\"text_completion\",\"id\":\"cmpl-1\"}\n\n", t, fr, extra)
		fl.Flush()
	}
	switch f.style {
	case "vllm":
		// The last token's chunk carries finish_reason; usage comes alone.
		for i, wd := range words {
			if i == len(words)-1 {
				chunk(wd, finish, stopField)
			} else {
				chunk(wd, "", ",\"stop_reason\":null")
			}
		}
		if len(words) == 0 {
			chunk("", finish, stopField)
		}
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\n", usage)
		}
	default:
		// llama-server: one chunk per token, then an empty one with the
		// finish reason and the usage.
		for _, wd := range words {
			chunk(wd, "", "")
		}
		t, _ := json.Marshal("")
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":%s,\"index\":0,\"logprobs\":null,\"finish_reason\":%q}],\"created\":1,\"model\":\"m\",\"object\":\"text_completion\",\"id\":\"cmpl-1\",\"usage\":%s,\"timings\":{\"predicted_n\":%d}}\n\n",
			t, finish, usage, len(words))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// echoEngine is the simulator's contract as the tests need it: it answers
// every path with what it got.
func echoEngine(t *testing.T) *fakeEngine {
	t.Helper()
	f := &fakeEngine{style: "sim"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, fakeRequest{r.URL.Path, r.Header.Get("Content-Type"), string(body)})
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "echo %s %s", r.URL.Path, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func TestDefaultMaxNewTokensIsTheSimulators(t *testing.T) {
	if defaultMaxNewTokens != sim.DefaultMaxTokensCompletion {
		t.Fatalf("defaultMaxNewTokens = %d, the simulator's default is %d", defaultMaxNewTokens, sim.DefaultMaxTokensCompletion)
	}
}

func TestTranslateRequest(t *testing.T) {
	tests := []struct {
		name, engine, path, body string
		wantPath, wantBody       string // wantPath "": forwarded as is
		wantTGI                  bool
		wantStatus               int // a local answer
		wantParam                string
	}{
		{name: "sim forwards everything", engine: "", path: "/invocations", body: `{"inputs":"hi"}`},
		{name: "sim by name", engine: "sim", path: "/invocations", body: `not json`},
		{name: "tgi forwards", engine: "tgi", path: "/invocations", body: `{"inputs":"hi"}`},
		{name: "other paths untouched", engine: "llamacpp", path: "/v1/completions", body: `{"prompt":"hi"}`},
		{name: "llamacpp chat", engine: "llamacpp", path: "/invocations", body: `{"messages":[{"role":"user","content":"hi"}]}`,
			wantPath: "/v1/chat/completions", wantBody: `{"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages wins over inputs", engine: "sglang", path: "/invocations", body: `{"inputs":"x","messages":[]}`,
			wantPath: "/v1/chat/completions", wantBody: `{"inputs":"x","messages":[]}`},
		{name: "llamacpp prompt", engine: "llamacpp", path: "/invocations", body: `{"prompt":"hi","max_tokens":3}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"hi","max_tokens":3}`},
		{name: "inputs defaults", engine: "llamacpp", path: "/invocations", body: `{"inputs":"<p>hi</p>"}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"<p>hi</p>","max_tokens":16,"temperature":0}`, wantTGI: true},
		{name: "inputs parameters", engine: "sglang", path: "/invocations",
			body:     `{"inputs":"hi","stream":true,"parameters":{"max_new_tokens":5,"stop":["\n",""],"seed":42,"temperature":0.7,"top_p":0.9,"top_k":40,"ignore_eos":true,"details":true,"repetition_penalty":1.1,"decoder_input_details":false}}`,
			wantPath: "/v1/completions", wantTGI: true,
			wantBody: `{"prompt":"hi","max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"stop":["\n"],"seed":42,"temperature":0.7,"top_p":0.9,"top_k":40,"ignore_eos":true}`},
		{name: "do_sample keeps the engine's sampling; llama.cpp is asked which stop matched", engine: "llamacpp", path: "/invocations", body: `{"inputs":"hi","parameters":{"do_sample":true,"stop":"x"}}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"hi","max_tokens":16,"stop":["x"],"verbose":true}`, wantTGI: true},
		{name: "vllm chat stays", engine: "vllm", path: "/invocations", body: `{"messages":[]}`},
		{name: "vllm prompt stays", engine: "vllm", path: "/invocations", body: `{"prompt":"hi"}`},
		{name: "vllm other bodies are its to refuse", engine: "vllm", path: "/invocations", body: `{"input":"embed me"}`},
		{name: "vllm inputs", engine: "vllm", path: "/invocations", body: `{"inputs":"hi","parameters":{"max_new_tokens":2}}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"hi","max_tokens":2,"temperature":0}`, wantTGI: true},
		{name: "null members do not count", engine: "llamacpp", path: "/invocations", body: `{"messages":null,"prompt":"hi"}`,
			wantPath: "/v1/completions", wantBody: `{"messages":null,"prompt":"hi"}`},

		{name: "inputs not a string", engine: "llamacpp", path: "/invocations", body: `{"inputs":["a","b"]}`, wantStatus: 400, wantParam: "inputs"},
		{name: "malformed JSON", engine: "llamacpp", path: "/invocations", body: `{"inputs":`, wantStatus: 400},
		{name: "malformed JSON for vllm", engine: "vllm", path: "/invocations", body: `{"inputs" "x"}`, wantStatus: 400},
		{name: "bad parameter type", engine: "vllm", path: "/invocations", body: `{"inputs":"x","parameters":{"max_new_tokens":"many"}}`, wantStatus: 400},
		{name: "max_new_tokens below one", engine: "llamacpp", path: "/invocations", body: `{"inputs":"x","parameters":{"max_new_tokens":0}}`,
			wantStatus: 400, wantParam: "parameters.max_new_tokens"},
		{name: "huge max_new_tokens is the engine's to refuse", engine: "llamacpp", path: "/invocations", body: `{"inputs":"x","parameters":{"max_new_tokens":2000000000}}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"x","max_tokens":2000000000,"temperature":0}`, wantTGI: true},
		{name: "too many stops", engine: "llamacpp", path: "/invocations", body: `{"inputs":"x","parameters":{"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}}`,
			wantStatus: 400, wantParam: "stop"},
		{name: "bad stop", engine: "llamacpp", path: "/invocations", body: `{"inputs":"x","parameters":{"stop":7}}`, wantStatus: 400, wantParam: "stop"},
		{name: "empty body", engine: "sglang", path: "/invocations", body: ` `, wantStatus: 400},
		{name: "not an object", engine: "sglang", path: "/invocations", body: `["inputs"]`, wantStatus: 400},
		{name: "no known member", engine: "llamacpp", path: "/invocations", body: `{"text":"hi"}`, wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := http.Header{"Content-Type": {"text/plain"}, "X-Amzn-Sagemaker-Custom-Attributes": {"a=b"}}
			inv := Invocation{Path: tt.path, Header: hdr, Body: []byte(tt.body)}
			tr := translate(tt.engine, tt.path, inv)
			if tt.wantStatus != 0 {
				if tr.local == nil {
					t.Fatalf("forwarded to %q; want a local %d", tr.path, tt.wantStatus)
				}
				checkLocalError(t, tr.local, tt.wantStatus, tt.wantParam)
				return
			}
			if tr.local != nil {
				b, _ := io.ReadAll(tr.local.Body)
				t.Fatalf("refused locally: %d %s", tr.local.StatusCode, b)
			}
			if tr.path != tt.wantPath {
				t.Fatalf("path = %q, want %q", tr.path, tt.wantPath)
			}
			if tt.wantPath == "" {
				return
			}
			if string(tr.body) != tt.wantBody {
				t.Fatalf("body = %s\nwant   %s", tr.body, tt.wantBody)
			}
			if (tr.tgi != nil) != tt.wantTGI {
				t.Fatalf("answer translated = %v, want %v", tr.tgi != nil, tt.wantTGI)
			}
			if ct := tr.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type = %q", ct)
			}
			if tr.header.Get("X-Amzn-Sagemaker-Custom-Attributes") != "a=b" {
				t.Fatal("other headers dropped")
			}
			if hdr.Get("Content-Type") != "text/plain" {
				t.Fatal("the caller's header was changed (a retry reads it again)")
			}
		})
	}
}

// checkLocalError checks a refusal has the simulator's error shape.
func checkLocalError(t *testing.T, resp *http.Response, status int, param string) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q; want %d application/json", resp.StatusCode, resp.Header.Get("Content-Type"), status)
	}
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
		t.Fatalf("error body %s (%v)", b, err)
	}
	got := ""
	if e.Error.Param != nil {
		got = *e.Error.Param
	}
	if got != param {
		t.Fatalf("param = %q, want %q (%s)", got, param, b)
	}
}

// TestTranslatedStreamGolden translates a recorded llama-server stream
// whole and one byte per read: the same TGI events either way.
func TestTranslatedStreamGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "llamacpp_completion_stream.txt"))
	if err != nil {
		t.Fatal(err)
	}
	translateAll := func(r io.Reader) []byte {
		s := &tgiStream{src: io.NopCloser(r), p: &tgiParams{}}
		out, err := io.ReadAll(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := translateAll(bytes.NewReader(in))
	if split := translateAll(iotest.OneByteReader(bytes.NewReader(in))); !bytes.Equal(split, got) {
		t.Fatalf("one byte per read gives\n%s\nwhole gives\n%s", split, got)
	}
	golden := filepath.Join("testdata", "tgi_stream.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("translated stream differs from %s:\n%s", golden, got)
	}
	// Every event is JSON, the texts add up to generated_text.
	events := tgiEvents(t, got)
	var text strings.Builder
	for _, e := range events {
		text.WriteString(e.Token.Text)
	}
	last := events[len(events)-1]
	if last.GeneratedText == nil || *last.GeneratedText != text.String() || text.String() != "Café \"quoted\"\n\ttabbed <tag> &  🚀" {
		t.Fatalf("generated_text %v, tokens add up to %q", last.GeneratedText, text.String())
	}
	if last.Details == nil || last.Details.GeneratedTokens != 6 || last.Details.InputLength != 5 || last.Details.FinishReason != "length" {
		t.Fatalf("details = %+v", last.Details)
	}
}

type tgiEvent struct {
	Index int `json:"index"`
	Token struct {
		ID      int     `json:"id"`
		Text    string  `json:"text"`
		Logprob float64 `json:"logprob"`
		Special bool    `json:"special"`
	} `json:"token"`
	GeneratedText *string `json:"generated_text"`
	Details       *struct {
		FinishReason    string  `json:"finish_reason"`
		GeneratedTokens int     `json:"generated_tokens"`
		InputLength     int     `json:"input_length"`
		Seed            *uint64 `json:"seed"`
	} `json:"details"`
}

// tgiEvents parses a TGI stream: only data events, each separated by a
// blank line; only the last carries generated_text and details.
func tgiEvents(t *testing.T, stream []byte) []tgiEvent {
	t.Helper()
	var out []tgiEvent
	raw := strings.TrimSuffix(string(stream), "\n\n")
	for _, ev := range strings.Split(raw, "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("not one data line: %q", ev)
		}
		var e tgiEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		out = append(out, e)
	}
	for i, e := range out {
		if last := i == len(out)-1; (e.GeneratedText != nil) != last || (e.Details != nil) != last {
			t.Fatalf("event %d of %d: generated_text %v details %v", i, len(out), e.GeneratedText, e.Details)
		}
		if e.Index != i {
			t.Fatalf("event %d has index %d", i, e.Index)
		}
	}
	return out
}

func TestTranslatedStreamEdges(t *testing.T) {
	const tok = `data: {"choices":[{"text":"a","index":0,"finish_reason":null}]}` + "\n\n"
	tests := []struct {
		name    string
		in      string
		p       tgiParams
		want    string // the output, exactly
		wantErr error  // errors.Is
		errText string
	}{
		{name: "cut before the finish", in: tok + tok, wantErr: io.ErrUnexpectedEOF,
			want: `data: {"index":0,"token":{"id":0,"text":"a","logprob":0.0,"special":false},"generated_text":null,"details":null}` + "\n\n" +
				`data: {"index":1,"token":{"id":0,"text":"a","logprob":0.0,"special":false},"generated_text":null,"details":null}` + "\n\n"},
		{name: "finish without [DONE] or usage; CRLF lines", in: strings.ReplaceAll(tok, "\n", "\r\n") + `data: {"choices":[{"text":"b","index":0,"finish_reason":"stop"}]}`,
			p: tgiParams{inputs: "Q: "},
			want: `data: {"index":0,"token":{"id":0,"text":"a","logprob":0.0,"special":false},"generated_text":null,"details":null}` + "\n\n" +
				`data: {"index":1,"token":{"id":0,"text":"b","logprob":0.0,"special":false},"generated_text":"Q: ab","details":{"finish_reason":"eos_token","generated_tokens":2,"input_length":0,"seed":null}}` + "\n\n"},
		{name: "no token at all", in: `data: {"choices":[{"text":"","index":0,"finish_reason":"stop","matched_stop":"###"}]}` + "\n\ndata: [DONE]\n\n",
			want: `data: {"index":0,"token":{"id":0,"text":"","logprob":0.0,"special":true},"generated_text":"","details":{"finish_reason":"stop_sequence","generated_tokens":0,"input_length":0,"seed":null}}` + "\n\n"},
		{name: "engine error mid-stream passes through", in: tok + `data: {"error":{"code":500,"message":"slot crashed","type":"server_error"}}` + "\n\n",
			want: `data: {"index":0,"token":{"id":0,"text":"a","logprob":0.0,"special":false},"generated_text":null,"details":null}` + "\n\n" +
				`data: {"error":{"code":500,"message":"slot crashed","type":"server_error"}}` + "\n\n"},
		{name: "llama.cpp says a stop string matched", p: tgiParams{stop: []string{"###"}},
			in:   `data: {"choices":[{"text":"","index":0,"finish_reason":"stop"}],"__verbose":{"stop":true,"stop_type":"word","stopping_word":"###"}}` + "\n\ndata: [DONE]\n\n",
			want: `data: {"index":0,"token":{"id":0,"text":"","logprob":0.0,"special":true},"generated_text":"","details":{"finish_reason":"stop_sequence","generated_tokens":0,"input_length":0,"seed":null}}` + "\n\n"},
		{name: "llama.cpp says end of sequence", p: tgiParams{stop: []string{"###"}},
			in:   `data: {"choices":[{"text":"","index":0,"finish_reason":"stop"}],"__verbose":{"stop":true,"stop_type":"eos","stopping_word":""}}` + "\n\ndata: [DONE]\n\n",
			want: `data: {"index":0,"token":{"id":0,"text":"","logprob":0.0,"special":true},"generated_text":"","details":{"finish_reason":"eos_token","generated_tokens":0,"input_length":0,"seed":null}}` + "\n\n"},
		{name: "not JSON", in: "data: {nope\n\n", errText: "not an OpenAI completion chunk"},
		{name: "one endless line is bounded", in: "data: " + strings.Repeat("x", maxStreamLine+10), errText: "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &tgiStream{src: io.NopCloser(strings.NewReader(tt.in)), p: &tt.p}
			got, err := io.ReadAll(s)
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			case tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText)):
				t.Fatalf("err = %v, want one saying %q", err, tt.errText)
			case tt.wantErr == nil && tt.errText == "" && err != nil:
				t.Fatal(err)
			}
			if tt.errText == "" && string(got) != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
			if cap(s.line) > 2*maxStreamLine { // append's growth over the bound on its length
				t.Fatalf("line buffer grew to %d bytes", cap(s.line))
			}
		})
	}
}

func TestAppendJSONText(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "\n\r\t\x00\x1f\x7f", "é🚀", "bad\xffutf8\xc3", "\u2028\u2029", "<&>"} {
		var got, want string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, appendJSONString(nil, s), err)
		}
		b, _ := json.Marshal(s)
		_ = json.Unmarshal(b, &want)
		if got != want {
			t.Fatalf("%q round-trips to %q, encoding/json's to %q", s, got, want)
		}
	}
}

// invokeAll sends body through g and returns the status, Content-Type and
// whole answer.
func invokeAll(t *testing.T, g *Gateway, body string) (*Result, string) {
	t.Helper()
	res, err := g.Invoke(context.Background(), Invocation{Endpoint: "ep", Path: "/invocations",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Response.Body.Close()
	b, err := io.ReadAll(res.Response.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func oneBackend(engine, addr string) Route {
	return Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "A", Weight: 1, Backends: []Backend{{ID: "r1", Addr: addr, Engine: engine}}}}}
}

// TestGatewayTranslates sends SageMaker bodies through a real Gateway to
// backends of each engine and checks what the engine got and what the
// client gets.
func TestGatewayTranslates(t *testing.T) {
	const tokenEvent = `data: {"index":%d,"token":{"id":0,"text":%s,"logprob":0.0,"special":false},"generated_text":null,"details":null}` + "\n\n"
	tests := []struct {
		name, engine, body string
		wantPath, wantBody string // what the engine got; wantPath "": nothing
		wantStatus         int
		wantCT             string
		want               string // the client's answer, exactly ("": not checked)
		check              func(t *testing.T, answer string)
	}{
		{name: "llamacpp unary", engine: "llamacpp", body: `{"inputs":"Say hi","parameters":{"max_new_tokens":3}}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"Say hi","max_tokens":3,"temperature":0}`,
			wantStatus: 200, wantCT: "application/json", want: `[{"generated_text":"The quick \"brown\""}]` + "\n"},
		{name: "llamacpp unary details", engine: "llamacpp",
			body:       `{"inputs":"Say hi","parameters":{"max_new_tokens":10,"stop":["fox"],"details":true,"seed":7,"temperature":0.5}}`,
			wantPath:   "/v1/completions",
			wantBody:   `{"prompt":"Say hi","max_tokens":10,"stop":["fox"],"seed":7,"temperature":0.5,"verbose":true}`,
			wantStatus: 200, wantCT: "application/json",
			// This answer has no "__verbose" saying a stop string matched
			// (TestTranslatedUnaryStop has those), and its text holds none.
			want: `[{"generated_text":"The quick \"brown\"","details":{"finish_reason":"eos_token","generated_tokens":3,"seed":null,"prefill":[],"tokens":[]}}]` + "\n"},
		{name: "llamacpp return_full_text", engine: "llamacpp", body: `{"inputs":"Q:","parameters":{"max_new_tokens":1,"return_full_text":true}}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"Q:","max_tokens":1,"temperature":0}`,
			wantStatus: 200, want: `[{"generated_text":"Q:The"}]` + "\n"},
		{name: "llamacpp stream", engine: "llamacpp", body: `{"inputs":"Say hi","stream":true,"parameters":{"max_new_tokens":2}}`,
			wantPath:   "/v1/completions",
			wantBody:   `{"prompt":"Say hi","max_tokens":2,"stream":true,"stream_options":{"include_usage":true},"temperature":0}`,
			wantStatus: 200, wantCT: "text/event-stream",
			want: fmt.Sprintf(tokenEvent, 0, `"The"`) + fmt.Sprintf(tokenEvent, 1, `" quick"`) +
				`data: {"index":2,"token":{"id":0,"text":"","logprob":0.0,"special":true},"generated_text":"The quick","details":{"finish_reason":"length","generated_tokens":2,"input_length":2,"seed":null}}` + "\n\n"},
		{name: "llamacpp chat goes to its route untouched", engine: "llamacpp", body: `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`,
			wantPath: "/v1/chat/completions", wantBody: `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`,
			wantStatus: 200, wantCT: "application/json",
			want: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`},
		{name: "llamacpp prompt goes to its route untouched", engine: "llamacpp", body: `{"prompt":"Say hi","max_tokens":1}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"Say hi","max_tokens":1}`, wantStatus: 200,
			check: func(t *testing.T, answer string) {
				if !strings.Contains(answer, `"object":"text_completion"`) {
					t.Fatalf("OpenAI answer changed: %s", answer)
				}
			}},
		{name: "llamacpp engine 4xx passes through", engine: "llamacpp", body: `{"inputs":"fail400"}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"fail400","max_tokens":16,"temperature":0}`,
			wantStatus: 400, wantCT: "application/json",
			want: `{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}`},
		{name: "llamacpp bad inputs refused before the engine", engine: "llamacpp", body: `{"inputs":{"text":"hi"}}`,
			wantStatus: 400, wantCT: "application/json",
			want: `{"error":{"message":"inputs must be a string","type":"invalid_request_error","param":"inputs","code":null}}` + "\n"},
		{name: "sim gets /invocations untouched", engine: "", body: `{"inputs":"Say hi","parameters":{"max_new_tokens":3}}`,
			wantPath: "/invocations", wantBody: `{"inputs":"Say hi","parameters":{"max_new_tokens":3}}`, wantStatus: 200,
			want: `echo /invocations {"inputs":"Say hi","parameters":{"max_new_tokens":3}}`},
		{name: "vllm chat goes to /invocations", engine: "vllm", body: `{"messages":[{"role":"user","content":"hi"}]}`,
			wantPath: "/invocations", wantBody: `{"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 200,
			want: `{"echo":{"messages":[{"role":"user","content":"hi"}]}}`},
		{name: "vllm inputs are translated", engine: "vllm", body: `{"inputs":"Say hi","parameters":{"stop":"fox","details":true}}`,
			wantPath: "/v1/completions", wantBody: `{"prompt":"Say hi","max_tokens":16,"stop":["fox"],"temperature":0}`,
			wantStatus: 200, wantCT: "application/json",
			want: `[{"generated_text":"The quick \"brown\"","details":{"finish_reason":"stop_sequence","generated_tokens":3,"seed":null,"prefill":[],"tokens":[]}}]` + "\n"},
		{name: "vllm stream: the finishing token is the last event", engine: "vllm", body: `{"inputs":"Say hi","stream":true,"parameters":{"stop":["fox"]}}`,
			wantPath:   "/v1/completions",
			wantBody:   `{"prompt":"Say hi","max_tokens":16,"stream":true,"stream_options":{"include_usage":true},"stop":["fox"],"temperature":0}`,
			wantStatus: 200, wantCT: "text/event-stream",
			want: fmt.Sprintf(tokenEvent, 0, `"The"`) + fmt.Sprintf(tokenEvent, 1, `" quick"`) +
				`data: {"index":2,"token":{"id":0,"text":" \"brown\"","logprob":0.0,"special":false},"generated_text":"The quick \"brown\"","details":{"finish_reason":"stop_sequence","generated_tokens":3,"input_length":2,"seed":null}}` + "\n\n"},
		{name: "vllm end of sequence", engine: "vllm", body: `{"inputs":"Say hi","parameters":{"details":true}}`,
			wantPath: "/v1/completions", wantStatus: 200,
			check: func(t *testing.T, answer string) {
				if !strings.Contains(answer, `"finish_reason":"eos_token","generated_tokens":6`) {
					t.Fatalf("answer %s", answer)
				}
			}},
		{name: "sglang no route for other bodies", engine: "sglang", body: `{"text":"hi"}`,
			wantStatus: 400, wantCT: "application/json",
			want: `{"error":{"message":"body must have \"messages\" (OpenAI chat) or \"inputs\" (TGI style)","type":"invalid_request_error","param":null,"code":null}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f *fakeEngine
			switch tt.engine {
			case "", "sim":
				f = echoEngine(t)
			case "vllm":
				f = newFakeEngine(t, "vllm")
			default:
				f = newFakeEngine(t, "llamacpp")
			}
			g := New(Options{Seed: 1})
			g.SetRoute(oneBackend(tt.engine, f.addr()))
			res, answer := invokeAll(t, g, tt.body)
			reqs := f.requests()
			switch {
			case tt.wantPath == "" && len(reqs) > 0:
				t.Fatalf("the engine got %+v", reqs)
			case tt.wantPath != "" && len(reqs) != 1:
				t.Fatalf("the engine got %d requests, want 1", len(reqs))
			case tt.wantPath != "":
				if reqs[0].path != tt.wantPath || (tt.wantBody != "" && reqs[0].body != tt.wantBody) {
					t.Fatalf("engine got %s %s\nwant        %s %s", reqs[0].path, reqs[0].body, tt.wantPath, tt.wantBody)
				}
			}
			resp := res.Response
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.wantStatus, answer)
			}
			if tt.wantCT != "" && resp.Header.Get("Content-Type") != tt.wantCT {
				t.Fatalf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tt.wantCT)
			}
			if resp.ContentLength >= 0 && resp.ContentLength != int64(len(answer)) {
				t.Fatalf("Content-Length %d for a %d-byte answer", resp.ContentLength, len(answer))
			}
			if cl := resp.Header.Get("Content-Length"); cl != "" && cl != fmt.Sprint(len(answer)) {
				t.Fatalf("Content-Length header %s for a %d-byte answer", cl, len(answer))
			}
			if tt.want != "" && answer != tt.want {
				t.Fatalf("answer\n%s\nwant\n%s", answer, tt.want)
			}
			if tt.check != nil {
				tt.check(t, answer)
			}
			if resp.Header.Get("Content-Type") == "text/event-stream" {
				tgiEvents(t, []byte(answer))
			}
			if n := g.InFlight("r1"); n != 0 {
				t.Fatalf("in flight after the answer = %d", n)
			}
		})
	}
}

// TestTranslateRetriesPerEngine: a retry is translated for the backend it
// reaches, from the caller's request.
func TestTranslateRetriesPerEngine(t *testing.T) {
	llama := newFakeEngine(t, "llamacpp")
	fail := &fakeEngine{}
	fail.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fail.mu.Lock()
		fail.reqs = append(fail.reqs, fakeRequest{r.URL.Path, r.Header.Get("Content-Type"), string(body)})
		fail.mu.Unlock()
		http.Error(w, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(fail.srv.Close)
	sim := echoEngine(t)
	const body = `{"inputs":"Say hi","parameters":{"max_new_tokens":1}}`

	g := New(Options{Seed: 1})
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin", Backends: []Backend{
		{ID: "llama-loading", Addr: fail.addr(), Engine: "llamacpp"}, {ID: "sim", Addr: sim.addr()}}}}})
	res, answer := invokeAll(t, g, body)
	if res.BackendID != "sim" || answer != "echo /invocations "+body {
		t.Fatalf("%s answered %q", res.BackendID, answer)
	}
	if r := fail.requests(); len(r) != 1 || r[0].path != "/v1/completions" || !strings.Contains(r[0].body, `"prompt":"Say hi"`) {
		t.Fatalf("the llama.cpp backend got %+v", r)
	}

	// And the other way round: the simulator fails, llama.cpp answers.
	g = New(Options{Seed: 1})
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin", Backends: []Backend{
		{ID: "sim-loading", Addr: fail.addr()}, {ID: "llama", Addr: llama.addr(), Engine: "llamacpp"}}}}})
	res, answer = invokeAll(t, g, body)
	if res.BackendID != "llama" || answer != `[{"generated_text":"The"}]`+"\n" {
		t.Fatalf("%s answered %q", res.BackendID, answer)
	}
	if r := fail.requests(); len(r) != 2 || r[1].path != "/invocations" || r[1].body != body {
		t.Fatalf("the simulator backend got %+v", r[1:])
	}
}

// TestTranslatedStreamMeasured: the gateway's recorder reads the
// translated stream as it reads the simulator's TGI stream: a time to first
// token, inter-token gaps, and the token counts from the last event.
func TestTranslatedStreamMeasured(t *testing.T) {
	f := newFakeEngine(t, "llamacpp")
	reg := prometheus.NewRegistry()
	g := New(Options{Seed: 1, Registerer: reg})
	g.SetRoute(oneBackend("llamacpp", f.addr()))
	inv := Invocation{Endpoint: "ep", Path: "/invocations", Body: []byte(`{"inputs":"one two three","stream":true,"parameters":{"max_new_tokens":4}}`)}
	res, err := g.Invoke(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	obs := g.Measure(inv, res)
	buf := make([]byte, 7) // events split across reads
	for {
		n, err := res.Response.Body.Read(buf)
		obs.StreamChunk(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	res.Response.Body.Close()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "direction" {
					key += "/" + l.GetValue()
				}
			}
			switch {
			case m.GetHistogram() != nil:
				got[key] = float64(m.GetHistogram().GetSampleCount())
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			}
		}
	}
	// 4 tokens and llama-server's closing event: 1 first token, 4 gaps (as
	// the engine's own OpenAI stream counts, its empty finishing chunk too).
	want := map[string]float64{"capstan_gateway_time_to_first_token_seconds": 1, "capstan_gateway_inter_token_latency_seconds": 4,
		"capstan_gateway_tokens_total/in": 3, "capstan_gateway_tokens_total/out": 4}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// TestTranslationMatchesSimulator: the simulated engine serves both
// /invocations (TGI answers) and /v1/completions, so the same TGI request
// answered natively and through the translation must say the same.
func TestTranslationMatchesSimulator(t *testing.T) {
	e, err := sim.NewEngine(sim.Options{Model: "llama-3.1-8b", GPU: "h100", TimeScale: 0.01}, sim.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	hs := httptest.NewServer(sim.NewServer(e))
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	addr := strings.TrimPrefix(hs.URL, "http://")

	native, translated := New(Options{Seed: 1}), New(Options{Seed: 1})
	native.SetRoute(oneBackend("", addr))
	translated.SetRoute(oneBackend("llamacpp", addr))
	// A stop string the engine will meet: a word of its answer without one.
	_, first := invokeAll(t, native, `{"inputs":"The capital of France is","parameters":{"max_new_tokens":12}}`)
	var plain []struct {
		GeneratedText string `json:"generated_text"`
	}
	if err := json.Unmarshal([]byte(first), &plain); err != nil || len(plain) != 1 || len(strings.Fields(plain[0].GeneratedText)) < 4 {
		t.Fatalf("native answer %s (%v)", first, err)
	}
	stop := strings.Fields(plain[0].GeneratedText)[2]
	for _, body := range []string{
		`{"inputs":"The capital of France is","parameters":{"max_new_tokens":12,"details":true,"seed":3}}`,
		`{"inputs":"Tell me a story","parameters":{"details":true}}`,
		`{"inputs":"The capital of France is","parameters":{"max_new_tokens":12,"details":true,"stop":["` + stop + `"]}}`,
	} {
		_, want := invokeAll(t, native, body)
		_, got := invokeAll(t, translated, body)
		var w, g []struct {
			GeneratedText string `json:"generated_text"`
			Details       struct {
				FinishReason    string `json:"finish_reason"`
				GeneratedTokens int    `json:"generated_tokens"`
			} `json:"details"`
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatalf("native %s: %v", want, err)
		}
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			t.Fatalf("translated %s: %v", got, err)
		}
		if len(g) != 1 || len(w) != 1 || g[0] != w[0] || w[0].GeneratedText == "" {
			t.Fatalf("translated %+v, native %+v", g, w)
		}
		t.Logf("%s → %+v", body, w[0])

		stream := strings.Replace(body, "{", `{"stream":true,`, 1)
		_, want = invokeAll(t, native, stream)
		_, got = invokeAll(t, translated, stream)
		we, ge := tgiEvents(t, []byte(want)), tgiEvents(t, []byte(got))
		wl, gl := we[len(we)-1], ge[len(ge)-1]
		if *gl.GeneratedText != *wl.GeneratedText || *gl.Details != *wl.Details {
			t.Fatalf("translated stream ends %s %+v, native %s %+v", *gl.GeneratedText, *gl.Details, *wl.GeneratedText, *wl.Details)
		}
		var wt, gt strings.Builder
		for _, e := range we {
			wt.WriteString(e.Token.Text)
		}
		for _, e := range ge {
			gt.WriteString(e.Token.Text)
		}
		if wt.String() != gt.String() {
			t.Fatalf("token texts add up to %q, natively %q", gt.String(), wt.String())
		}
	}
}

// TestLocalAnswerLeavesHealthAlone: a request refused before it reached
// the backend says nothing about the backend.
func TestLocalAnswerLeavesHealthAlone(t *testing.T) {
	f := newFakeEngine(t, "llamacpp")
	g := New(Options{Seed: 1, EjectAfter: 2, EjectFor: time.Hour})
	g.SetRoute(oneBackend("llamacpp", f.addr()))
	g.failed("r1")
	res, _ := invokeAll(t, g, `{"inputs":7}`)
	if res.Response.StatusCode != 400 {
		t.Fatalf("status %d", res.Response.StatusCode)
	}
	g.failed("r1") // the second consecutive failure ejects
	if _, ejected := g.BackendStats("r1"); !ejected {
		t.Fatal("the refusal reset the backend's failure count")
	}
}

// TestTranslateCostsNothingForTheSimulator: the common path allocates
// nothing for the translation.
func TestTranslateCostsNothingForTheSimulator(t *testing.T) {
	inv := Invocation{Path: "/invocations", Body: []byte(`{"inputs":"hi","parameters":{"max_new_tokens":4}}`)}
	if n := testing.AllocsPerRun(100, func() {
		if tr := translate("", "/invocations", inv); tr.path != "" || tr.local != nil {
			t.Fatal("translated for the simulator")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// TestTranslatedUnaryStop: a unary answer's finish reason in TGI's words,
// from what the engine says matched (llama.cpp's "__verbose", vLLM's
// stop_reason) or, failing that, from the text.
func TestTranslatedUnaryStop(t *testing.T) {
	tests := []struct{ name, answer, want string }{
		{"llama.cpp stop string", `{"choices":[{"text":"ab","finish_reason":"stop"}],"__verbose":{"stop_type":"word","stopping_word":"###"}}`, "stop_sequence"},
		{"llama.cpp end of sequence", `{"choices":[{"text":"ab","finish_reason":"stop"}],"__verbose":{"stop_type":"eos"}}`, "eos_token"},
		{"llama.cpp without verbose", `{"choices":[{"text":"ab","finish_reason":"stop"}]}`, "eos_token"},
		{"vLLM stop_reason", `{"choices":[{"text":"ab","finish_reason":"stop","stop_reason":"###"}]}`, "stop_sequence"},
		{"length", `{"choices":[{"text":"ab","finish_reason":"length"}],"__verbose":{"stop_type":"limit"}}`, "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &tgiUnary{src: io.NopCloser(strings.NewReader(tt.answer)), p: &tgiParams{details: true, stop: []string{"###"}}}
			out, err := io.ReadAll(u)
			if err != nil {
				t.Fatal(err)
			}
			var got []struct {
				Details struct {
					FinishReason string `json:"finish_reason"`
				} `json:"details"`
			}
			if err := json.Unmarshal(out, &got); err != nil || len(got) != 1 || got[0].Details.FinishReason != tt.want {
				t.Fatalf("answer %s (%v), want finish_reason %s", out, err, tt.want)
			}
		})
	}
}
