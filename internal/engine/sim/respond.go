package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func makeUsage(prompt, completion, cached int) usage {
	u := usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	u.PromptTokensDetails.CachedTokens = cached
	return u
}

// responseID names a response after the server's start time and the
// engine's sequence number, unique across replicas and restarts.
func (s *Server) responseID(k kind, sq *seq) string {
	id := strconv.FormatInt(s.start.UnixNano(), 36) + "-" + strconv.FormatInt(sq.id, 36)
	if k == kindChat {
		return "chatcmpl-" + id
	}
	return "cmpl-" + id
}

// unary waits for the whole generation and writes one JSON response.
func (s *Server) unary(w http.ResponseWriter, ctx context.Context, sq *seq, p genParams) bool {
	for {
		if !s.wait(ctx, sq) {
			return false
		}
		sq.mu.Lock()
		done := sq.done
		sq.mu.Unlock()
		if done {
			break
		}
	}
	sq.mu.Lock()
	out, reason, cached, errMsg := sq.out, sq.reason, sq.cached, sq.errorMsg
	sq.mu.Unlock()
	if reason == "error" {
		writeError(w, errors.New(errMsg))
		return false
	}
	var text strings.Builder
	for i, wd := range out {
		text.WriteString(tokenText(wd, i == 0))
	}
	u := makeUsage(len(sq.prompt), len(out), cached)
	created := s.clk.Now().Unix()
	w.Header().Set("Content-Type", "application/json")
	var body any
	switch p.kind {
	case kindChat:
		type msg struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		type choice struct {
			Index        int     `json:"index"`
			Message      msg     `json:"message"`
			Logprobs     *string `json:"logprobs"`
			FinishReason string  `json:"finish_reason"`
		}
		body = struct {
			ID      string   `json:"id"`
			Object  string   `json:"object"`
			Created int64    `json:"created"`
			Model   string   `json:"model"`
			Choices []choice `json:"choices"`
			Usage   usage    `json:"usage"`
		}{s.responseID(p.kind, sq), "chat.completion", created, s.opts.ServedModelName, []choice{{0, msg{"assistant", text.String()}, nil, reason}}, u}
	case kindCompletion:
		type choice struct {
			Index        int     `json:"index"`
			Text         string  `json:"text"`
			Logprobs     *string `json:"logprobs"`
			FinishReason string  `json:"finish_reason"`
		}
		body = struct {
			ID      string   `json:"id"`
			Object  string   `json:"object"`
			Created int64    `json:"created"`
			Model   string   `json:"model"`
			Choices []choice `json:"choices"`
			Usage   usage    `json:"usage"`
		}{s.responseID(p.kind, sq), "text_completion", created, s.opts.ServedModelName, []choice{{0, text.String(), nil, reason}}, u}
	default:
		type token struct {
			ID      uint16  `json:"id"`
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
		g := generated{GeneratedText: text.String()}
		if p.details {
			// TGI lists the prompt tokens (prefill) only with
			// decoder_input_details, which the sim does not offer.
			d := &details{FinishReason: tgiFinishReason(reason, g.GeneratedText, p.stop), GeneratedTokens: len(out), Prefill: []token{}, Tokens: make([]token, len(out))}
			for i, wd := range out {
				d.Tokens[i] = token{ID: wd, Text: tokenText(wd, i == 0)}
			}
			g.Details = d
		}
		body = []generated{g}
	}
	_ = json.NewEncoder(w).Encode(body)
	return true
}

// sseWriter renders stream chunks into a reused buffer. Every chunk of one
// response shares a prefix, so it is rendered once.
type sseWriter struct {
	buf    []byte
	prefix []byte // `data: {"id":…,"choices":[{"index":0,`
	n      int    // tokens written
}

// stream writes one SSE event per token as the engine produces them,
// flushing once per wake-up (several tokens when the engine is ahead).
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, sq *seq, p genParams) bool {
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	sw := &sseWriter{buf: make([]byte, 0, 4096)}
	id := s.responseID(p.kind, sq)
	created := strconv.FormatInt(s.clk.Now().Unix(), 10)
	model, _ := json.Marshal(s.opts.ServedModelName)
	switch p.kind {
	case kindChat:
		sw.prefix = []byte(`data: {"id":"` + id + `","object":"chat.completion.chunk","created":` + created + `,"model":` + string(model) + `,"choices":[`)
	case kindCompletion:
		sw.prefix = []byte(`data: {"id":"` + id + `","object":"text_completion","created":` + created + `,"model":` + string(model) + `,"choices":[`)
	}
	var toks []uint16
	var full strings.Builder // TGI only: generated_text at the end
	var held int32 = -1      // TGI: the last token is held until we know it is last
	next := 0
	for {
		if !s.wait(ctx, sq) {
			return false
		}
		var done bool
		var reason string
		toks, done, reason = sq.read(toks, next)
		sw.buf = sw.buf[:0]
		for _, wd := range toks {
			switch p.kind {
			case kindTGI:
				if held >= 0 {
					sw.tgiToken(uint16(held), sw.n == 0, nil, &full)
					sw.n++
				}
				held = int32(wd)
			default:
				sw.token(p.kind, wd)
			}
			next++
		}
		if done {
			if reason == "error" {
				sq.mu.Lock()
				msg := sq.errorMsg
				sq.mu.Unlock()
				_, body := toOpenAIError(errors.New(msg))
				b, _ := json.Marshal(body)
				sw.buf = append(sw.buf, "data: "...)
				sw.buf = append(sw.buf, b...)
				sw.buf = append(sw.buf, "\n\n"...)
			} else {
				sq.mu.Lock()
				cached := sq.cached
				sq.mu.Unlock()
				switch p.kind {
				case kindTGI:
					// The last event's details are TGI's StreamDetails: what
					// a gateway counts tokens from.
					text := full.String()
					if held >= 0 {
						text += tokenText(uint16(held), sw.n == 0)
					}
					d, _ := json.Marshal(tgiStreamDetails{FinishReason: tgiFinishReason(reason, text, p.stop), GeneratedTokens: next, InputLength: len(sq.prompt)})
					if held >= 0 {
						sw.tgiToken(uint16(held), sw.n == 0, d, &full)
					} else {
						sw.tgiEnd(&full, d)
					}
				default:
					sw.final(p, reason, makeUsage(len(sq.prompt), next, cached))
				}
			}
		}
		if len(sw.buf) > 0 {
			if _, err := w.Write(sw.buf); err != nil {
				s.e.Abort(sq)
				return false
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if done {
			return reason != "error"
		}
	}
}

func (sw *sseWriter) token(k kind, wd uint16) {
	sw.buf = append(sw.buf, sw.prefix...)
	if k == kindChat {
		if sw.n == 0 {
			sw.buf = append(sw.buf, `{"index":0,"delta":{"role":"assistant","content":"`...)
		} else {
			sw.buf = append(sw.buf, `{"index":0,"delta":{"content":"`...)
		}
		sw.buf = append(sw.buf, tokenText(wd, sw.n == 0)...)
		sw.buf = append(sw.buf, `"},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	} else {
		sw.buf = append(sw.buf, `{"index":0,"text":"`...)
		sw.buf = append(sw.buf, tokenText(wd, sw.n == 0)...)
		sw.buf = append(sw.buf, `","logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	sw.n++
}

func (sw *sseWriter) final(p genParams, reason string, u usage) {
	sw.buf = append(sw.buf, sw.prefix...)
	if p.kind == kindChat {
		sw.buf = append(sw.buf, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	} else {
		sw.buf = append(sw.buf, `{"index":0,"text":"","logprobs":null,"finish_reason":"`...)
	}
	sw.buf = append(sw.buf, reason...)
	sw.buf = append(sw.buf, `"}]}`+"\n\n"...)
	if p.includeUsage {
		b, _ := json.Marshal(u)
		sw.buf = append(sw.buf, sw.prefix...)
		sw.buf = append(sw.buf, `],"usage":`...)
		sw.buf = append(sw.buf, b...)
		sw.buf = append(sw.buf, "}\n\n"...)
	}
	sw.buf = append(sw.buf, "data: [DONE]\n\n"...)
}

// tgiStreamDetails is TGI's StreamDetails, on the last stream event.
type tgiStreamDetails struct {
	FinishReason    string  `json:"finish_reason"`
	GeneratedTokens int     `json:"generated_tokens"`
	InputLength     int     `json:"input_length"`
	Seed            *uint64 `json:"seed"` // TGI: only when sampling; the sim is greedy
}

// tgiFinishReason names the engine's finish reason as TGI does: "stop" is
// a stop sequence when the text holds one, else the end-of-sequence token.
func tgiFinishReason(reason, text string, stop []string) string {
	if reason != "stop" {
		return reason // "length"
	}
	for _, st := range stop {
		if strings.Contains(text, st) {
			return "stop_sequence"
		}
	}
	return "eos_token"
}

// tgiToken writes one TGI stream event; the last carries generated_text
// and details (nil: null).
func (sw *sseWriter) tgiToken(wd uint16, first bool, details []byte, full *strings.Builder) {
	text := tokenText(wd, first)
	full.WriteString(text)
	sw.buf = append(sw.buf, `data: {"index":`...)
	sw.buf = strconv.AppendInt(sw.buf, int64(sw.n), 10)
	sw.buf = append(sw.buf, `,"token":{"id":`...)
	sw.buf = strconv.AppendInt(sw.buf, int64(wd), 10)
	sw.buf = append(sw.buf, `,"text":"`...)
	sw.buf = append(sw.buf, text...)
	sw.buf = append(sw.buf, `","logprob":0.0,"special":false},"generated_text":`...)
	if details != nil {
		sw.buf = strconv.AppendQuote(sw.buf, full.String())
	} else {
		sw.buf = append(sw.buf, "null"...)
	}
	sw.appendDetails(details)
}

// tgiEnd closes a TGI stream that produced no visible token.
func (sw *sseWriter) tgiEnd(full *strings.Builder, details []byte) {
	sw.buf = append(sw.buf, `data: {"index":0,"token":{"id":0,"text":"","logprob":0.0,"special":true},"generated_text":`...)
	sw.buf = strconv.AppendQuote(sw.buf, full.String())
	sw.appendDetails(details)
}

func (sw *sseWriter) appendDetails(details []byte) {
	sw.buf = append(sw.buf, `,"details":`...)
	if details == nil {
		details = []byte("null")
	}
	sw.buf = append(sw.buf, details...)
	sw.buf = append(sw.buf, "}\n\n"...)
}
