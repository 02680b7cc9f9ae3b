// Package engines is the one seam between capstan and the model servers its
// replicas run: capstan's simulated engine, llama.cpp's llama-server, vLLM,
// SGLang and TGI. Each adapter owns, in one file, everything that differs
// between engines: which container images select it, the command line and
// environment of a replica, its readiness check, the model format it loads,
// how its /metrics map onto the names capstan's routing, triggers and
// reports read, and what the gateway must translate for it. The local
// runtime, both doors and the gateway take all of that from here.
package engines
