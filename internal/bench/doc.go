// Package bench is capstan's LLM load generator: it builds seeded workloads
// (random, shared-prefix, multi-turn, working-set, file) whose prompt lengths
// are exact under the kv tokenizer rule, offers them to one or more
// OpenAI-compatible or SageMaker targets on a schedule (constant, Poisson,
// fixed concurrency, sweep), measures every streamed request (TTFT,
// inter-token latencies, TPOT, E2E, tokens, cached tokens), and reports
// summaries, SLO goodput and the target's own Prometheus counters as a table,
// a JSON file and a self-contained HTML page.
//
// It owns nothing on the server side: it only speaks the public wire protocols,
// so it measures capstan, vLLM or anything else the same way. Arrival
// scheduling reads an injected clock.Clock so tests can step it; latencies use
// the same clock (the real one's monotonic reading in production).
package bench
