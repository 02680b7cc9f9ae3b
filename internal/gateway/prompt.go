package gateway

import (
	"encoding/json"

	"github.com/capstan-dev/capstan/internal/kv"
)

// DefaultBlockSize is assumed until a backend's vllm:cache_config_info says
// otherwise (vLLM's and the simulated engine's default).
const DefaultBlockSize = 16

// promptBody is the part of an OpenAI (or TGI-style SageMaker) request body
// the cache-aware policies read.
type promptBody struct {
	Prompt   json.RawMessage `json:"prompt"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Inputs json.RawMessage `json:"inputs"`
	User   string          `json:"user"`
}

// parse extracts, once, the text the engine will tokenize — rendered exactly
// as the engine does (kv.ChatPrompt for chat) so the router's block hashes
// equal the engine's — and the OpenAI user field.
func (r *SchedRequest) parse() {
	if r.parsed {
		return
	}
	r.parsed = true
	if len(r.Body) == 0 {
		return
	}
	var b promptBody
	if json.Unmarshal(r.Body, &b) != nil {
		return
	}
	r.user = b.User
	switch {
	case len(b.Messages) > 0:
		msgs := make([]kv.Message, len(b.Messages))
		for i, m := range b.Messages {
			msgs[i] = kv.Message{Role: m.Role, Content: contentText(m.Content)}
		}
		r.prompt = kv.ChatPrompt(msgs)
	case len(b.Prompt) > 0:
		r.prompt = oneString(b.Prompt)
	case len(b.Inputs) > 0:
		r.prompt = oneString(b.Inputs)
	}
}

// oneString accepts a JSON string or an array holding one string.
func oneString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) == 1 {
		return many[0]
	}
	return ""
}

// contentText mirrors the engine: a string, or the text parts of an array.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	out := ""
	for _, p := range parts {
		if p.Type == "text" {
			out += p.Text
		}
	}
	return out
}

// User returns the OpenAI "user" field of the body ("" when absent).
func (r *SchedRequest) User() string { r.parse(); return r.user }

// BlockHashes returns the chained hashes of the prompt's full blocks, keyed
// as the engine keys them: seeded with the model id and cut at the block
// size the candidates report. Computed once per invocation.
func (r *SchedRequest) BlockHashes(cands []Candidate) []kv.BlockHash {
	if r.hashed {
		return r.hashes
	}
	r.hashed = true
	r.parse()
	if r.prompt == "" {
		return nil
	}
	model, bs := r.Model, 0
	for _, c := range cands {
		if c.Stats.BlockSize > 0 && bs == 0 {
			bs = c.Stats.BlockSize
		}
		if model == "" && c.Stats.ModelRoot != "" {
			model = c.Stats.ModelRoot
		}
	}
	if bs == 0 {
		bs = DefaultBlockSize
	}
	if model == "" {
		model = r.Endpoint
	}
	r.blockSize = bs
	r.hashRoot = kv.RootHash(model)
	r.hashes = kv.BlockHashes(r.hashRoot, kv.Tokenize(r.prompt), bs)
	return r.hashes
}
