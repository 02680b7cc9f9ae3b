package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
)

// Record is what one request measured. Durations are from the request's send.
type Record struct {
	Target  int           `json:"target"`
	Stage   int           `json:"stage"`
	Ticket  int           `json:"ticket"`
	Session string        `json:"session,omitempty"`
	Turn    int           `json:"turn,omitempty"`
	Start   time.Duration `json:"start_ns"` // since the stage started
	// Scheduled is the job's planned arrival offset (open loop; 0 closed
	// loop); later turns of a session keep their session's.
	Scheduled time.Duration `json:"scheduled_ns,omitempty"`
	TTFT      time.Duration `json:"ttft_ns"`
	E2E       time.Duration `json:"e2e_ns"`
	// ITLs are the gaps between successive token chunks (the first token excluded).
	ITLs []time.Duration `json:"itls_ns,omitempty"`
	// ExpectedInputTokens is the prompt length by the kv tokenizer rule;
	// InputTokens is the server's usage figure when it sent one, else the same.
	ExpectedInputTokens int    `json:"expected_input_tokens"`
	InputTokens         int    `json:"input_tokens"`
	OutputTokens        int    `json:"output_tokens"`
	CachedTokens        int    `json:"cached_tokens"`
	UsageReported       bool   `json:"usage_reported"`
	Status              int    `json:"status,omitempty"`
	Error               string `json:"error,omitempty"` // error kind; empty when the request succeeded
	ErrorDetail         string `json:"error_detail,omitempty"`
}

// OK reports whether the request succeeded.
func (r *Record) OK() bool { return r.Error == "" }

// TPOT is the mean time per output token after the first, vLLM's definition:
// (E2E − TTFT) / (output tokens − 1). It is zero for one-token answers.
func (r *Record) TPOT() time.Duration {
	if r.OutputTokens <= 1 {
		return 0
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OutputTokens-1)
}

// Error kinds, the keys of a summary's error counts.
const (
	errConnect  = "connect"
	errTimeout  = "timeout"
	errCanceled = "canceled"
	errStream   = "stream"
	errDecode   = "decode"
	errEmpty    = "no_tokens"
	errServer   = "server_error" // an error object inside a 200 stream
	errModel    = "model_stream_error"
)

func httpErrorKind(status int) string { return "http_" + strconv.Itoa(status) }

// Request is one item about to be sent to one target.
type Request struct {
	Item      *Item
	Model     string
	RequestID string
}

// Client sends one request and fills the record's measurements and error kind.
// Implementations never return errors: every failure is a kind on the record,
// because a load test reports failures rather than stopping on them.
type Client interface {
	Do(ctx context.Context, req *Request, rec *Record)
}

// NewHTTPClient returns an http.Client tuned for many concurrent streams to a
// few hosts: no connection cap, idle connections kept for reuse, no
// transparent gzip (it would buffer SSE).
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 100_000,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

