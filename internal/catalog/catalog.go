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
	// Kind is DeviceGPU (empty in the data), DeviceAccelerator (a non-NVIDIA
	// accelerator such as Inferentia2) or DeviceCPU (synthesised for a
	// CPU-only instance type, named after it; see CPUPlatform).
	Kind string `json:"kind,omitempty"`
	// MFU and BandwidthEfficiency, when set, replace the simulated engine's
	// GPU calibration constants for this device (CPU devices set both).
	MFU                 float64 `json:"mfu,omitempty"`
	BandwidthEfficiency float64 `json:"bandwidthEfficiency,omitempty"`
	// StepOverheadSeconds, when set, replaces the engine's fixed cost per
	// step outside the kernels (CPU devices: llama.cpp's, not vLLM's).
	StepOverheadSeconds float64 `json:"stepOverheadSeconds,omitempty"`
	// SamplingSecondsPerEntry is the time sampling takes per vocabulary
	// entry of each token scored, on devices that sample on the CPU (zero:
	// negligible, as on GPUs).
	SamplingSecondsPerEntry float64 `json:"samplingSecondsPerEntry,omitempty"`
	// CacheBytes, when set, is a last-level cache a step's bytes stream
	// from at CacheBandwidthBytesPerSec when they all fit in it (CPUs).
	CacheBytes                int64   `json:"cacheBytes,omitempty"`
	CacheBandwidthBytesPerSec float64 `json:"cacheBandwidthBytesPerSec,omitempty"`
}

// Device kinds (GPU.Kind).
const (
	DeviceGPU         = "gpu"
	DeviceAccelerator = "accelerator"
	DeviceCPU         = "cpu"
)

// DeviceKind is g.Kind, DeviceGPU when unset.
func (g GPU) DeviceKind() string {
	if g.Kind == "" {
		return DeviceGPU
	}
	return g.Kind
}

// CPUPlatform is the processor of CPU-only instance types: what a device
// synthesised from an instance's vCPU count and memory gets (data/cpus.yaml).
type CPUPlatform struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// BandwidthPerVCPU is the memory bandwidth one vCPU draws (bytes/s),
	// capped at MaxBandwidth for the instance.
	BandwidthPerVCPU float64 `json:"bandwidthPerVCPU"`
	MaxBandwidth     float64 `json:"maxBandwidth"`
	// FLOPSPerVCPU is the peak FP32 FLOP/s of one vCPU.
	FLOPSPerVCPU        float64 `json:"flopsPerVCPU"`
	MFU                 float64 `json:"mfu"`
	BandwidthEfficiency float64 `json:"bandwidthEfficiency"`
	// StepOverheadSeconds is the engine's fixed cost per step on this
	// platform (scheduling, building the batch), sampling aside.
	StepOverheadSeconds float64 `json:"stepOverheadSeconds"`
	// SamplingSecondsPerEntry is the CPU time of sampling (penalties,
	// top-k/top-p over the logits) per vocabulary entry of a scored token.
	SamplingSecondsPerEntry float64 `json:"samplingSecondsPerEntry"`
	// CacheBytes is the processor's last-level cache (shared by the
	// socket, so a small instance can use all of it) and
	// CacheBandwidthPerVCPU its read bandwidth per vCPU: a step whose
	// weights and KV fit in it reads them from there, not from DRAM.
	CacheBytes            int64   `json:"cacheBytes"`
	CacheBandwidthPerVCPU float64 `json:"cacheBandwidthPerVCPU"`
	// ReservedGiB of the instance's memory are left to the OS and container.
	ReservedGiB int `json:"reservedGiB"`
}

