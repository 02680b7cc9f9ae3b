package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/gateway/internal/jsonscan"
)

// The SageMaker container contract (POST /invocations) as the simulated
// engine serves it takes OpenAI chat bodies ("messages"), OpenAI completion
// bodies ("prompt") and TGI-style bodies ("inputs" and "parameters"). Real
// engines serve less of it (engines.Adapter.Invocations), so per attempt,
// for the backend picked, the gateway rewrites what the engine lacks:
//
//   - InvocationsAll (simulator, TGI): nothing.
//   - InvocationsOpenAI (vLLM): an "inputs" body goes to /v1/completions as
//     an OpenAI completion request; the answer comes back in TGI's shape.
//   - InvocationsNone (llama.cpp, SGLang): "messages" bodies go to
//     /v1/chat/completions and "prompt" bodies to /v1/completions as they
//     are; "inputs" bodies as for vLLM. Anything else is refused here with
//     the simulator's 400, since there is no route to forward it to.
//
// A translated answer has the shape the simulator gives (engine/sim
// respond.go): unary [{"generated_text":…}] (with details when asked), or
// TGI server-sent events, one per token, the last carrying generated_text
// and StreamDetails (what Observer counts a stream's tokens from). An
// engine's error answer (non-2xx) passes through untouched.

// defaultMaxNewTokens is the simulator's default for a TGI body without
// parameters.max_new_tokens (sim.DefaultMaxTokensCompletion).
const defaultMaxNewTokens = 16

// maxStopStrings is the simulator's bound on parameters.stop.
const maxStopStrings = 16

// maxTranslatedBody bounds a unary engine answer read whole for translation.
const maxTranslatedBody = 64 << 20

// maxStreamLine bounds one server-sent event line of an engine's stream.
const maxStreamLine = 4 << 20

const invocationsPath = "/invocations"

// translation is how one attempt reaches its backend.
type translation struct {
	path   string      // "": the invocation's own path, body and header
	body   []byte      // the request body to send
	header http.Header // the request header to send
	tgi    *tgiParams  // non-nil: the answer is OpenAI completions, turned into TGI's shape
	local  *http.Response
}

// tgiParams is what the answer's translation needs from a TGI request.
type tgiParams struct {
	details        bool
	stop           []string
	returnFullText bool
	inputs         string
}

// bodyKind is what an /invocations body asks for.
type bodyKind uint8

const (
	bodyOther bodyKind = iota
	bodyMessages
	bodyInputs
	bodyPrompt
)

// translate decides how inv reaches a backend running engine; path is
// inv.Path with its leading slash. A zero translation forwards inv as is;
// one with local set is the answer, and nothing is sent.
func translate(engine, path string, inv Invocation) translation {
	mode := engines.MustByName(engine).Invocations
	if mode == engines.InvocationsAll || path != invocationsPath {
		return translation{}
	}
	kind, err := probeBody(inv.Body)
	if err != nil {
		return translation{local: localError(err)}
	}
	switch {
	case kind == bodyInputs:
		body, p, err := tgiToCompletion(inv.Body, engines.MustByName(engine).VerboseStop)
		if err != nil {
			return translation{local: localError(err)}
		}
		return translation{path: "/v1/completions", body: body, header: jsonHeader(inv.Header), tgi: p}
	case mode == engines.InvocationsOpenAI:
		return translation{} // the engine's /invocations takes OpenAI bodies (and refuses others itself)
	case kind == bodyMessages:
		return translation{path: "/v1/chat/completions", body: inv.Body, header: jsonHeader(inv.Header)}
	case kind == bodyPrompt:
		return translation{path: "/v1/completions", body: inv.Body, header: jsonHeader(inv.Header)}
	}
	return translation{local: localError(invalidf("", `body must have "messages" (OpenAI chat) or "inputs" (TGI style)`))}
}