// openAIBody is the request body for both OpenAI endpoints (and SageMaker,
// which carries the chat body). ignore_eos makes the server generate exactly
// max_tokens, so output lengths are the workload's.
type openAIBody struct {
	Model         string        `json:"model,omitempty"` // omitted for SageMaker: the endpoint is in the URL
	Prompt        string        `json:"prompt,omitempty"`
	Messages      []chatMessage `json:"messages,omitempty"`
	MaxTokens     int           `json:"max_tokens"`
	IgnoreEOS     bool          `json:"ignore_eos"`
	Stream        bool          `json:"stream"`
	StreamOptions *streamOpts   `json:"stream_options,omitempty"`
	User          string        `json:"user,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

func buildBody(req *Request, chat, stream bool) ([]byte, int) {
	b := openAIBody{Model: req.Model, MaxTokens: req.Item.OutputTokens, IgnoreEOS: true, Stream: stream, User: req.Item.SessionID}
	if stream {
		b.StreamOptions = &streamOpts{IncludeUsage: true}
	}
	var expected int
	if chat {
		b.Messages = make([]chatMessage, len(req.Item.Messages))
		for i, m := range req.Item.Messages {
			b.Messages[i] = chatMessage{Role: m.Role, Content: m.Content}
		}
		expected = kv.CountTokens(kv.ChatPrompt(req.Item.Messages))
	} else {
		b.Prompt = req.Item.Prompt
		expected = kv.CountTokens(req.Item.Prompt)
	}
	body, _ := json.Marshal(b) // plain strings and ints: cannot fail
	return body, expected
}

// chunk is the part of an OpenAI response (streamed chunk or whole body) the
// generator reads.
type chunk struct {
	Choices []struct {
		Text    string                   `json:"text"`
		Delta   struct{ Content string } `json:"delta"`
		Message struct{ Content string } `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// tokenText reports whether the chunk carries generated text.
func (c *chunk) hasText() bool {
	for _, ch := range c.Choices {
		if ch.Text != "" || ch.Delta.Content != "" || ch.Message.Content != "" {
			return true
		}
	}
	return false
}

// measurer turns response events into a record's measurements.
type measurer struct {
	clk       clock.Clock
	rec       *Record
	sent      time.Time
	last      time.Time
	chunks    int
	done      bool // [DONE] seen
	usageSeen bool
}

func newMeasurer(clk clock.Clock, rec *Record, sent time.Time) *measurer {
	return &measurer{clk: clk, rec: rec, sent: sent}
}

// data handles one SSE data payload (or one whole JSON body). It returns an
// error kind when the payload is an error or cannot be decoded.
func (m *measurer) data(p []byte) (kind, detail string) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 {
		return "", ""
	}
	if bytes.Equal(p, []byte("[DONE]")) {
		m.done = true
		return "", ""
	}
	now := m.clk.Now()
	var c chunk
	if err := json.Unmarshal(p, &c); err != nil {
		return errDecode, err.Error()
	}
	if c.Error != nil {
		return errServer, c.Error.Message
	}
	if c.hasText() {
		if m.chunks == 0 {
			m.rec.TTFT = now.Sub(m.sent)
		} else {
			m.rec.ITLs = append(m.rec.ITLs, now.Sub(m.last))
		}
		m.last = now
		m.chunks++
	}
	if c.Usage != nil {
		m.usageSeen = true
		m.rec.UsageReported = true
		m.rec.InputTokens = c.Usage.PromptTokens
		m.rec.OutputTokens = c.Usage.CompletionTokens
		if c.Usage.PromptTokensDetails != nil {
			m.rec.CachedTokens = c.Usage.PromptTokensDetails.CachedTokens
		}
	}
	return "", ""
}

// finish closes the measurement at the end of the response.
func (m *measurer) finish() {
	m.rec.E2E = m.clk.Now().Sub(m.sent)
	if !m.usageSeen {
		m.rec.InputTokens = m.rec.ExpectedInputTokens
		m.rec.OutputTokens = m.chunks
	}
	if m.chunks == 0 && m.rec.Error == "" {
		m.rec.Error = errEmpty
	}
}

// sseLines feeds every complete line of an SSE (or JSON-lines) byte stream to
// fn; partial lines are kept until the rest arrives.
type sseLines struct {
	buf []byte
}

func (s *sseLines) write(p []byte, fn func(line []byte) bool) bool {
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return true
		}
		line := s.buf[:i]
		if !fn(line) {
			return false
		}
		s.buf = s.buf[i+1:]
	}
}

// sseData extracts the payload of an SSE data line; bare JSON lines (some
// SageMaker containers stream JSON lines) count as data too.
func sseData(line []byte) ([]byte, bool) {
	line = bytes.TrimRight(line, "\r")
	if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		return rest, true
	}
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '{' {
		return t, true
	}
	return nil, false
}

// classify maps a transport error to an error kind.
func classify(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errTimeout
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return errCanceled
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return errConnect
	}
	return errStream
}