// Device is the engine device p gives an instance of vcpu vCPUs and memGiB
// GiB, named name.
func (p CPUPlatform) Device(name string, vcpu, memGiB int) GPU {
	return GPU{Name: name, Kind: DeviceCPU,
		MemoryBytes:          int64(max(memGiB-p.ReservedGiB, 0)) << 30,
		BandwidthBytesPerSec: min(float64(vcpu)*p.BandwidthPerVCPU, p.MaxBandwidth),
		BF16FLOPS:            float64(vcpu) * p.FLOPSPerVCPU,
		MFU:                  p.MFU, BandwidthEfficiency: p.BandwidthEfficiency, StepOverheadSeconds: p.StepOverheadSeconds,
		SamplingSecondsPerEntry: p.SamplingSecondsPerEntry,
		CacheBytes:              p.CacheBytes, CacheBandwidthBytesPerSec: float64(vcpu) * p.CacheBandwidthPerVCPU}
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
	Name string `json:"name"`
	GPU  string `json:"gpu,omitempty"`
	// CPU names the CPUPlatform of a CPU-only type (GPU empty, GPUCount 0).
	CPU          string  `json:"cpu,omitempty"`
	GPUCount     int     `json:"gpuCount"`
	VCPU         int     `json:"vcpu"`
	MemoryGiB    int     `json:"memoryGiB"`
	PricePerHour float64 `json:"pricePerHour"`
	TrainingPlan bool    `json:"trainingPlan,omitempty"`
	// LocalStorageGB is the local NVMe instance store in decimal GB (AWS
	// publishes it so: ml.g5.xlarge 250 GB); 0 means none (EBS only).
	// capstan's tieredstorage KV tier lives on it.
	LocalStorageGB int `json:"localStorageGB,omitempty"`
}

// LocalStorageBytes is LocalStorageGB in bytes.
func (it InstanceType) LocalStorageBytes() int64 { return int64(it.LocalStorageGB) * 1e9 }

// IsCPU reports whether it has no GPU or accelerator.
func (it InstanceType) IsCPU() bool { return it.CPU != "" }

// Device is the catalog device name replicas on it run on (the engine's
// --gpu): the GPU for a GPU type, the instance type itself for a CPU type.
func (it InstanceType) Device() string {
	if it.IsCPU() {
		return it.Name
	}
	return it.GPU
}

// Devices is how many devices a replica on it spans at most (1 for CPU).
func (it InstanceType) Devices() int { return max(it.GPUCount, 1) }

// Catalog indexes GPUs, models and instance types by name and alias.
type Catalog struct {
	gpus                                map[string]GPU
	models                              map[string]Model
	jumpStart                           map[string]Model // by lower-cased JumpStart id
	instances                           map[string]InstanceType
	cpus                                map[string]CPUPlatform
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
	var cpus []CPUPlatform
	for file, dst := range map[string]any{"data/gpus.yaml": &gpus, "data/models.yaml": &models, "data/instance_types.yaml": &instances, "data/cpus.yaml": &cpus} {
		b, err := dataFS.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict(b, dst); err != nil {
			return nil, fmt.Errorf("catalog %s: %w", file, err)
		}
	}
	return New(gpus, models, instances, cpus...)
}

