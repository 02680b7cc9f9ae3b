// Package engine is the home of capstan's model servers ("engines"). The
// built-in simulated engine lives in engine/sim; adapters that launch and read
// real servers (vLLM, llama.cpp) live beside it. Engines own the model-server
// wire contract (OpenAI HTTP, SageMaker /invocations and /ping, vLLM-named
// metrics, KV events); they do not know about endpoints, routing or placement.
package engine
