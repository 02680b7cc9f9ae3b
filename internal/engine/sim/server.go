package sim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/engine"
	"github.com/capstan-dev/capstan/internal/kv"
)

// Server is the engine's HTTP front: OpenAI completions and chat, the
// SageMaker container contract (/invocations, /ping), health and metrics.
type Server struct {
	e        *Engine
	opts     Options
	clk      clock.Clock
	start    time.Time
	reqSeq   atomic.Uint64
	done     atomic.Int64 // completed generation requests
	crash    chan struct{}
	crashOne sync.Once
	mux      *http.ServeMux
}

// NewServer builds the HTTP handler for e.
func NewServer(e *Engine) *Server {
	s := &Server{e: e, opts: e.opts, clk: e.clk, start: e.clk.Now(), crash: make(chan struct{}), mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("POST /invocations", s.handleInvocations)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("POST /reset_prefix_cache", s.handleReset)
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /ping", s.handlePing)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(e.metrics.Registry, promhttp.HandlerOpts{}))
	return s
}

// Crashed is closed when --crash-after-requests is reached.
func (s *Server) Crashed() <-chan struct{} { return s.crash }

// ServeHTTP echoes (or assigns) X-Request-Id, checks the API key and
// dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 256 {
		id = "req-" + strconv.FormatUint(uint64(s.start.UnixNano()), 36) + "-" + strconv.FormatUint(s.reqSeq.Add(1), 36)
	}
	w.Header().Set("X-Request-Id", id)
	if !s.authorized(r) {
		writeError(w, errUnauthorized)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized: with an API key set (Options.APIKey), every request but the
// health checks (/health, /ping: the runtime's probe and SageMaker's) must
// carry it as a bearer token, as llama-server's --api-key asks.
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.APIKey == "" || r.URL.Path == "/health" || r.URL.Path == "/ping" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.APIKey)) == 1
}

