package engines

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/internal/runtime"
)

// The adapters, by the name ReplicaSpec.Engine and capstan.yaml's engines
// map use.
const (
	Sim      = "sim"
	LlamaCpp = "llamacpp"
	VLLM     = "vllm"
	SGLang   = "sglang"
	TGI      = "tgi"
)

// ModelFormat is what an engine loads from a model folder.
type ModelFormat string

const (
	// FormatHF is a Hugging Face folder: config.json, tokenizer, weights.
	FormatHF ModelFormat = "huggingface"
	// FormatGGUF is one .gguf file (llama.cpp).
	FormatGGUF ModelFormat = "gguf"
)

// Invocations is the SageMaker container contract an engine serves itself.
type Invocations uint8

const (
	// InvocationsNone: no /invocations route; the gateway sends every
	// SageMaker invocation to the engine's OpenAI routes, translating
	// {"inputs","parameters"} bodies and answers (llama.cpp, SGLang).
	InvocationsNone Invocations = iota
	// InvocationsOpenAI: /invocations takes OpenAI completion and chat
	// bodies only (vLLM); TGI-style bodies are translated.
	InvocationsOpenAI
	// InvocationsAll: /invocations takes TGI-style and OpenAI bodies (the
	// simulator, TGI's own messages API aside).
	InvocationsAll
)

// Launch is what an adapter builds one replica's process from.
type Launch struct {
	Spec runtime.ReplicaSpec
	// Binary is the engine's executable (capstan.yaml engines.<name>.binary;
	// for the simulator, the capstan binary).
	Binary string
	// Host and Port are where the engine listens. Port 0 is only valid for
	// engines that announce the port they bound (the simulator).
	Host string
	Port int
	// ModelPath is what the engine loads: the .gguf file for llama.cpp, the
	// model folder (or a Hugging Face id when there is none) for the others.
	ModelPath string
	// ExtraArgs come last (capstan.yaml engines.<name>.args, then the spec's).
	ExtraArgs []string
}

// Adapter is one engine.
type Adapter struct {
	Name string
	// Title names the engine in docs and messages.
	Title string
	// Images are the path.Match patterns of container images (registry
	// host stripped) that select the adapter.
	Images []string
	// DefaultBinary is the executable looked up on PATH when capstan.yaml
	// gives none; "" for the simulator (capstan itself).
	DefaultBinary string
	Format        ModelFormat
	Invocations   Invocations
	// VerboseStop: the engine's OpenAI answers say which stop string ended
	// the text only in llama.cpp's "__verbose" member (stop_type "word"),
	// sent when the request asks with "verbose": true.
	VerboseStop bool
	// AnnouncesPort: the engine prints the port it bound (so it can be
	// given port 0); the others are handed a free port.
	AnnouncesPort bool
	// HealthPath answers 200 once the model is loaded.
	HealthPath string
	// KVEvents: the engine publishes vLLM-style KV cache events, which the
	// kvaware routing policy follows.
	KVEvents bool
	// TieredKV: the engine offloads KV blocks to CPU and a shared store
	// (LMCache under vLLM, the simulator's own tiers).
	TieredKV bool
	// APIKeyEnv is the environment variable the engine reads the API key
	// it requires from (an environment, unlike a command line, is not
	// readable by other local users); "" when it has none, and its port then
	// takes any local caller.
	APIKeyEnv string
	// Metrics maps the engine's /metrics onto capstan's names.
	Metrics MetricMap
	// Unsupported lists what capstan cannot do with this engine, for docs
	// and warnings.
	Unsupported []string

	args func(l Launch) []string
	env  func(l Launch) map[string]string
}

// Args is the replica's command line after the binary.
func (a *Adapter) Args(l Launch) []string {
	return append(a.args(l), l.ExtraArgs...)
}

// Env is the engine's own environment for the replica (device selection),
// added to the runtime's allow-list and the spec's Env. The API key is not
// in it: the runtime sets that last, where the spec's Env cannot replace it
// (APIKeyEnv).
func (a *Adapter) Env(l Launch) map[string]string {
	if a.env == nil {
		return nil
	}
	return a.env(l)
}

// all is the adapter table, in the order docs list it.
var all = []*Adapter{simAdapter, llamaCppAdapter, vllmAdapter, sglangAdapter, tgiAdapter}

// All returns every adapter.
func All() []*Adapter { return slices.Clone(all) }

// Names are the adapter names.
func Names() []string {
	out := make([]string, len(all))
	for i, a := range all {
		out[i] = a.Name
	}
	return out
}

// ByName returns the adapter called name ("" is the simulator).
func ByName(name string) (*Adapter, error) {
	if name == "" {
		return simAdapter, nil
	}
	for _, a := range all {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("engine %q is not one of %s", name, strings.Join(Names(), ", "))
}

// MustByName is ByName for names capstan itself wrote (stored specs).
func MustByName(name string) *Adapter {
	a, err := ByName(name)
	if err != nil {
		return simAdapter
	}
	return a
}

// ErrUnknownImage says an image selects no adapter.
type ErrUnknownImage struct{ Image string }

func (e *ErrUnknownImage) Error() string {
	return fmt.Sprintf("image %q selects no engine: use one of %s", e.Image, strings.Join(ImagePatterns(), ", "))
}

// ForImage returns the adapter a container image selects. An empty image is
// the simulator (a SageMaker model without a container image, or a test).
func ForImage(image string) (*Adapter, error) {
	if image == "" {
		return simAdapter, nil
	}
	name := repository(image)
	for _, a := range all {
		for _, p := range a.Images {
			if ok, _ := path.Match(p, name); ok {
				return a, nil
			}
		}
	}
	return nil, &ErrUnknownImage{Image: image}
}

// ImagePatterns lists every adapter's image patterns, for error messages.
func ImagePatterns() []string {
	var out []string
	for _, a := range all {
		out = append(out, a.Images...)
	}
	return out
}

// repository drops a registry host ("ghcr.io/", an ECR host) and a digest
// from an image reference, keeping the path and tag:
// 763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-lmi11.0.0-cu124
// → djl-inference:0.29.0-lmi11.0.0-cu124.
func repository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if first, rest, ok := strings.Cut(image, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		image = rest
	}
	return strings.ToLower(image)
}
