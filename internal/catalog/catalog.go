package catalog

import (
	"embed"
	"fmt"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

//go:embed data/*.yaml
var dataFS embed.FS

// GPU is one accelerator model.
type GPU struct {
	Name                 string       `json:"name"`
	Aliases              []string     `json:"aliases,omitempty"`
	MemoryBytes          int64        `json:"memoryBytes"`
	BandwidthBytesPerSec float64      `json:"bandwidthBytesPerSec"`
	BF16FLOPS            float64      `json:"bf16FLOPS"`
	MIGProfiles          []MIGProfile `json:"migProfiles,omitempty"`
}

// MIGProfile is one NVIDIA MIG slice shape of a GPU.
type MIGProfile struct {
	Name          string `json:"name"`          // e.g. "3g.40gb"
	ComputeSlices int    `json:"computeSlices"` // N of 7
	MemoryBytes   int64  `json:"memoryBytes"`
	MaxPerGPU     int    `json:"maxPerGPU"`
}

// ComputeFraction is the share of the GPU's compute the slice gets.
func (p MIGProfile) ComputeFraction() float64 { return float64(p.ComputeSlices) / 7 }

// MIGProfile finds a profile by name, accepting an optional "mig-" prefix.
func (g GPU) MIGProfile(name string) (MIGProfile, error) {
	n := strings.TrimPrefix(strings.ToLower(name), "mig-")
	names := make([]string, 0, len(g.MIGProfiles))
	for _, p := range g.MIGProfiles {
		if p.Name == n {
			return p, nil
		}
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return MIGProfile{}, fmt.Errorf("GPU %s does not support MIG", g.Name)
	}
	return MIGProfile{}, fmt.Errorf("unknown MIG profile %q for GPU %s; valid profiles: %s", name, g.Name, strings.Join(names, ", "))
}

// Model is a transformer architecture as the simulated engine needs it.
type Model struct {
	ID             string   `json:"id"`
	Aliases        []string `json:"aliases,omitempty"`
	HubName        string   `json:"hubName,omitempty"`
	Layers         int      `json:"layers"`
	AttentionHeads int      `json:"attentionHeads"`
	KVHeads        int      `json:"kvHeads"`
	HeadDim        int      `json:"headDim"`
	HiddenSize     int      `json:"hiddenSize"`
	Params         int64    `json:"params"`
	DTypeBytes     int      `json:"dtypeBytes"`
	MaxModelLen    int      `json:"maxModelLen"`

	// The fields below complete the Hugging Face config.json shape (see
	// hfconfig.go) so a model folder can be generated from a catalog entry and
	// any config.json can be read into a Model. Zero means "not recorded".
	Architecture      string `json:"architecture,omitempty"` // e.g. LlamaForCausalLM
	ModelType         string `json:"modelType,omitempty"`    // config.json model_type, e.g. llama
	IntermediateSize  int    `json:"intermediateSize,omitempty"`
	VocabSize         int    `json:"vocabSize,omitempty"`
	TieWordEmbeddings bool   `json:"tieWordEmbeddings,omitempty"`
	// Mixture of experts: Experts routed experts per MoE layer, ExpertsPerToken
	// of them active per token; ActiveParams is the per-token parameter count
	// (0 = dense, all Params active).
	Experts             int   `json:"experts,omitempty"`
	ExpertsPerToken     int   `json:"expertsPerToken,omitempty"`
	MoEIntermediateSize int   `json:"moeIntermediateSize,omitempty"`
	ActiveParams        int64 `json:"activeParams,omitempty"`
	// JumpStartIDs are SageMaker JumpStart hub content ids that resolve to this
	// model (JumpStartModel spec.model.modelId).
	JumpStartIDs []string `json:"jumpStartIds,omitempty"`
}

// ActiveParamCount is the number of parameters used per token: ActiveParams
// for a mixture-of-experts model, Params otherwise. Compute (FLOPs per token)
// scales with it; memory for weights scales with Params.
func (m Model) ActiveParamCount() int64 {
	if m.ActiveParams > 0 {
		return m.ActiveParams
	}
	return m.Params
}

// KVBytesPerToken is 2 (K and V) × layers × KV heads × head dim × dtype bytes.
func (m Model) KVBytesPerToken() int64 {
	return 2 * int64(m.Layers) * int64(m.KVHeads) * int64(m.HeadDim) * int64(m.DTypeBytes)
}

// WeightBytes is the size of the weights in memory.
func (m Model) WeightBytes() int64 { return m.Params * int64(m.DTypeBytes) }

// InstanceType is one machine shape.
type InstanceType struct {
	Name         string  `json:"name"`
	GPU          string  `json:"gpu"`
	GPUCount     int     `json:"gpuCount"`
	VCPU         int     `json:"vcpu"`
	MemoryGiB    int     `json:"memoryGiB"`
	PricePerHour float64 `json:"pricePerHour"`
	TrainingPlan bool    `json:"trainingPlan,omitempty"`
}

// Catalog indexes GPUs, models and instance types by name and alias.
type Catalog struct {
	gpus                                map[string]GPU
	models                              map[string]Model
	jumpStart                           map[string]Model // by lower-cased JumpStart id
	instances                           map[string]InstanceType
	gpuNames, modelNames, instanceNames []string
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
	defaultErr  error
)

// Default returns the built-in catalog. The embedded data is checked by tests,
// so a failure here is a build defect and panics.
func Default() *Catalog {
	defaultOnce.Do(func() { defaultCat, defaultErr = load() })
	if defaultErr != nil {
		panic(defaultErr)
	}
	return defaultCat
}

func load() (*Catalog, error) {
	var gpus []GPU
	var models []Model
	var instances []InstanceType
	for file, dst := range map[string]any{"data/gpus.yaml": &gpus, "data/models.yaml": &models, "data/instance_types.yaml": &instances} {
		b, err := dataFS.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict(b, dst); err != nil {
			return nil, fmt.Errorf("catalog %s: %w", file, err)
		}
	}
	return New(gpus, models, instances)
}

// New builds a catalog from explicit entries, checking cross references.
func New(gpus []GPU, models []Model, instances []InstanceType) (*Catalog, error) {
	c := &Catalog{gpus: map[string]GPU{}, models: map[string]Model{}, jumpStart: map[string]Model{}, instances: map[string]InstanceType{}}
	for _, g := range gpus {
		if g.MemoryBytes <= 0 || g.BandwidthBytesPerSec <= 0 || g.BF16FLOPS <= 0 {
			return nil, fmt.Errorf("catalog: gpu %q: memory, bandwidth and FLOP/s must be positive", g.Name)
		}
		c.gpuNames = append(c.gpuNames, g.Name)
		for _, k := range append([]string{g.Name}, g.Aliases...) {
			c.gpus[strings.ToLower(k)] = g
		}
	}
	for _, m := range models {
		if m.Layers <= 0 || m.KVHeads <= 0 || m.HeadDim <= 0 || m.Params <= 0 || m.DTypeBytes <= 0 {
			return nil, fmt.Errorf("catalog: model %q: layers, kvHeads, headDim, params and dtypeBytes must be positive", m.ID)
		}
		c.modelNames = append(c.modelNames, m.ID)
		for _, k := range append([]string{m.ID}, m.Aliases...) {
			c.models[strings.ToLower(k)] = m
		}
		for _, js := range m.JumpStartIDs {
			k := strings.ToLower(js)
			if prev, dup := c.jumpStart[k]; dup {
				return nil, fmt.Errorf("catalog: JumpStart id %q is claimed by both %q and %q", js, prev.ID, m.ID)
			}
			c.jumpStart[k] = m
		}
	}
	for _, it := range instances {
		if _, ok := c.gpus[strings.ToLower(it.GPU)]; !ok {
			return nil, fmt.Errorf("catalog: instance type %q: unknown gpu %q", it.Name, it.GPU)
		}
		if it.GPUCount <= 0 {
			return nil, fmt.Errorf("catalog: instance type %q: gpuCount must be positive", it.Name)
		}
		c.instanceNames = append(c.instanceNames, it.Name)
		c.instances[it.Name] = it
	}
	sort.Strings(c.gpuNames)
	sort.Strings(c.modelNames)
	sort.Strings(c.instanceNames)
	return c, nil
}

// GPU looks a GPU up by name or alias, case-insensitively.
func (c *Catalog) GPU(name string) (GPU, error) {
	if g, ok := c.gpus[strings.ToLower(name)]; ok {
		return g, nil
	}
	return GPU{}, fmt.Errorf("unknown GPU %q; valid GPUs: %s", name, strings.Join(c.gpuNames, ", "))
}

// Model looks a model up by id or alias (e.g. a Hugging Face name), case-insensitively.
func (c *Catalog) Model(id string) (Model, error) {
	if m, ok := c.models[strings.ToLower(id)]; ok {
		return m, nil
	}
	return Model{}, fmt.Errorf("unknown model %q; valid models: %s", id, strings.Join(c.modelNames, ", "))
}

// InstanceType looks an instance type up by its exact ml.* name.
func (c *Catalog) InstanceType(name string) (InstanceType, error) {
	if it, ok := c.instances[name]; ok {
		return it, nil
	}
	return InstanceType{}, fmt.Errorf("unknown instance type %q; valid instance types: %s", name, strings.Join(c.instanceNames, ", "))
}

// GPUNames, ModelIDs and InstanceTypeNames list the canonical names, sorted.
func (c *Catalog) GPUNames() []string          { return append([]string(nil), c.gpuNames...) }
func (c *Catalog) ModelIDs() []string          { return append([]string(nil), c.modelNames...) }
func (c *Catalog) InstanceTypeNames() []string { return append([]string(nil), c.instanceNames...) }