func (s *Server) ready() bool { return s.clk.Now().Sub(s.start) >= s.opts.StartupDelay }

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if !s.ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// handleReset is vLLM's POST /reset_prefix_cache.
func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.e.ResetPrefixCache()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handlePing(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if !s.ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"loading"}`)
		return
	}
	_, _ = io.WriteString(w, `{"status":"healthy"}`)
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		MaxModelLen int    `json:"max_model_len"`
	}
	body := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{s.opts.ServedModelName, "model", s.start.Unix(), "capstan", s.e.model.ID, s.e.maxLen}}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// readBody reads at most engine.MaxRequestBytes; a larger body is a 400.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, engine.MaxRequestBytes+1))
	if err != nil {
		return nil, invalid("", "reading request body: %v", err)
	}
	if len(b) > engine.MaxRequestBytes {
		return nil, invalid("", "request body exceeds the %d-byte limit", engine.MaxRequestBytes)
	}
	return b, nil
}

// oaiRequest is the union of the OpenAI completion and chat request fields
// the engine honours; the rest are accepted and ignored.
type oaiRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Stop      json.RawMessage `json:"stop"`
	IgnoreEOS bool            `json:"ignore_eos"`
	N         *int            `json:"n"`
	Seed      *int64          `json:"seed"`
}

type oaiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// kind is the response dialect.
type kind uint8

const (
	kindCompletion kind = iota
	kindChat
	kindTGI
)

// genParams is a validated generation request.
type genParams struct {
	kind         kind
	prompt       string
	maxTokens    int
	stream       bool
	includeUsage bool
	details      bool // TGI: details on a unary answer
	stop         []string
	ignoreEOS    bool
	seed         int64
}

func decodeJSON(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return invalid("", "request body is empty; expected a JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return invalid("", "malformed JSON body: %v", err)
	}
	return nil
}

func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, invalid("stop", "stop must be a string or an array of strings")
	}
	if len(many) > 16 {
		return nil, invalid("stop", "at most 16 stop strings are allowed, got %d", len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

func parsePrompt(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalid("prompt", "prompt is required")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		if len(many) != 1 {
			return "", invalid("prompt", "exactly one prompt is supported, got %d", len(many))
		}
		return many[0], nil
	}
	return "", invalid("prompt", "prompt must be a string or an array of one string")
}

func parseMessages(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalid("messages", "messages is required")
	}
	var msgs []oaiMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return "", invalid("messages", "messages must be an array of {role, content} objects")
	}
	if len(msgs) == 0 {
		return "", invalid("messages", "messages must not be empty")
	}
	if len(msgs) > 4096 {
		return "", invalid("messages", "at most 4096 messages are allowed")
	}
	conv := make([]kv.Message, 0, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			return "", invalid(fmt.Sprintf("messages[%d].role", i), "role is required")
		}
		text, err := contentText(m.Content)
		if err != nil {
			return "", invalid(fmt.Sprintf("messages[%d].content", i), "%v", err)
		}
		conv = append(conv, kv.Message{Role: m.Role, Content: text})
	}
	return kv.ChatPrompt(conv), nil
}

// contentText accepts a string or an array of {type:"text", text} parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or an array of text parts")
	}
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// parseOpenAI validates an OpenAI request body of kind k.
func (s *Server) parseOpenAI(b []byte, k kind) (genParams, error) {
	var req oaiRequest
	if err := decodeJSON(b, &req); err != nil {
		return genParams{}, err
	}
	if err := s.checkModel(req.Model); err != nil {
		return genParams{}, err
	}
	p := genParams{kind: k, stream: req.Stream, ignoreEOS: req.IgnoreEOS, seed: s.opts.Seed}
	var err error
	if k == kindChat {
		p.prompt, err = parseMessages(req.Messages)
		p.maxTokens = DefaultMaxTokensChat
	} else {
		p.prompt, err = parsePrompt(req.Prompt)
		p.maxTokens = DefaultMaxTokensCompletion
	}
	if err != nil {
		return genParams{}, err
	}
	if req.N != nil && *req.N != 1 {
		return genParams{}, invalid("n", "only n=1 is supported, got %d", *req.N)
	}
	switch {
	case req.MaxCompletionTokens != nil:
		p.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		p.maxTokens = *req.MaxTokens
	}
	if p.maxTokens < 1 {
		return genParams{}, invalid("max_tokens", "max_tokens must be at least 1, got %d", p.maxTokens)
	}
	if p.stop, err = parseStop(req.Stop); err != nil {
		return genParams{}, err
	}
	if req.Seed != nil {
		p.seed = *req.Seed
	}
	p.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return p, nil
}

// checkModel accepts an empty name, the served name or the catalog id.
func (s *Server) checkModel(name string) error {
	if name == "" || name == s.opts.ServedModelName || name == s.e.model.ID {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: "NotFoundError", code: "model_not_found", param: "model",
		msg: fmt.Sprintf("The model `%s` does not exist; this server serves `%s`.", name, s.opts.ServedModelName)}
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.handleOpenAI(w, r, kindCompletion)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) { s.handleOpenAI(w, r, kindChat) }

func (s *Server) handleOpenAI(w http.ResponseWriter, r *http.Request, k kind) {
	b, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := s.parseOpenAI(b, k)
	if err != nil {
		writeError(w, err)
		return
	}
	s.generate(w, r, p)
}

// handleInvocations is the SageMaker container contract: a body with
// "messages" is an OpenAI chat request, one with "inputs" is TGI/LMI style.
func (s *Server) handleInvocations(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var probe struct {
		Messages json.RawMessage `json:"messages"`
		Inputs   json.RawMessage `json:"inputs"`
		Prompt   json.RawMessage `json:"prompt"`
	}
	if err := decodeJSON(b, &probe); err != nil {
		writeError(w, err)
		return
	}
	var p genParams
	switch {
	case len(probe.Messages) > 0:
		p, err = s.parseOpenAI(b, kindChat)
	case len(probe.Inputs) > 0:
		p, err = s.parseTGI(b)
	case len(probe.Prompt) > 0:
		p, err = s.parseOpenAI(b, kindCompletion)
	default:
		err = invalid("", `body must have "messages" (OpenAI chat) or "inputs" (TGI style)`)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.generate(w, r, p)
}

func (s *Server) parseTGI(b []byte) (genParams, error) {
	var req struct {
		Inputs     json.RawMessage `json:"inputs"`
		Stream     bool            `json:"stream"`
		Parameters struct {
			MaxNewTokens *int            `json:"max_new_tokens"`
			Stop         json.RawMessage `json:"stop"`
			Seed         *int64          `json:"seed"`
			IgnoreEOS    bool            `json:"ignore_eos"`
			Details      bool            `json:"details"`
		} `json:"parameters"`
	}
	if err := decodeJSON(b, &req); err != nil {
		return genParams{}, err
	}
	var in string
	if err := json.Unmarshal(req.Inputs, &in); err != nil {
		return genParams{}, invalid("inputs", "inputs must be a string")
	}
	p := genParams{kind: kindTGI, prompt: in, stream: req.Stream, maxTokens: DefaultMaxTokensCompletion, seed: s.opts.Seed,
		ignoreEOS: req.Parameters.IgnoreEOS, details: req.Parameters.Details}
	if req.Parameters.MaxNewTokens != nil {
		p.maxTokens = *req.Parameters.MaxNewTokens
	}
	if p.maxTokens < 1 {
		return genParams{}, invalid("parameters.max_new_tokens", "max_new_tokens must be at least 1, got %d", p.maxTokens)
	}
	var err error
	if p.stop, err = parseStop(req.Parameters.Stop); err != nil {
		return genParams{}, err
	}
	if req.Parameters.Seed != nil {
		p.seed = *req.Parameters.Seed
	}
	return p, nil
}

// inject applies the start-up and --fail-rate faults.
func (s *Server) inject() error {
	if !s.ready() {
		return errStarting
	}
	if s.opts.FailRate > 0 {
		n := s.reqSeq.Add(1)
		h := xxhash.Sum64String(strconv.FormatInt(s.opts.Seed, 10) + "/" + strconv.FormatUint(n, 10))
		if float64(h>>11)/float64(1<<53) < s.opts.FailRate {
			return errInjected
		}
	}
	return nil
}

// generate runs one validated request through the engine and writes the
// response in its dialect.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, p genParams) {
	if err := s.inject(); err != nil {
		writeError(w, err)
		return
	}
	tokens := kv.Tokenize(p.prompt)
	if len(tokens) == 0 {
		writeError(w, invalid("prompt", "prompt must not be empty"))
		return
	}
	if len(tokens)+p.maxTokens > s.e.maxLen {
		writeError(w, invalid("max_tokens", "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.e.maxLen, len(tokens)+p.maxTokens, len(tokens), p.maxTokens))
		return
	}
	req := request{
		prompt: tokens, maxTokens: p.maxTokens, ignoreEOS: p.ignoreEOS, stop: p.stop, arrival: s.clk.Now(),
		seed: xxhash.Sum64String(p.prompt) ^ (uint64(p.seed) * 0x9e3779b97f4a7c15),
	}
	s.e.prepare(r.Context(), &req)
	sq, err := s.e.Submit(req)
	if err != nil {
		writeError(w, err)
		return
	}
	ok := false
	if p.stream {
		ok = s.stream(w, r.Context(), sq, p)
	} else {
		ok = s.unary(w, r.Context(), sq, p)
	}
	if ok && s.opts.CrashAfterRequests > 0 && s.done.Add(1) >= int64(s.opts.CrashAfterRequests) {
		// The N-th response reaches the client before the process dies.
		if fl, isFl := w.(http.Flusher); isFl {
			fl.Flush()
		}
		s.crashOne.Do(func() { close(s.crash) })
	}
}

// wait blocks until the engine has news for sq; false means give up (the
// client left or the engine stopped), after aborting sq.
func (s *Server) wait(ctx context.Context, sq *seq) bool {
	select {
	case <-sq.notify:
		return true
	case <-ctx.Done():
		s.e.Abort(sq)
		return false
	case <-s.e.done:
		// The engine finished every sequence before closing done; drain.
		select {
		case <-sq.notify:
			return true
		default:
			return false
		}
	}
}
