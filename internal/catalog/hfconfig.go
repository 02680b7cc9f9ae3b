package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxHFConfigBytes bounds a config.json; real ones are a few KiB.
const MaxHFConfigBytes = 1 << 20

// DefaultMaxModelLen is used when a config.json names no context length.
const DefaultMaxModelLen = 4096

// hfConfig is the subset of a Hugging Face transformers config.json that
// determines the shapes the simulated engine needs. Pointers tell "absent"
// from zero. Older GPT-2 style names (n_embd, n_layer, …) are read as
// fallbacks.
type hfConfig struct {
	Architectures     []string `json:"architectures"`
	ModelType         string   `json:"model_type"`
	NameOrPath        string   `json:"_name_or_path"`
	HiddenSize        *int     `json:"hidden_size"`
	NumHiddenLayers   *int     `json:"num_hidden_layers"`
	NumAttentionHeads *int     `json:"num_attention_heads"`
	NumKeyValueHeads  *int     `json:"num_key_value_heads"`
	MultiQuery        *bool    `json:"multi_query"`
	HeadDim           *int     `json:"head_dim"`
	IntermediateSize  *int     `json:"intermediate_size"`
	VocabSize         *int     `json:"vocab_size"`
	TorchDType        string   `json:"torch_dtype"`
	DType             string   `json:"dtype"` // transformers ≥ 4.56 writes "dtype"
	MaxPosition       *int     `json:"max_position_embeddings"`
	TieWordEmbeddings *bool    `json:"tie_word_embeddings"`

	// Mixture of experts, under each family's name.
	NumLocalExperts     *int `json:"num_local_experts"` // Mixtral
	NumExperts          *int `json:"num_experts"`       // Qwen2-MoE, Qwen3-MoE
	NRoutedExperts      *int `json:"n_routed_experts"`  // DeepSeek-V2/V3
	NumExpertsPerTok    *int `json:"num_experts_per_tok"`
	MoEIntermediateSize *int `json:"moe_intermediate_size"`
	SharedExpertInter   *int `json:"shared_expert_intermediate_size"` // Qwen2-MoE
	NSharedExperts      *int `json:"n_shared_experts"`                // DeepSeek
	FirstKDense         *int `json:"first_k_dense_replace"`           // DeepSeek: leading dense layers

	// GPT-2 style fallbacks.
	NEmbd      *int `json:"n_embd"`
	NLayer     *int `json:"n_layer"`
	NHead      *int `json:"n_head"`
	NInner     *int `json:"n_inner"`
	NPositions *int `json:"n_positions"`

	// Multimodal wrappers keep the language model under text_config.
	TextConfig json.RawMessage `json:"text_config"`
}

// ungatedTypes are model families whose MLP has two matrices (up, down)
// instead of the gated three (gate, up, down) of Llama-style models.
var ungatedTypes = map[string]bool{
	"gpt2": true, "gpt_neox": true, "gpt_bigcode": true, "opt": true, "falcon": true,
	"bloom": true, "gptj": true, "phi": true, "starcoder2": true,
}

// dtypeBytes maps torch dtype names onto bytes per parameter.
var dtypeBytes = map[string]int{
	"float32": 4, "float": 4, "fp32": 4,
	"bfloat16": 2, "float16": 2, "half": 2, "bf16": 2, "fp16": 2,
	"float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1, "fp8": 1,
}

