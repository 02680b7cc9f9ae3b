package gateway

import (
	"bytes"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

func TestParseUsage(t *testing.T) {
	tests := []struct {
		name                       string
		shape                      int // index in usageShapes
		usage                      string
		prompt, completion, cached int
		ok                         bool
	}{
		{name: "vLLM shape", usage: `{"prompt_tokens":32,"completion_tokens":4,"total_tokens":36,"prompt_tokens_details":{"cached_tokens":16}}`,
			prompt: 32, completion: 4, cached: 16, ok: true},
		{name: "spaces and order", usage: `{ "completion_tokens" : 7 , "prompt_tokens_details" : { "audio_tokens": 0, "cached_tokens" : 3 }, "prompt_tokens" : 9 }`,
			prompt: 9, completion: 7, cached: 3, ok: true},
		{name: "no details", usage: `{"prompt_tokens":5,"completion_tokens":1}`, prompt: 5, completion: 1, ok: true},
		{name: "null details", usage: `{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null}`, prompt: 5, completion: 1, ok: true},
		{name: "unknown members skipped", usage: `{"x":{"prompt_tokens":99},"prompt_tokens":2,"completion_tokens":3}`, prompt: 2, completion: 3, ok: true},
		{name: "escaped key: not fast-parsed", usage: `{"prompt\u005ftokens":2}`, ok: false},
		{name: "float count: not fast-parsed", usage: `{"prompt_tokens":2.0}`, ok: false},
		{name: "truncated", usage: `{"prompt_tokens":2`, ok: false},
		{name: "TGI stream details", shape: 1, usage: `{"finish_reason":"length","generated_tokens":3,"input_length":2,"seed":null}`,
			prompt: 2, completion: 3, ok: true},
		{name: "TGI unary details: no prompt length", shape: 1,
			usage:      `{"finish_reason":"eos_token","generated_tokens":2,"seed":null,"prefill":[],"tokens":[{"id":1,"text":"a","logprob":0.0,"special":false},{"id":2,"text":" b","logprob":0.0,"special":false}]}`,
			completion: 2, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, c, k, ok := parseUsage([]byte(tt.usage), usageShapes[tt.shape])
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && (p != tt.prompt || c != tt.completion || k != tt.cached) {
				t.Fatalf("got %d/%d/%d, want %d/%d/%d", p, c, k, tt.prompt, tt.completion, tt.cached)
			}
		})
	}
}

// TestStreamChunkBoundsASplitEvent: a backend that streams one endless line
// costs the observer a bounded buffer, not memory in proportion to what it
// sends.
func TestStreamChunkBoundsASplitEvent(t *testing.T) {
	o := &Observer{clk: clock.NewFake(time.Unix(0, 0))}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	o.StreamChunk([]byte(": comment "))
	for range 32 { // 2 MiB without a newline
		o.StreamChunk(chunk)
	}
	if len(o.line) > maxUsageScan {
		t.Fatalf("split event buffer grew to %d bytes, over %d", len(o.line), maxUsageScan)
	}
	o.StreamChunk([]byte("\n"))
	if len(o.line) != 0 {
		t.Fatalf("buffer not reset at the end of the line: %d bytes", len(o.line))
	}
}