// probeBody finds which of the members the simulator dispatches on the body
// has, in its order: messages, then inputs, then prompt. Only the top level
// is walked; the engine (or tgiToCompletion) validates the rest.
func probeBody(b []byte) (bodyKind, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return bodyOther, invalidf("", "request body is empty; expected a JSON object")
	}
	var messages, inputs, prompt bool
	err := jsonscan.EachMember(b, func(key, val []byte) error {
		if string(val) == "null" {
			return nil
		}
		switch string(key) {
		case "messages":
			messages = true
		case "inputs":
			inputs = true
		case "prompt":
			prompt = true
		}
		return nil
	})
	switch {
	case err != nil:
		return bodyOther, invalidf("", "malformed JSON body: %v", err)
	case messages:
		return bodyMessages, nil
	case inputs:
		return bodyInputs, nil
	case prompt:
		return bodyPrompt, nil
	}
	return bodyOther, nil
}

// tgiRequest is the TGI/LMI request the gateway translates.
type tgiRequest struct {
	Inputs     json.RawMessage `json:"inputs"`
	Stream     bool            `json:"stream"`
	Parameters struct {
		MaxNewTokens   *int            `json:"max_new_tokens"`
		Stop           json.RawMessage `json:"stop"`
		Seed           *int64          `json:"seed"`
		Temperature    *float64        `json:"temperature"`
		TopP           *float64        `json:"top_p"`
		TopK           *int            `json:"top_k"`
		DoSample       *bool           `json:"do_sample"`
		IgnoreEOS      bool            `json:"ignore_eos"`
		Details        bool            `json:"details"`
		ReturnFullText bool            `json:"return_full_text"`
	} `json:"parameters"`
}

