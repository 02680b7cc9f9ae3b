// Package gateway owns the inference data path: per-endpoint routes (variants
// and their replica backends), variant choice by weight, backend choice by a
// pluggable routing policy (filters + scorers, Gateway API Inference
// Extension style: round robin, random, least outstanding requests, and the
// cache-aware prefixaware, kvaware and session policies with a load guard),
// proxying with bounded retries, passive ejection and active health checks,
// a per-endpoint admission queue, the scale-from-zero activator (requests
// to an endpoint with no backend are held, the route's Activator is asked
// once per episode, and they are released in order by the SetRoute that
// brings a backend; activator.go), in-flight accounting and draining,
// per-endpoint counters for autoscaling (Snapshot, snapshot.go), the
// backends' scraped load (vLLM metrics) and KV event index, and the
// Prometheus metrics for all of it (metrics.go, the one place).
//
// Protocol edges (SageMaker Runtime in internal/sagemaker/runtimeapi, OpenAI
// in ./openai) sit on top: they call Invoke and map its typed errors to their
// own wire errors. The gateway must not know either wire format beyond
// reading a prompt out of a request body for cache-aware routing.
package gateway
