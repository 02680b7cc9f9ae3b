package engines

import "strconv"

// tgiAdapter is Hugging Face Text Generation Inference
// (ghcr.io/huggingface/text-generation-inference, SageMaker's
// huggingface-pytorch-tgi-inference images), started as
// text-generation-launcher. It serves /invocations with TGI bodies itself.
var tgiAdapter = &Adapter{
	Name:  TGI,
	Title: "Text Generation Inference",
	Images: []string{"huggingface/text-generation-inference", "huggingface/text-generation-inference:*",
		"huggingface-pytorch-tgi-inference:*"},
	DefaultBinary: "text-generation-launcher",
	Format:        FormatHF,
	Invocations:   InvocationsAll,
	HealthPath:    "/health",
	Metrics: MetricMap{
		Running:          "tgi_batch_current_size",
		Waiting:          "tgi_queue_size",
		PromptTokens:     "tgi_request_input_length",
		GenerationTokens: "tgi_request_generated_tokens",
		TokenHistograms:  true,
	},
	Unsupported: []string{
		"a per-replica API key (capstan passes none to this engine: its port takes any local caller)",
		"KV events (kvaware routing falls back to prefixaware)",
		"tiered KV cache (l1 / tieredstorage / Redis)",
		"KV cache usage in metrics (kvaware and the KV report show none)",
	},
	args: func(l Launch) []string {
		s := l.Spec
		args := []string{"--model-id", l.ModelPath, "--hostname", l.Host, "--port", strconv.Itoa(l.Port)}
		if s.TensorParallel > 1 {
			args = append(args, "--num-shard", strconv.Itoa(s.TensorParallel))
		}
		return args
	},
	env: cudaDevices,
}