// New builds a catalog from explicit entries, checking cross references.
// CPU-only instance types name one of cpus; each gets a device of kind
// DeviceCPU under its own name (GPU(it.Name)), not listed in GPUNames.
func New(gpus []GPU, models []Model, instances []InstanceType, cpus ...CPUPlatform) (*Catalog, error) {
	c := &Catalog{gpus: map[string]GPU{}, models: map[string]Model{}, jumpStart: map[string]Model{}, instances: map[string]InstanceType{}, cpus: map[string]CPUPlatform{}}
	for _, p := range cpus {
		if p.BandwidthPerVCPU <= 0 || p.MaxBandwidth <= 0 || p.FLOPSPerVCPU <= 0 || p.MFU <= 0 || p.MFU > 1 || p.BandwidthEfficiency <= 0 || p.BandwidthEfficiency > 1 || p.ReservedGiB < 0 ||
			p.StepOverheadSeconds <= 0 || p.StepOverheadSeconds > 0.1 || p.SamplingSecondsPerEntry < 0 || p.SamplingSecondsPerEntry > 1e-6 ||
			p.CacheBytes < 0 || p.CacheBandwidthPerVCPU < 0 || (p.CacheBytes > 0) != (p.CacheBandwidthPerVCPU > 0) {
			return nil, fmt.Errorf("catalog: cpu %q: bandwidth and FLOP/s must be positive, mfu and bandwidthEfficiency in (0, 1], stepOverheadSeconds in (0, 0.1], samplingSecondsPerEntry in [0, 1e-6], cacheBytes and cacheBandwidthPerVCPU both set or both 0", p.Name)
		}
		c.cpus[strings.ToLower(p.Name)] = p
	}
	for _, g := range gpus {
		switch g.Kind {
		case "", DeviceGPU, DeviceAccelerator:
		default:
			return nil, fmt.Errorf("catalog: gpu %q: kind %q must be %s or %s", g.Name, g.Kind, DeviceGPU, DeviceAccelerator)
		}
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
		if it.LocalStorageGB < 0 {
			return nil, fmt.Errorf("catalog: instance type %q: localStorageGB must not be negative", it.Name)
		}
		if it.CPU != "" {
			p, ok := c.cpus[strings.ToLower(it.CPU)]
			switch {
			case !ok:
				return nil, fmt.Errorf("catalog: instance type %q: unknown cpu %q", it.Name, it.CPU)
			case it.GPU != "" || it.GPUCount != 0:
				return nil, fmt.Errorf("catalog: instance type %q: a CPU type has no gpu and gpuCount 0", it.Name)
			case it.TrainingPlan:
				return nil, fmt.Errorf("catalog: instance type %q: training plans reserve GPU types only", it.Name)
			case it.VCPU <= 0 || it.MemoryGiB <= p.ReservedGiB:
				return nil, fmt.Errorf("catalog: instance type %q: vcpu and memoryGiB (above the platform's reserve) must be positive", it.Name)
			}
			if _, dup := c.gpus[strings.ToLower(it.Name)]; dup {
				return nil, fmt.Errorf("catalog: instance type %q clashes with a GPU name", it.Name)
			}
			c.gpus[strings.ToLower(it.Name)] = p.Device(it.Name, it.VCPU, it.MemoryGiB)
			c.instanceNames = append(c.instanceNames, it.Name)
			c.instances[it.Name] = it
			continue
		}
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

// GPU looks a device up by name or alias, case-insensitively: a GPU, an
// accelerator, or the CPU device of a CPU-only instance type (by its ml.* name).
func (c *Catalog) GPU(name string) (GPU, error) {
	if g, ok := c.gpus[strings.ToLower(name)]; ok {
		return g, nil
	}
	return GPU{}, fmt.Errorf("unknown GPU %q; valid GPUs: %s (or a CPU instance type such as ml.m5.xlarge)", name, strings.Join(c.gpuNames, ", "))
}

// DeviceMemoryBytes is the device memory a replica on it can use: GPU
// memory × GPU count, or the CPU device's memory for a CPU type.
func (c *Catalog) DeviceMemoryBytes(it InstanceType) (int64, error) {
	g, err := c.GPU(it.Device())
	if err != nil {
		return 0, err
	}
	return g.MemoryBytes * int64(it.Devices()), nil
}

// CPUMemoryUtilization is the share of a CPU device's memory a model
// server uses by default (its --gpu-memory-utilization).
const CPUMemoryUtilization = 0.9

// WeightFilesFit says why a model whose weight files take n bytes cannot
// load on instance type it, nil when they fit: the files are what the
// engine loads, so more than the instance's GPU memory (on a CPU instance,
// the share of its memory the model server uses) fails at load.
func (c *Catalog) WeightFilesFit(n int64, it InstanceType) error {
	mem, err := c.DeviceMemoryBytes(it)
	if err != nil {
		return err
	}
	if it.IsCPU() {
		usable := float64(mem) * CPUMemoryUtilization
		if float64(n) <= usable {
			return nil
		}
		return fmt.Errorf("its weight files take %.1f GB; CPU instance type %s has %d GiB of memory (%.1f GB usable by the model server)",
			float64(n)/1e9, it.Name, it.MemoryGiB, usable/1e9)
	}
	if n <= mem {
		return nil
	}
	return fmt.Errorf("its weight files take %.1f GB; %s has %.1f GB of GPU memory", float64(n)/1e9, it.Name, float64(mem)/1e9)
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
