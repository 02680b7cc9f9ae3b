package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway/internal/jsonscan"
)

// The measuring here is what every front door does to an engine's
// response, so that a request records the same time-to-first-byte,
// time-to-first-token, inter-token and token metrics whichever API it came
// in by (OpenAI or SageMaker runtime); the doors differ only in how they
// frame the bytes they relay.

// Measure returns the recorder for res and records its time to first byte:
// the engine's response headers have arrived. Call it once, right after
// Invoke returns res; times count from the start of that Invoke, so the
// door's own reading of the request body is not in them.
func (g *Gateway) Measure(inv Invocation, res *Result) *Observer {
	o := g.Observer(inv, res)
	o.clk, o.start = g.clock, res.start
	o.FirstByte(clock.Since(g.clock, res.start))
	return o
}

// bufPool holds copy buffers: one per response in flight, not one per
// request allocated and cleared (which showed at thousands of requests/s).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// maxUsageScan bounds how much of a non-streaming response is kept to read
// its usage object.
const maxUsageScan = 256 << 10

// Copy relays a non-streaming response body to w and records the token
// usage it reports. A write error is the caller's; a read error is wrapped
// with "read from backend".
func (o *Observer) Copy(w io.Writer, body io.Reader) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	n, kept := 0, []byte(nil)
	for {
		m, err := body.Read(buf[n:])
		n += m
		if err == nil && n < len(buf) {
			continue
		}
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return fmt.Errorf("write to client: %w", werr)
			}
			if kept != nil || err != io.EOF { // more than one buffer: keep a copy
				if len(kept)+n <= maxUsageScan {
					kept = append(kept, buf[:n]...)
				}
			} else {
				kept = buf[:n] // the common case: the whole body in one buffer
			}
			n = 0
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read from backend: %w", err)
		}
	}
	o.scanUsage(kept)
	return nil
}

var (
	dataPrefix = []byte("data: ")
	doneLine   = []byte("[DONE]")
	emptyChoic = []byte(`"choices":[]`)
)

// StreamChunk records the server-sent events in chunk, the next bytes of a
// streamed response (text/event-stream, as vLLM, TGI and the simulated
// engine stream) after the door relayed them: the first event carrying a
// token gives the time to first token, each later one an inter-token gap,
// and a usage object (OpenAI's stream_options.include_usage) the token
// counts. Events may be split across chunks. Call it only on a recorder
// from Measure, in order, from one goroutine.
func (o *Observer) StreamChunk(chunk []byte) {
	now := o.clk.Now()
	for len(chunk) > 0 {
		nl := bytes.IndexByte(chunk, '\n')
		if nl < 0 {
			o.keepPartial(chunk)
			return
		}
		line := chunk[:nl]
		if len(o.line) > 0 {
			o.keepPartial(line)
			line = o.line
		}
		chunk = chunk[nl+1:]
		o.event(line, now)
		o.line = o.line[:0]
	}
}

// keepPartial keeps the start of an event split across chunks, up to
// maxUsageScan: a backend streaming one endless line costs a bounded buffer
// (and that event's metrics), never memory in proportion to what it sends.
func (o *Observer) keepPartial(b []byte) {
	if room := maxUsageScan - len(o.line); room > 0 {
		o.line = append(o.line, b[:min(len(b), room)]...)
	}
}

func (o *Observer) event(line []byte, now time.Time) {
	data, ok := bytes.CutPrefix(line, dataPrefix)
	if !ok || bytes.Equal(data, doneLine) {
		return
	}
	o.scanUsage(data)
	if bytes.Contains(data, emptyChoic) {
		return // the usage-only chunk carries no token
	}
	if o.last.IsZero() {
		o.FirstToken(now.Sub(o.start))
	} else {
		o.InterToken(now.Sub(o.last))
	}
	o.last = now
}

// usageShape is where an engine reports a response's token counts.
type usageShape struct {
	key                []byte // the object's member name, quoted, with ":{"
	prompt, completion string // its count members
}

var usageShapes = [...]usageShape{
	// OpenAI (vLLM, SGLang, TGI's Messages API, the simulated engine):
	// "usage", also cached prompt tokens in prompt_tokens_details.
	{[]byte(`"usage":{`), "prompt_tokens", "completion_tokens"},
	// TGI's own API (SageMaker's TGI and LMI containers): the stream's last
	// event carries "details" with input_length; a unary answer carries it
	// only with parameters.details, and without the prompt's length.
	{[]byte(`"details":{`), "input_length", "generated_tokens"},
}

// scanUsage finds a usage object (usageShapes) in a JSON response and parses
// only it (a whole-body parse cost more than the rest of the front door).
func (o *Observer) scanUsage(b []byte) {
	for _, sh := range usageShapes {
		i := bytes.Index(b, sh.key)
		if i < 0 {
			continue
		}
		start := i + len(sh.key) - 1 // at the '{'
		end, err := jsonscan.SkipValue(b, start)
		if err != nil {
			return
		}
		if prompt, completion, cached, ok := parseUsage(b[start:end], sh); ok {
			o.Usage(prompt, completion, cached)
			return
		}
		var u map[string]json.RawMessage
		if json.Unmarshal(b[start:end], &u) != nil {
			return
		}
		var prompt, completion int
		var details struct {
			CachedTokens int `json:"cached_tokens"`
		}
		for _, f := range [...]struct {
			key string
			dst *int
		}{{sh.prompt, &prompt}, {sh.completion, &completion}} {
			if v, ok := u[f.key]; ok && json.Unmarshal(v, f.dst) != nil {
				return
			}
		}
		if d, ok := u["prompt_tokens_details"]; ok {
			_ = json.Unmarshal(d, &details)
		}
		o.Usage(prompt, completion, details.CachedTokens)
		return
	}
}

// parseUsage reads sh's prompt and completion counts and
// prompt_tokens_details.cached_tokens from a usage object without
// building a value (json.Unmarshal here was the front door's largest own
// cost per request). ok is false for anything unexpected (a non-integer
// count, escapes in keys, bad JSON): the caller then decodes it properly.
func parseUsage(b []byte, sh usageShape) (prompt, completion, cached int, ok bool) {
	num := func(v []byte, dst *int) error {
		if string(v) == "null" {
			return nil
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return err
		}
		*dst = n
		return nil
	}
	err := jsonscan.EachMember(b, func(key, val []byte) error {
		switch string(key) {
		case sh.prompt:
			return num(val, &prompt)
		case sh.completion:
			return num(val, &completion)
		case "prompt_tokens_details":
			if string(val) == "null" {
				return nil
			}
			return jsonscan.EachMember(val, func(k, v []byte) error {
				if string(k) == "cached_tokens" {
					return num(v, &cached)
				}
				return nil
			})
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			return jsonscan.ErrBadJSON // an escaped key could spell one of the above
		}
		return nil
	})
	return prompt, completion, cached, err == nil
}