// OpenAIClient speaks /v1/completions and /v1/chat/completions.
type OpenAIClient struct {
	HTTP    *http.Client
	Clock   clock.Clock
	BaseURL string
	Chat    bool
	Stream  bool
}

var _ Client = (*OpenAIClient)(nil)

// Do implements Client.
func (c *OpenAIClient) Do(ctx context.Context, req *Request, rec *Record) {
	body, expected := buildBody(req, c.Chat, c.Stream)
	rec.ExpectedInputTokens = expected
	path := "/v1/completions"
	if c.Chat {
		path = "/v1/chat/completions"
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		rec.Error, rec.ErrorDetail = errConnect, err.Error()
		return
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("X-Request-Id", req.RequestID)
	markReplayable(hr, req.RequestID)
	if req.Item.SessionID != "" {
		hr.Header.Set("X-Session-Id", req.Item.SessionID)
	}
	if c.Stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	sent := c.Clock.Now()
	m := newMeasurer(c.Clock, rec, sent)
	resp := send(ctx, c.HTTP, c.Clock, hr, rec, sent)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	readResponse(ctx, resp.Body, c.Stream, m)
}

// markReplayable lets Go's transport send hr again, on a new connection,
// when the server closed the pooled connection it went out on before
// answering: an Idempotency-Key header is what the transport looks for on a
// POST. llama-server closes keep-alive connections early; without this, 1 in
// 5 streamed requests sent to it directly at concurrency 4 failed with
// "server closed idle connection" or EOF. A request whose answer had begun
// is never sent again.
func markReplayable(hr *http.Request, requestID string) {
	hr.Header.Set("Idempotency-Key", requestID)
}

// send issues hr and records on rec what went wrong: a transport error or a
// non-200 status (with the start of its body). It returns the response only
// when there is a 200 body to read; the caller closes it.
func send(ctx context.Context, hc *http.Client, clk clock.Clock, hr *http.Request, rec *Record, sent time.Time) *http.Response {
	resp, err := hc.Do(hr)
	if err != nil {
		rec.Error, rec.ErrorDetail = classify(ctx, err), err.Error()
		rec.E2E = clk.Now().Sub(sent)
		return nil
	}
	rec.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		rec.Error, rec.ErrorDetail = httpErrorKind(resp.StatusCode), string(msg)
		rec.E2E = clk.Now().Sub(sent)
		return nil
	}
	return resp
}

// maxSSELine bounds one server-sent event line.
const maxSSELine = 1 << 20

// readResponse consumes a streamed (SSE) or whole JSON body into m.
func readResponse(ctx context.Context, body io.Reader, stream bool, m *measurer) {
	defer m.finish()
	if !stream {
		data, err := io.ReadAll(io.LimitReader(body, 64<<20))
		if err != nil {
			m.rec.Error, m.rec.ErrorDetail = classify(ctx, err), err.Error()
			return
		}
		if k, d := m.data(data); k != "" {
			m.rec.Error, m.rec.ErrorDetail = k, d
		}
		return
	}
	br := bufio.NewReaderSize(body, 4<<10)
	var long []byte // a line longer than the reader's buffer, in pieces
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(line) > maxSSELine {
				m.rec.Error, m.rec.ErrorDetail = errDecode, "SSE line longer than 1 MiB"
				return
			}
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(line) > 0 {
			if p, ok := sseData(line); ok {
				if k, d := m.data(p); k != "" {
					m.rec.Error, m.rec.ErrorDetail = k, d
					return
				}
				if m.done {
					return
				}
			}
		}
		if err == io.EOF {
			return // a stream may end without [DONE]
		}
		if err != nil {
			m.rec.Error, m.rec.ErrorDetail = classify(ctx, err), err.Error()
			return
		}
	}
}

// requestID names a request uniquely within a run, so server logs and the
// X-Request-Id echo can be matched to records.
func requestID(target, stage, ticket, turn int) string {
	return fmt.Sprintf("bench-%d-%d-%d-%d", target, stage, ticket, turn)
}