// ModelFromHFConfig reads a Hugging Face config.json into a Model with ID
// name. Parameter counts are derived from the shapes: embeddings (and a
// separate LM head unless tie_word_embeddings), per layer the Q/K/V/O
// projections, the (gated) MLP or the routed and shared experts plus the
// router, and the RMS/LayerNorm weights; biases are ignored (< 0.1 %).
// KV bytes per token follow from layers × KV heads × head_dim × dtype.
// Errors name the missing or invalid config.json key.
func ModelFromHFConfig(name string, data []byte) (Model, error) {
	if strings.TrimSpace(name) == "" {
		return Model{}, errors.New("config.json: model name is empty")
	}
	if len(data) > MaxHFConfigBytes {
		return Model{}, fmt.Errorf("config.json: %d bytes exceeds the %d byte limit", len(data), MaxHFConfigBytes)
	}
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return Model{}, fmt.Errorf("config.json: %w", err)
	}
	if c.HiddenSize == nil && c.NEmbd == nil && len(c.TextConfig) > 0 && !bytes.Equal(bytes.TrimSpace(c.TextConfig), []byte("null")) {
		var tc hfConfig
		if err := json.Unmarshal(c.TextConfig, &tc); err != nil {
			return Model{}, fmt.Errorf("config.json: text_config: %w", err)
		}
		if len(tc.Architectures) == 0 {
			tc.Architectures = c.Architectures
		}
		if tc.TorchDType == "" && tc.DType == "" {
			tc.TorchDType, tc.DType = c.TorchDType, c.DType
		}
		if tc.TieWordEmbeddings == nil {
			tc.TieWordEmbeddings = c.TieWordEmbeddings
		}
		c = tc
	}
	var errs []error
	need := func(key string, vals ...*int) int {
		for _, v := range vals {
			if v != nil {
				if *v <= 0 {
					errs = append(errs, fmt.Errorf("config.json: %s must be positive, got %d", key, *v))
					return 0
				}
				return *v
			}
		}
		errs = append(errs, fmt.Errorf("config.json: %s is required", key))
		return 0
	}
	hidden := need("hidden_size", c.HiddenSize, c.NEmbd)
	layers := need("num_hidden_layers", c.NumHiddenLayers, c.NLayer)
	heads := need("num_attention_heads", c.NumAttentionHeads, c.NHead)
	vocab := need("vocab_size", c.VocabSize)
	if len(errs) > 0 {
		return Model{}, errors.Join(errs...)
	}
	kvHeads := heads
	switch {
	case c.NumKeyValueHeads != nil:
		kvHeads = need("num_key_value_heads", c.NumKeyValueHeads)
	case c.MultiQuery != nil && *c.MultiQuery:
		kvHeads = 1
	}
	headDim := 0
	if c.HeadDim != nil {
		headDim = need("head_dim", c.HeadDim)
	} else if hidden%heads != 0 {
		errs = append(errs, fmt.Errorf("config.json: hidden_size %d is not a multiple of num_attention_heads %d; set head_dim", hidden, heads))
	} else {
		headDim = hidden / heads
	}
	if kvHeads > 0 && heads%kvHeads != 0 {
		errs = append(errs, fmt.Errorf("config.json: num_attention_heads %d is not a multiple of num_key_value_heads %d", heads, kvHeads))
	}

	experts := firstInt(c.NumLocalExperts, c.NumExperts, c.NRoutedExperts)
	var inter, moeInter, perTok int
	switch {
	case c.IntermediateSize != nil:
		inter = need("intermediate_size", c.IntermediateSize)
	case c.NInner != nil:
		inter = need("n_inner", c.NInner)
	case c.NEmbd != nil: // GPT-2: n_inner null means 4 × n_embd
		inter = 4 * hidden
	case experts == 0:
		errs = append(errs, errors.New("config.json: intermediate_size is required"))
	}
	if experts < 0 {
		errs = append(errs, fmt.Errorf("config.json: number of experts must not be negative, got %d", experts))
	}
	if experts > 0 {
		perTok = need("num_experts_per_tok", c.NumExpertsPerTok)
		moeInter = inter
		if c.MoEIntermediateSize != nil {
			moeInter = need("moe_intermediate_size", c.MoEIntermediateSize)
		} else if inter == 0 {
			errs = append(errs, errors.New("config.json: intermediate_size or moe_intermediate_size is required for a mixture-of-experts model"))
		}
		if perTok > experts {
			errs = append(errs, fmt.Errorf("config.json: num_experts_per_tok %d exceeds the %d experts", perTok, experts))
		}
	}

	dt := strings.ToLower(strings.TrimPrefix(firstString(c.TorchDType, c.DType), "torch."))
	dtBytes := 2 // transformers' usual half-precision checkpoints
	if dt != "" {
		b, ok := dtypeBytes[dt]
		if !ok {
			errs = append(errs, fmt.Errorf("config.json: torch_dtype %q is not supported (want float32, bfloat16, float16 or float8_e4m3fn)", dt))
		}
		dtBytes = b
	}
	maxLen := firstInt(c.MaxPosition, c.NPositions)
	if maxLen < 0 {
		errs = append(errs, fmt.Errorf("config.json: max_position_embeddings must be positive, got %d", maxLen))
	} else if maxLen == 0 {
		maxLen = DefaultMaxModelLen
	}
	if len(errs) > 0 {
		return Model{}, errors.Join(errs...)
	}

	m := Model{
		ID: name, Layers: layers, AttentionHeads: heads, KVHeads: kvHeads, HeadDim: headDim,
		HiddenSize: hidden, DTypeBytes: dtBytes, MaxModelLen: maxLen,
		ModelType: c.ModelType, IntermediateSize: inter, VocabSize: vocab,
		// transformers' PretrainedConfig defaults tie_word_embeddings to true.
		TieWordEmbeddings: c.TieWordEmbeddings == nil || *c.TieWordEmbeddings,
		Experts:           experts, ExpertsPerToken: perTok, MoEIntermediateSize: moeInter,
	}
	if len(c.Architectures) > 0 {
		m.Architecture = c.Architectures[0]
	}
	shared := 0
	switch {
	case c.SharedExpertInter != nil:
		shared = *c.SharedExpertInter
	case c.NSharedExperts != nil && moeInter > 0:
		shared = *c.NSharedExperts * moeInter
	}
	denseLayers := 0
	if experts > 0 && c.FirstKDense != nil {
		denseLayers = min(max(*c.FirstKDense, 0), layers)
	}
	m.Params, m.ActiveParams = paramCounts(m, shared, denseLayers)
	return m, nil
}

