package catalog

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func within(got, want int64, pct float64) bool {
	return math.Abs(float64(got)-float64(want)) <= pct/100*float64(want)
}

// Real config.json files (testdata/hfconfig) read into Models; the expected
// parameter counts are the published model sizes, not derived from the code.
func TestModelFromHFConfigRealConfigs(t *testing.T) {
	tests := []struct {
		file          string
		layers, heads int
		kvHeads       int
		headDim       int
		maxLen        int
		params        int64 // published total
		active        int64 // published active (MoE), 0 = dense
		kvBytes       int64
		arch          string
		catalogID     string // the catalog entry for the same model, if any
	}{
		{file: "Llama-3.1-8B-Instruct.json", layers: 32, heads: 32, kvHeads: 8, headDim: 128, maxLen: 131072,
			params: 8_030_000_000, kvBytes: 131072, arch: "LlamaForCausalLM", catalogID: "llama-3.1-8b"},
		{file: "Qwen2.5-7B-Instruct.json", layers: 28, heads: 28, kvHeads: 4, headDim: 128, maxLen: 32768,
			params: 7_620_000_000, kvBytes: 57344, arch: "Qwen2ForCausalLM", catalogID: "qwen2.5-7b"},
		{file: "Qwen3-32B.json", layers: 64, heads: 64, kvHeads: 8, headDim: 128, maxLen: 40960,
			params: 32_800_000_000, kvBytes: 262144, arch: "Qwen3ForCausalLM", catalogID: "qwen3-32b"},
		{file: "Mixtral-8x7B-Instruct-v0.1.json", layers: 32, heads: 32, kvHeads: 8, headDim: 128, maxLen: 32768,
			params: 46_700_000_000, active: 12_900_000_000, kvBytes: 131072, arch: "MixtralForCausalLM"},
		{file: "Qwen3-30B-A3B.json", layers: 48, heads: 32, kvHeads: 4, headDim: 128, maxLen: 40960,
			params: 30_500_000_000, active: 3_300_000_000, kvBytes: 2 * 48 * 4 * 128 * 2, arch: "Qwen3MoeForCausalLM"},
		{file: "gpt2.json", layers: 12, heads: 12, kvHeads: 12, headDim: 64, maxLen: 1024,
			params: 124_000_000, kvBytes: 2 * 12 * 12 * 64 * 2, arch: "GPT2LMHeadModel"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".json"), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "hfconfig", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			m, err := ModelFromHFConfig("x", data)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != "x" || m.Layers != tt.layers || m.AttentionHeads != tt.heads || m.KVHeads != tt.kvHeads || m.HeadDim != tt.headDim || m.MaxModelLen != tt.maxLen {
				t.Fatalf("shape = id %q layers %d heads %d kv %d headDim %d maxLen %d", m.ID, m.Layers, m.AttentionHeads, m.KVHeads, m.HeadDim, m.MaxModelLen)
			}
			if m.Architecture != tt.arch || m.DTypeBytes != 2 {
				t.Fatalf("architecture %q dtype %d", m.Architecture, m.DTypeBytes)
			}
			if !within(m.Params, tt.params, 2) {
				t.Errorf("Params = %d, published %d (more than 2%% off)", m.Params, tt.params)
			}
			if tt.active == 0 && m.ActiveParams != 0 {
				t.Errorf("dense model has ActiveParams %d", m.ActiveParams)
			}
			if tt.active != 0 && !within(m.ActiveParams, tt.active, 3) {
				t.Errorf("ActiveParams = %d, published %d (more than 3%% off)", m.ActiveParams, tt.active)
			}
			if got := m.KVBytesPerToken(); got != tt.kvBytes {
				t.Errorf("KVBytesPerToken = %d, want %d", got, tt.kvBytes)
			}
			if tt.catalogID == "" {
				return
			}
			c, err := Default().Model(tt.catalogID)
			if err != nil {
				t.Fatal(err)
			}
			if !within(m.Params, c.Params, 1) {
				t.Errorf("Params = %d, catalog %s has %d (more than 1%% off)", m.Params, c.ID, c.Params)
			}
			if m.KVBytesPerToken() != c.KVBytesPerToken() || m.HiddenSize != c.HiddenSize || m.IntermediateSize != c.IntermediateSize || m.VocabSize != c.VocabSize || m.MaxModelLen != c.MaxModelLen {
				t.Errorf("derived %+v disagrees with catalog %+v", m, c)
			}
		})
	}
}

