package engines

import "strconv"

// sglangAdapter is SGLang's server (lmsysorg/sglang images), started as
// `python3 -m sglang.launch_server`. It loads a Hugging Face folder and
// serves the OpenAI routes (the gateway translates SageMaker bodies).
var sglangAdapter = &Adapter{
	Name:   SGLang,
	Title:  "SGLang",
	Images: []string{"lmsysorg/sglang", "lmsysorg/sglang:*"},
	// No default: the interpreter of the environment SGLang is installed
	// in must be named (engines.sglang.binary).
	DefaultBinary: "",
	Format:        FormatHF,
	Invocations:   InvocationsNone,
	HealthPath:    "/health",
	Metrics: MetricMap{
		Running:          "sglang:num_running_reqs",
		Waiting:          "sglang:num_queue_reqs",
		KVUsage:          "sglang:token_usage",
		PromptTokens:     "sglang:prompt_tokens_total",
		GenerationTokens: "sglang:generation_tokens_total",
	},
	Unsupported: []string{
		"a per-replica API key (capstan passes none to this engine: its port takes any local caller)",
		"KV events (kvaware routing falls back to prefixaware)",
		"tiered KV cache (l1 / tieredstorage / Redis)",
	},
	args: func(l Launch) []string {
		s := l.Spec
		args := []string{"-m", "sglang.launch_server", "--model-path", l.ModelPath, "--host", l.Host,
			"--port", strconv.Itoa(l.Port), "--enable-metrics"}
		if name := servedName(s.ServedModelName, s.Model, l.ModelPath); name != "" {
			args = append(args, "--served-model-name", name)
		}
		if s.TensorParallel > 1 {
			args = append(args, "--tp-size", strconv.Itoa(s.TensorParallel))
		}
		return args
	},
	env: cudaDevices,
}
