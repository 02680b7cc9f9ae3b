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
	KVEvents:      true,
	TieredKV:      true,
	Metrics:       vllmMetrics,
	args: func(l Launch) []string {
		s := l.Spec
		args := []string{"serve", l.ModelPath, "--host", l.Host, "--port", strconv.Itoa(l.Port)}
		if name := servedName(s.ServedModelName, s.Model, l.ModelPath); name != "" {
			args = append(args, "--served-model-name", name)
		}
		if s.TensorParallel > 1 {
			args = append(args, "--tensor-parallel-size", strconv.Itoa(s.TensorParallel))
		}
		if s.KVTiers.Any() {
			args = append(args, "--kv-transfer-config", `{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`)
		}
		if s.KVEventsEndpoint != "" {
			cfg, _ := json.Marshal(map[string]any{"enable_kv_cache_events": true, "publisher": "zmq",
				"endpoint": s.KVEventsEndpoint, "topic": "kv-events"})
			args = append(args, "--kv-events-config", string(cfg))
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

// lmcacheEnv is LMCache's configuration (its LMCACHE_* variables) for the
// tiers: the CPU tier is LMCache's local CPU backend, tieredstorage its
// local disk backend, Redis its remote backend. Sizes are in GB, as
// LMCache reads them.
func lmcacheEnv(t runtime.KVTiers) map[string]string {
	if !t.Any() {
		return nil
	}
	gb := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', -1, 64) }
	env := map[string]string{"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "False"}
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