func TestModelFromHFConfigErrors(t *testing.T) {
	base := map[string]any{
		"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
		"num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
	}
	with := func(k string, v any) []byte {
		m := map[string]any{}
		for kk, vv := range base {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return b
	}
	tests := []struct {
		name, model string
		data        []byte
		wantErr     string
	}{
		{"not json", "m", []byte("{"), "config.json"},
		{"empty name", " ", with("x", 1), "model name is empty"},
		{"no hidden_size", "m", with("hidden_size", nil), "hidden_size is required"},
		{"no layers", "m", with("num_hidden_layers", nil), "num_hidden_layers is required"},
		{"no vocab", "m", with("vocab_size", nil), "vocab_size is required"},
		{"no intermediate", "m", with("intermediate_size", nil), "intermediate_size is required"},
		{"negative heads", "m", with("num_attention_heads", -4), "num_attention_heads must be positive"},
		{"kv heads do not divide", "m", with("num_key_value_heads", 5), "not a multiple of num_key_value_heads"},
		{"hidden not divisible", "m", with("hidden_size", 4001), "set head_dim"},
		{"bad dtype", "m", with("torch_dtype", "complex64"), `torch_dtype "complex64"`},
		{"experts without top-k", "m", with("num_local_experts", 8), "num_experts_per_tok is required"},
		{"too big", "m", []byte(`{"x":"` + strings.Repeat("a", MaxHFConfigBytes) + `"}`), "byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ModelFromHFConfig(tt.model, tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestModelFromHFConfigVariants(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		check   func(Model) bool
		explain string
	}{
		{"text_config of a multimodal wrapper",
			`{"architectures":["LlavaForConditionalGeneration"],"torch_dtype":"float16","text_config":{"hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"intermediate_size":11008,"vocab_size":32064,"max_position_embeddings":4096}}`,
			func(m Model) bool {
				return m.Layers == 32 && m.KVHeads == 32 && m.Architecture == "LlavaForConditionalGeneration" && m.DTypeBytes == 2
			}, "layers 32, kv heads default to attention heads, architecture from the wrapper"},
		{"float32 and dtype key",
			`{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100,"dtype":"float32"}`,
			func(m Model) bool {
				return m.DTypeBytes == 4 && m.MaxModelLen == DefaultMaxModelLen && m.TieWordEmbeddings
			},
			"4 bytes, default context, tied embeddings by default"},
		{"multi-query",
			`{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"multi_query":true,"n_inner":256,"vocab_size":100,"model_type":"gpt_bigcode"}`,
			func(m Model) bool { return m.KVHeads == 1 && m.IntermediateSize == 256 }, "1 KV head"},
		{"fp8 checkpoint",
			`{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100,"torch_dtype":"float8_e4m3fn"}`,
			func(m Model) bool { return m.DTypeBytes == 1 && m.WeightBytes() == m.Params }, "1 byte per parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ModelFromHFConfig("v", []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(m) {
				t.Fatalf("got %+v, want %s", m, tt.explain)
			}
		})
	}
}

// Every catalog model can be written as a config.json and read back with the
// same architecture; this is how JumpStart ids become model folders.
func TestHFConfigJSONRoundTrip(t *testing.T) {
	c := Default()
	for _, id := range c.ModelIDs() {
		t.Run(id, func(t *testing.T) {
			want, _ := c.Model(id)
			data, err := HFConfigJSON(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ModelFromHFConfig(want.ID, data)
			if err != nil {
				t.Fatal(err)
			}
			if got.KVBytesPerToken() != want.KVBytesPerToken() || got.MaxModelLen != want.MaxModelLen || got.HiddenSize != want.HiddenSize || got.AttentionHeads != want.AttentionHeads {
				t.Fatalf("round trip changed the shape: %+v vs %+v", got, want)
			}
			if !within(got.Params, want.Params, 1.5) {
				t.Fatalf("derived Params %d vs catalog %d: the catalog's shape numbers are inconsistent", got.Params, want.Params)
			}
		})
	}
	if _, err := HFConfigJSON(Model{ID: "bare", Layers: 1}); err == nil {
		t.Fatal("a model without intermediateSize/vocabSize must not produce a config.json")
	}
}

func TestJumpStartModel(t *testing.T) {
	c := Default()
	tests := []struct{ id, want string }{
		{"deepseek-llm-r1-distill-qwen-1-5b", "deepseek-llm-r1-distill-qwen-1-5b"},
		{"meta-textgeneration-llama-3-1-8b-instruct", "llama-3.1-8b"},
		{"huggingface-llm-qwen2-5-7b-instruct", "qwen2.5-7b"},
		{"Llama-3.1-8B-Instruct", "llama-3.1-8b"}, // catalog alias fallback
		{"Qwen2.5-7B-Instruct", "qwen2.5-7b"},
		{"llama-3.1-8b-fp8", "llama-3.1-8b-fp8"}, // catalog id fallback: no hub id is known
		{"neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b-fp8"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m, err := c.JumpStartModel(tt.id)
			if err != nil || m.ID != tt.want {
				t.Fatalf("JumpStartModel(%q) = %q, %v; want %q", tt.id, m.ID, err, tt.want)
			}
		})
	}
	_, err := c.JumpStartModel("huggingface-llm-nonexistent")
	if err == nil || !strings.Contains(err.Error(), "huggingface-llm-nonexistent") || !strings.Contains(err.Error(), "no known id is close") {
		t.Fatalf("unknown id error = %v; want it to name the id and say nothing is close", err)
	}
	if _, err := New(nil, []Model{
		{ID: "a", Layers: 1, KVHeads: 1, HeadDim: 1, Params: 1, DTypeBytes: 2, JumpStartIDs: []string{"dup"}},
		{ID: "b", Layers: 1, KVHeads: 1, HeadDim: 1, Params: 1, DTypeBytes: 2, JumpStartIDs: []string{"DUP"}},
	}, nil); err == nil {
		t.Fatal("duplicate JumpStart ids must be rejected")
	}
}

func BenchmarkModelFromHFConfig(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "hfconfig", "Mixtral-8x7B-Instruct-v0.1.json"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ModelFromHFConfig("mixtral", data); err != nil {
			b.Fatal(err)
		}
	}
}