// completionRequest is the OpenAI completion request sent in its place.
type completionRequest struct {
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	Stop          []string       `json:"stop,omitempty"`
	Seed          *int64         `json:"seed,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	TopK          *int           `json:"top_k,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
	// Verbose asks llama.cpp for its "__verbose" member, which names the
	// stop string that ended the text (engines.Adapter.VerboseStop).
	Verbose bool `json:"verbose,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// tgiToCompletion validates a TGI body as the simulator does and returns
// the OpenAI completion body for it; verboseStop asks the engine to say
// which stop string matched when the body has any (llama.cpp).
func tgiToCompletion(b []byte, verboseStop bool) ([]byte, *tgiParams, error) {
	var req tgiRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, nil, invalidf("", "malformed JSON body: %v", err)
	}
	var in string
	if err := json.Unmarshal(req.Inputs, &in); err != nil {
		return nil, nil, invalidf("inputs", "inputs must be a string")
	}
	pr := req.Parameters
	out := completionRequest{Prompt: in, MaxTokens: defaultMaxNewTokens, Stream: req.Stream, Seed: pr.Seed,
		Temperature: pr.Temperature, TopP: pr.TopP, TopK: pr.TopK, IgnoreEOS: pr.IgnoreEOS}
	if pr.MaxNewTokens != nil {
		out.MaxTokens = *pr.MaxNewTokens
	}
	if out.MaxTokens < 1 {
		return nil, nil, invalidf("parameters.max_new_tokens", "max_new_tokens must be at least 1, got %d", out.MaxTokens)
	}
	stop, err := parseStop(pr.Stop)
	if err != nil {
		return nil, nil, err
	}
	out.Stop = stop
	out.Verbose = verboseStop && len(stop) > 0
	if req.Stream {
		// The usage chunk gives StreamDetails its token counts.
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if (pr.DoSample == nil || !*pr.DoSample) && pr.Temperature == nil && pr.TopP == nil && pr.TopK == nil {
		// TGI decodes greedily unless asked to sample; OpenAI servers sample
		// by default.
		greedy := 0.0
		out.Temperature = &greedy
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, nil, invalidf("", "encoding the completion request: %v", err)
	}
	p := &tgiParams{details: pr.Details, stop: stop, returnFullText: pr.ReturnFullText}
	if p.returnFullText {
		p.inputs = in
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), p, nil
}

// parseStop is the simulator's: a string or up to 16 strings, empty ones
// dropped.
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
		return nil, invalidf("stop", "stop must be a string or an array of strings")
	}
	if len(many) > maxStopStrings {
		return nil, invalidf("stop", "at most %d stop strings are allowed, got %d", maxStopStrings, len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// jsonHeader is h with Content-Type application/json (OpenAI routes check
// it), copied only when it must change: h is the caller's, and is read
// again on a retry.
func jsonHeader(h http.Header) http.Header {
	if h.Get("Content-Type") == "application/json" {
		return h
	}
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return h
}

// requestError is a request refused before it reached an engine, worded
// as the simulator words it (engine/sim errors.go).
type requestError struct{ param, msg string }

func (e *requestError) Error() string { return e.msg }

func invalidf(param, format string, a ...any) error {
	return &requestError{param: param, msg: fmt.Sprintf(format, a...)}
}

// localBody is the body of an answer the gateway gave itself.
type localBody struct{ *bytes.Reader }

func (localBody) Close() error { return nil }

// isLocalAnswer reports whether resp was made by the gateway, not a backend
// (so it says nothing about the backend's health).
func isLocalAnswer(resp *http.Response) bool {
	_, ok := resp.Body.(localBody)
	return ok
}

// localError is the simulator's 400 answer for err (a *requestError).
func localError(err error) *http.Response {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: err.Error(), Type: "invalid_request_error"}
	var re *requestError
	if errors.As(err, &re) && re.param != "" {
		d.Param = &re.param
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{d})
	b = append(b, '\n')
	return &http.Response{
		Status: "400 Bad Request", StatusCode: http.StatusBadRequest,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          localBody{bytes.NewReader(b)},
		ContentLength: int64(len(b)),
	}
}

// translateResponse turns a successful OpenAI completion answer into TGI's
// shape, as it is read; an error answer is left as the engine gave it.
func translateResponse(resp *http.Response, p *tgiParams) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &tgiStream{src: resp.Body, p: p}
		resp.Header.Set("Content-Type", "text/event-stream")
	} else {
		resp.Body = &tgiUnary{src: resp.Body, p: p}
		resp.Header.Set("Content-Type", "application/json")
	}
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
}

// completionChoice is the part of an OpenAI completion choice (unary or
// stream chunk) the translation reads.
type completionChoice struct {
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
	// StopReason (vLLM) and MatchedStop (SGLang) hold the stop string that
	// ended the text, or a stop token's id.
	StopReason  json.RawMessage `json:"stop_reason"`
	MatchedStop json.RawMessage `json:"matched_stop"`
}

// stoppedByString reports whether the engine said a stop string matched.
func (c *completionChoice) stoppedByString() bool {
	return bytes.HasPrefix(c.StopReason, []byte(`"`)) || bytes.HasPrefix(c.MatchedStop, []byte(`"`))
}

// llamaVerbose is the part of llama.cpp's "__verbose" member (sent when the
// request sets "verbose") the translation reads: stop_type "word" says a
// stop string ended the text.
type llamaVerbose struct {
	StopType string `json:"stop_type"`
}

func (v *llamaVerbose) stoppedByString() bool { return v != nil && v.StopType == "word" }

type completionUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// tgiFinishReason names an OpenAI finish reason as TGI does, as the
// simulator's tgiFinishReason: "stop" is a stop sequence when the engine
// says one matched or the text holds one (engines drop the stop string from
// the text by default, so the engine's word counts most), else the
// end-of-sequence token.
func tgiFinishReason(reason string, byString bool, text string, stop []string) string {
	switch reason {
	case "length":
		return reason
	case "stop", "":
		if byString {
			return "stop_sequence"
		}
		for _, st := range stop {
			if strings.Contains(text, st) {
				return "stop_sequence"
			}
		}
		return "eos_token"
	}
	return reason // "abort", an engine's own
}

// tgiUnary reads an OpenAI completion answer whole (bounded) on the first
// Read and serves its TGI form.
type tgiUnary struct {
	src io.ReadCloser
	p   *tgiParams
	out []byte
	off int
	err error
}

func (u *tgiUnary) Read(b []byte) (int, error) {
	if u.out == nil && u.err == nil {
		u.out, u.err = u.translate()
	}
	if u.off == len(u.out) {
		if u.err != nil {
			return 0, u.err
		}
		return 0, io.EOF
	}
	n := copy(b, u.out[u.off:])
	u.off += n
	return n, nil
}

func (u *tgiUnary) Close() error { return u.src.Close() }

func (u *tgiUnary) translate() ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(u.src, maxTranslatedBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxTranslatedBody {
		return nil, fmt.Errorf("engine answer exceeds %d bytes", maxTranslatedBody)
	}
	var r struct {
		Choices []completionChoice `json:"choices"`
		Usage   *completionUsage   `json:"usage"`
		Verbose *llamaVerbose      `json:"__verbose"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("engine answer is not an OpenAI completion: %w", err)
	}
	if len(r.Choices) == 0 {
		return nil, errors.New("engine answer is not an OpenAI completion: no choices")
	}
	c := &r.Choices[0]
	// The simulator's unary TGI answer (engine/sim respond.go). The engine
	// does not say which tokens it generated: details list none.
	type token struct {
		ID      int     `json:"id"`
		Text    string  `json:"text"`
		Logprob float64 `json:"logprob"`
		Special bool    `json:"special"`
	}
	type details struct {
		FinishReason    string  `json:"finish_reason"`
		GeneratedTokens int     `json:"generated_tokens"`
		Seed            *uint64 `json:"seed"`
		Prefill         []token `json:"prefill"`
		Tokens          []token `json:"tokens"`
	}
	type generated struct {
		GeneratedText string   `json:"generated_text"`
		Details       *details `json:"details,omitempty"`
	}
	g := generated{GeneratedText: u.p.inputs + c.Text}
	if u.p.details {
		reason := ""
		if c.FinishReason != nil {
			reason = *c.FinishReason
		}
		d := &details{FinishReason: tgiFinishReason(reason, c.stoppedByString() || r.Verbose.stoppedByString(), c.Text, u.p.stop), Prefill: []token{}, Tokens: []token{}}
		if r.Usage != nil {
			d.GeneratedTokens = r.Usage.CompletionTokens
		}
		g.Details = d
	}
	out, err := json.Marshal([]generated{g})
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// tgiStream turns an OpenAI completion stream into TGI's, event by event,
// as it arrives: each chunk with text is one token event, sent at once (so
// time to first token is the engine's); the chunk that finishes the text
// (its finish_reason set), or an empty special token when that chunk has no
// text, is held until the usage chunk or [DONE] and becomes the last event,
// with generated_text and details. An engine's error event passes through
// and ends the stream. Memory: the generated text (for generated_text), one
// event line (bounded by maxStreamLine) and a read buffer.
type tgiStream struct {
	src  io.ReadCloser
	p    *tgiParams
	rbuf []byte
	line []byte // an event line split across reads
	out  []byte // translated bytes not yet read
	off  int
	err  error // returned once out is read: io.EOF at the end

	text      []byte // the text so far
	n         int    // token events written
	held      string // the finishing chunk's text
	finish    string // the engine's finish_reason; "" until one came
	byString  bool   // the engine said a stop string matched
	usage     completionUsage
	haveUsage bool
	ended     bool // the last event (or an error event) is written
	sawFinish bool // a chunk with a finish_reason came
}

