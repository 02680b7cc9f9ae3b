// Package engine is the home of capstan's model servers ("engines"). The
// built-in simulated engine lives in engine/sim; adapters that launch and read
// real servers (vLLM, llama.cpp) live beside it. Engines own the model-server
// wire contract (OpenAI HTTP, SageMaker /invocations and /ping, vLLM-named
// metrics, KV events); they do not know about endpoints, routing or placement.
package engine

// MaxRequestBytes is the largest request body an engine takes, part of the
// wire contract: the front doors refuse a larger body before it is buffered
// and routed, and the simulated engine refuses one sent to it directly.
const MaxRequestBytes = 8 << 20
