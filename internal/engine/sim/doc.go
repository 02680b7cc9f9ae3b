// Package sim is capstan's simulated GPU inference engine: a vLLM look-alike
// that needs no GPU. It speaks the OpenAI and SageMaker container HTTP
// contracts, runs a continuous-batching scheduler over a paged KV cache with
// automatic prefix caching, and sleeps (through an injected clock) for the
// duration a roofline model predicts each engine step would take on the
// configured GPU. Tiered KV (CPU L1, shared L2), vLLM-compatible KV events and
// vLLM-named Prometheus metrics make it a faithful stand-in for routers,
// autoscalers and load tests.
//
// It owns: the step-time model and calibration (roofline.go, calibration.go),
// the block manager (blocks.go), the scheduler and engine loop (engine.go,
// seq.go), tier and event plumbing (tiers.go), the HTTP front (server.go,
// respond.go, errors.go), metrics (metrics.go) and process wiring (run.go).
// It does not own the block hashing or tokenizer (internal/kv), the tier
// stores (internal/kv/tier) nor the event wire format (internal/kv/events).
package sim