// paramCounts derives (total, active) parameters from the shapes. active is
// 0 for a dense model.
func paramCounts(m Model, sharedInter, denseLayers int) (total, active int64) {
	h, hd := int64(m.HiddenSize), int64(m.HeadDim)
	mats := int64(3)
	if ungatedTypes[m.ModelType] {
		mats = 2
	}
	embed := int64(m.VocabSize) * h
	if !m.TieWordEmbeddings {
		embed *= 2
	}
	attn := h*int64(m.AttentionHeads)*hd*2 + h*int64(m.KVHeads)*hd*2 // Q,O + K,V
	norms := 2 * h
	dense := mats * h * int64(m.IntermediateSize)
	if m.Experts == 0 {
		total = embed + h + int64(m.Layers)*(attn+norms+dense)
		return total, 0
	}
	expert := mats * h * int64(m.MoEIntermediateSize)
	shared := mats * h * int64(sharedInter)
	router := h * int64(m.Experts)
	sparse := int64(m.Layers - denseLayers)
	base := embed + h + int64(m.Layers)*(attn+norms) + int64(denseLayers)*dense + sparse*(shared+router)
	total = base + sparse*int64(m.Experts)*expert
	active = base + sparse*int64(m.ExpertsPerToken)*expert
	return total, active
}

// HFConfigJSON writes a Hugging Face style config.json for a catalog model,
// so that a JumpStart model gets a model folder like any other source. It
// needs the full shape (intermediateSize, vocabSize); reading the result back
// with ModelFromHFConfig gives the same architecture.
func HFConfigJSON(m Model) ([]byte, error) {
	if m.IntermediateSize <= 0 && m.MoEIntermediateSize <= 0 || m.VocabSize <= 0 {
		return nil, fmt.Errorf("catalog model %q lacks intermediateSize/vocabSize; cannot write a config.json", m.ID)
	}
	dt := "bfloat16"
	switch m.DTypeBytes {
	case 4:
		dt = "float32"
	case 1:
		dt = "float8_e4m3fn"
	}
	arch := m.Architecture
	if arch == "" {
		arch = "LlamaForCausalLM"
	}
	mt := m.ModelType
	if mt == "" {
		mt = "llama"
	}
	name := m.ID
	if len(m.Aliases) > 0 && strings.Contains(m.Aliases[0], "/") {
		name = m.Aliases[0] // the Hugging Face repo id
	}
	cfg := map[string]any{
		"_name_or_path":           name,
		"architectures":           []string{arch},
		"model_type":              mt,
		"hidden_size":             m.HiddenSize,
		"num_hidden_layers":       m.Layers,
		"num_attention_heads":     m.AttentionHeads,
		"num_key_value_heads":     m.KVHeads,
		"head_dim":                m.HeadDim,
		"vocab_size":              m.VocabSize,
		"max_position_embeddings": m.MaxModelLen,
		"torch_dtype":             dt,
		"tie_word_embeddings":     m.TieWordEmbeddings,
	}
	if m.IntermediateSize > 0 {
		cfg["intermediate_size"] = m.IntermediateSize
	}
	if m.Experts > 0 {
		cfg["num_local_experts"] = m.Experts
		cfg["num_experts_per_tok"] = m.ExpertsPerToken
		if m.MoEIntermediateSize > 0 {
			cfg["moe_intermediate_size"] = m.MoEIntermediateSize
		}
	}
	return json.MarshalIndent(cfg, "", "  ")
}

func firstInt(vals ...*int) int {
	for _, v := range vals {
		if v != nil {
			return *v
		}
	}
	return 0
}

func firstString(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
