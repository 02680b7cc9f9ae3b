package engines

import (
	"encoding/json"
	"strconv"

	"github.com/capstan-dev/capstan/internal/runtime"
)

// vllmAdapter is vLLM's OpenAI server (vllm/vllm-openai, LMCache's
// lmcache/vllm-openai, SageMaker's LMI images, which run vLLM). It loads a
// Hugging Face folder, serves /invocations with OpenAI bodies, publishes
// KV events when asked, and offloads KV blocks through LMCache.
var vllmAdapter = &Adapter{
	Name:  VLLM,
	Title: "vLLM",
	Images: []string{"vllm/vllm-openai", "vllm/vllm-openai:*", "lmcache/vllm-openai", "lmcache/vllm-openai:*",
		"djl-inference:*lmi*", "deepjavalibrary/djl-serving:*lmi*"},
	DefaultBinary: "vllm",
	Format:        FormatHF,
	Invocations:   InvocationsOpenAI,
	HealthPath:    "/health",
	// vLLM's --api-key guards its /v1 routes only: /invocations and
	// /metrics stay open to local callers (Unsupported says so).
	APIKeyEnv: "VLLM_API_KEY",
	KVEvents:  true,
	TieredKV:  true,
	Metrics:   vllmMetrics,
	Unsupported: []string{
		"the per-replica API key on /invocations and /metrics (vLLM checks it on /v1 routes only)",
	},
	args: func(l Launch) []string {
		s := l.Spec
		args := []string{"serve", l.ModelPath, "--host", l.Host, "--port", strconv.Itoa(l.Port)}
		if name := servedName(s.ServedModelName, s.Model, l.ModelPath); name != "" {
			args = append(args, VLLMFlagServedModelName, name)
		}
		if s.TensorParallel > 1 {
			args = append(args, VLLMFlagTensorParallel, strconv.Itoa(s.TensorParallel))
		}
		if s.KVTiers.Any() {
			args = append(args, VLLMFlagKVTransferConfig, VLLMLMCacheTransferConfig)
		}
		if s.KVEventsEndpoint != "" {
			args = append(args, VLLMFlagKVEventsConfig, VLLMKVEventsConfig(s.KVEventsEndpoint, VLLMKVEventsTopic))
		}
		return args
	},
	env: func(l Launch) map[string]string {
		env := cudaDevices(l)
		for k, v := range lmcacheEnv(l.Spec.KVTiers) {
			if env == nil {
				env = map[string]string{}
			}
			env[k] = v
		}
		return env
	},
}

// The vLLM flags capstan sets, by name: the local runtime writes them on the
// command line it starts vLLM with, and the Kubernetes operator adds them to
// a manifest's own args (unless those set them), so both name them from here.
const (
	VLLMFlagServedModelName  = "--served-model-name"
	VLLMFlagTensorParallel   = "--tensor-parallel-size"
	VLLMFlagKVTransferConfig = "--kv-transfer-config"
	VLLMFlagKVEventsConfig   = "--kv-events-config"
)

// VLLMLMCacheTransferConfig is the --kv-transfer-config value that hands
// vLLM's KV cache offload to LMCache (its vLLM v1 connector, both storing
// and loading blocks): what KV tiers below the GPU mean for vLLM.
const VLLMLMCacheTransferConfig = `{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`

// VLLMKVEventsTopic is the topic the local runtime's vLLM publishes KV
// events on (capstan's subscriber takes every topic; the operator's pods put
// the pod's address in theirs).
const VLLMKVEventsTopic = "kv-events"

// VLLMKVEventsConfig is the --kv-events-config value, vLLM's
// KVEventsConfig as JSON, for a ZMQ publisher bound at endpoint (such as
// tcp://*:5557) publishing on topic.
func VLLMKVEventsConfig(endpoint, topic string) string {
	cfg, _ := json.Marshal(map[string]any{"enable_kv_cache_events": true, "publisher": "zmq",
		"endpoint": endpoint, "topic": topic})
	return string(cfg)
}

// LMCacheChunkSize is LMCACHE_CHUNK_SIZE in tokens: LMCache's own default,
// written down so the chunk the router and the cache agree on is visible.
const LMCacheChunkSize = 256

// LMCacheEnv is LMCache's environment for the tiers (nil when none is on),
// as vLLM replicas get it: the local runtime's and the operator's pods.
// RedisURL is LMCache's remote backend, whatever its scheme.
func LMCacheEnv(t runtime.KVTiers) map[string]string { return lmcacheEnv(t) }

// lmcacheEnv is LMCache's configuration (its LMCACHE_* variables) for the
// tiers: the CPU tier is LMCache's local CPU backend, tieredstorage its
// local disk backend, Redis its remote backend. Sizes are in GB, as
// LMCache reads them.
func lmcacheEnv(t runtime.KVTiers) map[string]string {
	if !t.Any() {
		return nil
	}
	gb := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', -1, 64) }
	env := map[string]string{"LMCACHE_CHUNK_SIZE": strconv.Itoa(LMCacheChunkSize), "LMCACHE_LOCAL_CPU": "False"}
	if t.CPUBytes > 0 {
		env["LMCACHE_LOCAL_CPU"] = "True"
		env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = gb(t.CPUBytes)
	}
	if t.StorageBytes > 0 {
		env["LMCACHE_LOCAL_DISK"] = "file://" + t.StorageDir + "/"
		env["LMCACHE_MAX_LOCAL_DISK_SIZE"] = gb(t.StorageBytes)
	}
	if t.RedisURL != "" {
		env["LMCACHE_REMOTE_URL"] = t.RedisURL
		env["LMCACHE_REMOTE_SERDE"] = "naive"
	}
	return env
}

// servedName is the name an engine answers to: the served name, else the
// catalog model when a folder is loaded (so requests naming it match).
func servedName(served, model, modelPath string) string {
	if served != "" {
		return served
	}
	if model != "" && model != modelPath {
		return model
	}
	return ""
}
