package catalog

import (
	"slices"
	"strings"
	"testing"
)

// The popular JumpStart LLM ids resolve to the catalog model of their
// architecture.
func TestJumpStartIDTable(t *testing.T) {
	c := Default()
	tests := []struct {
		id, model string
		layers    int
	}{
		{"meta-textgeneration-llama-3-1-8b-instruct", "llama-3.1-8b", 32},
		{"meta-textgeneration-llama-3-1-70b-instruct", "llama-3.1-70b", 80},
		{"meta-textgeneration-llama-3-3-70b-instruct", "llama-3.1-70b", 80},
		{"meta-textgeneration-llama-3-8b-instruct", "llama-3.1-8b", 32},
		{"meta-textgeneration-llama-3-2-1b", "llama-3.2-1b", 16},
		{"meta-textgeneration-llama-3-2-1b-instruct", "llama-3.2-1b", 16},
		{"meta-textgeneration-llama-3-2-3b", "llama-3.2-3b", 28},
		{"meta-textgeneration-llama-3-2-3b-instruct", "llama-3.2-3b", 28},
		{"huggingface-llm-qwen2-5-0-5b-instruct", "qwen2.5-0.5b", 24},
		{"huggingface-llm-qwen2-5-1-5b-instruct", "qwen2.5-1.5b", 28},
		{"huggingface-llm-qwen2-5-3b-instruct", "qwen2.5-3b", 36},
		{"huggingface-llm-qwen2-5-7b-instruct", "qwen2.5-7b", 28},
		{"huggingface-llm-qwen2-5-14b-instruct", "qwen2.5-14b", 48},
		{"huggingface-llm-qwen2-5-32b-instruct", "qwen2.5-32b", 64},
		{"huggingface-llm-qwen2-5-72b-instruct", "qwen2.5-72b", 80},
		{"huggingface-llm-qwen2-5-coder-7b-instruct", "qwen2.5-coder-7b", 28},
		{"huggingface-llm-mistral-7b-instruct", "mistral-7b", 32},
		{"huggingface-llm-mistral-7b-instruct-v3", "mistral-7b", 32},
		{"huggingface-llm-mixtral-8x7b-instruct", "mixtral-8x7b", 32},
		{"huggingface-llm-gemma-2-2b-instruct", "gemma-2-2b", 26},
		{"huggingface-llm-gemma-2-9b-instruct", "gemma-2-9b", 42},
		{"huggingface-llm-gemma-2-27b-instruct", "gemma-2-27b", 46},
		{"huggingface-llm-phi-3-mini-4k-instruct", "phi-3-mini", 32},
		{"deepseek-llm-r1-distill-llama-8b", "deepseek-r1-distill-llama-8b", 32},
		{"deepseek-llm-r1-distill-llama-70b", "deepseek-r1-distill-llama-70b", 80},
		{"deepseek-llm-r1-distill-qwen-1-5b", "deepseek-llm-r1-distill-qwen-1-5b", 28},
		{"HuggingFace-LLM-Gemma-2-9B-Instruct", "gemma-2-9b", 42}, // case-insensitive
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m, err := c.JumpStartModel(tt.id)
			if err != nil || m.ID != tt.model || m.Layers != tt.layers {
				t.Fatalf("JumpStartModel(%q) = %s (%d layers), %v; want %s (%d layers)", tt.id, m.ID, m.Layers, err, tt.model, tt.layers)
			}
		})
	}
	// The MoE entry carries its active parameters (compute follows them).
	if m, _ := c.Model("mixtral-8x7b"); m.ActiveParamCount() >= m.Params/3 || m.Experts != 8 {
		t.Fatalf("mixtral-8x7b: active %d of %d params, %d experts", m.ActiveParamCount(), m.Params, m.Experts)
	}
}

func TestUnknownJumpStartIDListsCloseMatches(t *testing.T) {
	c := Default()
	tests := []struct {
		id      string
		want    []string // each must be offered
		notWant []string // none of these may be
	}{
		{"meta-textgeneration-llama-3-2-11b-vision-instruct",
			[]string{"meta-textgeneration-llama-3-2-1b-instruct", "meta-textgeneration-llama-3-2-3b-instruct"}, []string{"huggingface-llm-gemma-2-9b"}},
		{"huggingface-llm-gemma-2-9b-it", []string{"huggingface-llm-gemma-2-9b"}, []string{"huggingface-llm-qwen2-5-7b-instruct"}},
		{"huggingface-llm-qwen2-5-7b-instruc", []string{"huggingface-llm-qwen2-5-7b-instruct"}, []string{"meta-textgeneration-llama-3-1-8b"}},
		{"huggingface-llm-mistral-8b-instruct", []string{"huggingface-llm-mistral-7b-instruct"}, []string{"huggingface-llm-gemma-2-2b"}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			_, err := c.JumpStartModel(tt.id)
			if err == nil || !strings.Contains(err.Error(), tt.id) || !strings.Contains(err.Error(), "did you mean") {
				t.Fatalf("err = %v; want an unknown-id error with suggestions", err)
			}
			close := c.CloseJumpStartIDs(tt.id, 5)
			for _, w := range tt.want {
				if !slices.Contains(close, w) || !strings.Contains(err.Error(), w) {
					t.Errorf("suggestions %v (err %v) lack %s", close, err, w)
				}
			}
			for _, nw := range tt.notWant {
				if slices.Contains(close, nw) {
					t.Errorf("suggestions %v include the unrelated %s", close, nw)
				}
			}
		})
	}
	if got := c.CloseJumpStartIDs("huggingface-llm-gemma-2-9b-it", 1); len(got) != 1 || got[0] != "huggingface-llm-gemma-2-9b" {
		t.Fatalf("closest = %v", got)
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"llama-3-2-1b", "llama-3-2-3b", 1}} {
		if got := levenshtein(tt.a, tt.b); got != tt.d {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}

// JumpStart's default container follows the hub family: TGI for
// huggingface-llm-*, LMI for the rest and for catalog ids.
func TestJumpStartImage(t *testing.T) {
	for _, tt := range []struct{ id, want string }{
		{"huggingface-llm-qwen2-5-7b-instruct", JumpStartTGIImage},
		{"HuggingFace-LLM-Gemma-2-9B-Instruct", JumpStartTGIImage},
		{"meta-textgeneration-llama-3-1-8b-instruct", JumpStartLMIImage},
		{"deepseek-llm-r1-distill-qwen-1-5b", JumpStartLMIImage},
		{"llama-3.1-8b", JumpStartLMIImage},
	} {
		if got := JumpStartImage(tt.id); got != tt.want {
			t.Errorf("JumpStartImage(%q) = %s, want %s", tt.id, got, tt.want)
		}
	}
}
