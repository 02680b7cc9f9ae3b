package engines

import "strconv"

// LlamaCppSlots is llama-server's parallel decoding slots (-np) unless
// capstan.yaml's engines.llamacpp.args say otherwise.
const LlamaCppSlots = 4

// llamaCppAdapter is llama.cpp's llama-server (ghcr.io/ggml-org/llama.cpp
// server images). It loads one .gguf file, serves the OpenAI routes but not
// /invocations, and exports llamacpp:* metrics only with --metrics. It
// keeps each slot's prompt for reuse (prefix caching per slot) but
// publishes no KV events and has no KV tiers.
var llamaCppAdapter = &Adapter{
	Name:          LlamaCpp,
	Title:         "llama.cpp llama-server",
	Images:        []string{"ggml-org/llama.cpp:server*", "ggerganov/llama.cpp:server*", "ggml-org/llama.cpp:full*"},
	DefaultBinary: "llama-server",
	Format:        FormatGGUF,
	Invocations:   InvocationsNone,
	VerboseStop:   true,
	HealthPath:    "/health",
	// llama-server's --api-key: every route but /health and /v1/models.
	APIKeyEnv: "LLAMA_API_KEY",
	Metrics: MetricMap{
		Running: "llamacpp:requests_processing",
		Waiting: "llamacpp:requests_deferred",
		// Its prompt counter leaves out the tokens a slot reused: those are
		// the prefix cache's hits, and the two together its lookups.
		PromptTokens:         "llamacpp:prompt_tokens_total",
		PromptExcludesCached: true,
		PrefixHits:           "llamacpp:prompt_tokens_cached_total",
		GenerationTokens:     "llamacpp:tokens_predicted_total",
	},
	Unsupported: []string{
		"KV events (kvaware routing falls back to prefixaware)",
		"tiered KV cache (l1 / tieredstorage / Redis)",
		"KV cache usage in metrics (the KV report shows none)",
		"Hugging Face model folders (it loads .gguf files)",
	},
	args: func(l Launch) []string {
		s := l.Spec
		name := s.ServedModelName
		if name == "" {
			name = s.Model
		}
		args := []string{"--model", l.ModelPath, "--host", l.Host, "--port", strconv.Itoa(l.Port),
			"--parallel", strconv.Itoa(LlamaCppSlots), "--metrics", "--no-webui"}
		if name != "" {
			args = append(args, "--alias", name)
		}
		if gpuDevice(s) {
			// Every layer on the GPU; llama.cpp splits them across the
			// visible devices.
			args = append(args, "--n-gpu-layers", "999")
		}
		return args
	},
	env: cudaDevices,
}