func (s *tgiStream) Read(p []byte) (int, error) {
	for s.off == len(s.out) {
		if s.err != nil {
			return 0, s.err
		}
		s.out, s.off = s.out[:0], 0
		s.fill()
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

func (s *tgiStream) Close() error { return s.src.Close() }

// fill reads the engine once and translates what came.
func (s *tgiStream) fill() {
	if s.rbuf == nil {
		s.rbuf = make([]byte, 16<<10)
	}
	m, err := s.src.Read(s.rbuf)
	if m > 0 {
		s.feed(s.rbuf[:m])
	}
	switch {
	case s.err != nil:
	case err == io.EOF:
		if len(s.line) > 0 { // a last event without its newline
			s.event(s.line)
			s.line = s.line[:0]
		}
		if s.err != nil {
			return
		}
		if !s.ended && !s.sawFinish {
			s.err = fmt.Errorf("engine stream ended before the text was finished: %w", io.ErrUnexpectedEOF)
			return
		}
		s.end()
		s.err = io.EOF
	case err != nil:
		s.err = err
	}
}

// feed translates the complete lines in b and keeps a partial last one.
func (s *tgiStream) feed(b []byte) {
	for len(b) > 0 && s.err == nil {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			s.keep(b)
			return
		}
		line := b[:nl]
		b = b[nl+1:]
		if len(s.line) > 0 {
			if s.keep(line); s.err != nil {
				return
			}
			line = s.line
		}
		s.event(line)
		s.line = s.line[:0]
	}
}

func (s *tgiStream) keep(b []byte) {
	if len(s.line)+len(b) > maxStreamLine {
		s.err = fmt.Errorf("engine stream event exceeds %d bytes", maxStreamLine)
		return
	}
	s.line = append(s.line, b...)
}

var (
	sseData   = []byte("data:")
	sseDone   = []byte("[DONE]")
	jsonNull  = []byte("null")
	tokenHead = []byte(`data: {"index":`)
)

// event translates one line of the engine's stream.
func (s *tgiStream) event(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	data, ok := bytes.CutPrefix(line, sseData)
	if !ok || s.ended {
		return // blank lines, comments, event names; anything after the end
	}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, sseDone) {
		s.end()
		return
	}
	var c struct {
		Choices []completionChoice `json:"choices"`
		Usage   *completionUsage   `json:"usage"`
		Error   json.RawMessage    `json:"error"`
		Verbose *llamaVerbose      `json:"__verbose"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		s.err = fmt.Errorf("engine stream event is not an OpenAI completion chunk: %w", err)
		return
	}
	if len(c.Error) > 0 && !bytes.Equal(c.Error, jsonNull) {
		// The engine failed mid-stream: its error event, as the simulator
		// sends one, ends the stream.
		s.out = append(s.out, "data: "...)
		s.out = append(s.out, data...)
		s.out = append(s.out, "\n\n"...)
		s.ended = true
		return
	}
	if c.Usage != nil {
		s.usage, s.haveUsage = *c.Usage, true
	}
	if len(c.Choices) == 0 {
		return // the usage chunk
	}
	ch := &c.Choices[0]
	if s.sawFinish {
		// Text after the finishing chunk: the held text was not the last.
		if s.held != "" {
			s.token(s.held, false)
			s.held = ""
		}
	}
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		s.sawFinish, s.finish = true, *ch.FinishReason
		s.byString = s.byString || ch.stoppedByString() || c.Verbose.stoppedByString()
		s.held = ch.Text
		return
	}
	if ch.Text != "" {
		s.token(ch.Text, false)
	}
}

// token writes one TGI token event; the last carries generated_text and
// details.
func (s *tgiStream) token(text string, last bool) {
	s.text = append(s.text, text...)
	s.out = append(s.out, tokenHead...)
	s.out = strconv.AppendInt(s.out, int64(s.n), 10)
	s.out = append(s.out, `,"token":{"id":0,"text":`...)
	s.out = appendJSONString(s.out, text)
	s.out = append(s.out, `,"logprob":0.0,"special":`...)
	s.out = strconv.AppendBool(s.out, last && text == "")
	s.out = append(s.out, `},"generated_text":`...)
	if !last {
		s.n++
		s.out = append(s.out, `null,"details":null}`+"\n\n"...)
		return
	}
	s.out = append(s.out, '"')
	s.out = appendJSONText(s.out, s.p.inputs)
	s.out = appendJSONText(s.out, string(s.text))
	s.out = append(s.out, `","details":{"finish_reason":`...)
	s.out = appendJSONString(s.out, tgiFinishReason(s.finish, s.byString, string(s.text), s.p.stop))
	generated, input := s.n, 0
	if s.haveUsage {
		generated, input = s.usage.CompletionTokens, s.usage.PromptTokens
	} else if text != "" {
		generated++
	}
	s.out = append(s.out, `,"generated_tokens":`...)
	s.out = strconv.AppendInt(s.out, int64(generated), 10)
	s.out = append(s.out, `,"input_length":`...)
	s.out = strconv.AppendInt(s.out, int64(input), 10)
	s.out = append(s.out, `,"seed":null}}`+"\n\n"...)
}

// end writes the last event, once.
func (s *tgiStream) end() {
	if s.ended {
		return
	}
	s.ended = true
	s.token(s.held, true)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendJSONText(b, s)
	return append(b, '"')
}

// appendJSONText appends s escaped for the inside of a JSON string; invalid
// UTF-8 becomes U+FFFD, as encoding/json writes it.
func appendJSONText(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
