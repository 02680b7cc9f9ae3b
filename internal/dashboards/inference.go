package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// ep filters a series by the endpoint variable. Replica series carry the
// endpoint label only when service discovery found them behind a
// SageMaker endpoint; "All" (.*) matches series without it too.
const ep = `{endpoint=~"$endpoint"}`

// byReplicaOwner groups replica series by what service discovery says they
// serve: a SageMaker endpoint's variant, or a manifest deployment; legend
// shows whichever the series carries.
const (
	byReplicaOwner     = "endpoint, variant, namespace, deployment"
	replicaOwnerLegend = "{{endpoint}}{{namespace}} {{variant}}{{deployment}}"
)

// Inference is the dashboard of traffic through capstan's front doors
// (SageMaker runtime, response streams, OpenAI), the engines behind them and
// the replicas serving them.
func Inference() (dashboard.Dashboard, error) {
	b := newDashboard(InferenceUID, "capstan / Inference",
		"Requests, latency, TTFB and TTFT, tokens, KV cache and replicas of capstan's endpoints and deployments.").
		WithVariable(labelVar("endpoint", "Endpoint", "capstan_gateway_requests_total"))

	b.WithRow(dashboard.NewRowBuilder("Traffic and latency"))
	b.WithPanel(series("Request rate by endpoint, variant and status",
		"Finished invocations per second through every front door, by the upstream status code (error: no response arrived).", "reqps",
		q(`sum by (endpoint, variant, status) (rate(capstan_gateway_requests_total`+ep+rate+`))`, "{{endpoint}}/{{variant}} {{status}}")))
	b.WithPanel(series("Error ratio",
		"Share of invocations that did not end in a 2xx (4xx, 5xx, 429 rejections and requests no backend answered).", "percentunit",
		// "or … * 0": an endpoint without errors shows 0, not no data.
		q(`(sum by (endpoint, variant) (rate(capstan_gateway_requests_total{endpoint=~"$endpoint", status!~"2.."}`+rate+`)) or sum by (endpoint, variant) (rate(capstan_gateway_requests_total`+ep+rate+`)) * 0) / sum by (endpoint, variant) (rate(capstan_gateway_requests_total`+ep+rate+`))`, "{{endpoint}}/{{variant}}")))
	b.WithPanel(series("Latency p50/p95/p99",
		"Time from invocation to the end of the response body.", "s",
		quantiles("capstan_gateway_request_duration_seconds", ep, "endpoint, variant", "{{endpoint}}/{{variant}}")...))
	b.WithPanel(series("Time to first byte (TTFB) p50/p95/p99",
		"Time from invocation to the first response byte from the backend.", "s",
		quantiles("capstan_gateway_time_to_first_byte_seconds", ep, "endpoint, variant", "{{endpoint}}/{{variant}}")...))
	b.WithPanel(series("Time to first token (TTFT) p50/p95/p99",
		"Streams (response streams, OpenAI stream=true): time from invocation to the first chunk carrying generated text.", "s",
		quantiles("capstan_gateway_time_to_first_token_seconds", ep, "endpoint, variant", "{{endpoint}}/{{variant}}")...))
	b.WithPanel(series("Inter-token latency p50/p95/p99",
		"Streams: time between successive chunks carrying generated text.", "s",
		quantiles("capstan_gateway_inter_token_latency_seconds", ep, "endpoint, variant", "{{endpoint}}/{{variant}}")...))

	b.WithRow(dashboard.NewRowBuilder("Tokens and KV cache"))
	b.WithPanel(series("Tokens per second in and out",
		"Prompt (in) and completion (out) tokens per second, from the responses' usage.", "suffix: tok/s",
		q(`sum by (endpoint, variant, direction) (rate(capstan_gateway_tokens_total`+ep+rate+`))`, "{{endpoint}}/{{variant}} {{direction}}")))
	b.WithPanel(rightAxis(series("KV hit rate by tier",
		"Left axis: the engines' prefix-cache hit rate (vLLM's prefix_cache_hits / prefix_cache_queries, in tokens; "+
			"the GPU tier, and with capstan's tiered KV cache also the blocks loaded back from L1 and L2), "+
			"and the share of prompt tokens the responses report as cached (served). "+
			"Right axis: KV blocks per second loaded from each tier below the GPU (l1: host memory, tieredstorage: the node's shared disk store, l2: Redis).", "percentunit",
		q(`sum by (`+byReplicaOwner+`) (rate(vllm:prefix_cache_hits_total`+ep+rate+`)) / sum by (`+byReplicaOwner+`) (rate(vllm:prefix_cache_queries_total`+ep+rate+`))`, replicaOwnerLegend+" gpu prefix cache"),
		q(`sum by (`+byReplicaOwner+`, tier) (rate(capstan_engine_kv_tier_hits_total`+ep+rate+`))`, replicaOwnerLegend+" {{tier}} blocks/s"),
		q(`sum by (endpoint) (rate(capstan_gateway_prompt_cached_tokens_total{endpoint=~"$endpoint", source="served"}`+rate+`)) / sum by (endpoint) (rate(capstan_gateway_tokens_total{endpoint=~"$endpoint", direction="in"}`+rate+`))`, "{{endpoint}} served from cache"),
	), "B", "suffix: blocks/s"))
	b.WithPanel(series("Engine KV cache usage",
		"Share of the engines' GPU KV blocks in use (vLLM's kv_cache_usage_perc), averaged over an endpoint's or deployment's replicas.", "percentunit",
		q(`avg by (`+byReplicaOwner+`) (vllm:kv_cache_usage_perc`+ep+`)`, replicaOwnerLegend)))
	b.WithPanel(series("Engine requests running and waiting",
		"Requests in the engines' batches (running) and in their queues (waiting), summed over replicas.", "short",
		q(`sum by (`+byReplicaOwner+`) (vllm:num_requests_running`+ep+`)`, replicaOwnerLegend+" running"),
		q(`sum by (`+byReplicaOwner+`) (vllm:num_requests_waiting`+ep+`)`, replicaOwnerLegend+" waiting")))

	b.WithRow(dashboard.NewRowBuilder("Queue, replicas and scaling"))
	b.WithPanel(series("Queue depth and held requests",
		"Requests waiting at the gateway for a concurrency slot (queued), held by the activator until an endpoint at zero has its first replica (held), and forwarded but not finished (in flight).", "short",
		q(`sum by (endpoint) (capstan_gateway_queued_requests`+ep+`)`, "{{endpoint}} queued"),
		q(`sum by (endpoint) (capstan_gateway_held_requests`+ep+`)`, "{{endpoint}} held"),
		q(`sum by (endpoint, variant) (capstan_gateway_in_flight_requests`+ep+`)`, "{{endpoint}}/{{variant}} in flight")))
	b.WithPanel(series("Replicas desired vs ready (endpoints)",
		"SageMaker endpoints: the instance count each production variant should have (desired) and the replicas serving (ready).", "short",
		q(`sum by (endpoint, variant, state) (capstan_endpoint_replicas`+ep+`)`, "{{endpoint}}/{{variant}} {{state}}")))
	b.WithPanel(series("Replicas desired vs ready (deployments)",
		"Manifest deployments (InferenceEndpointConfig, JumpStartModel): desired and ready replicas.", "short",
		q(`sum by (namespace, name, state) (capstan_deployment_replicas{state=~"desired|ready"})`, "{{namespace}}/{{name}} {{state}}")))
	b.WithPanel(series("Scaling decisions",
		"Manifest autoscaler decisions per interval by reason (each poll decides once; DesiredWithinRange is the steady state), and activations (a request asked an endpoint at zero for capacity).", "short",
		q(`sum by (namespace, name, reason) (increase(capstan_autoscaler_decisions_total`+rate+`))`, "{{namespace}}/{{name}} {{reason}}"),
		q(`sum by (endpoint) (increase(capstan_gateway_activations_total`+ep+rate+`))`, "{{endpoint}} activation")).
		DrawStyle(common.GraphDrawStyleBars))
	b.WithPanel(series("Autoscaler desired replicas",
		"The replica count the autoscalers last decided: Application Auto Scaling for SageMaker variants, the manifest autoscaler for deployments.", "short",
		q(`max by (endpoint, variant) (capstan_appautoscaling_desired`+ep+`)`, "{{endpoint}}/{{variant}}"),
		q(`max by (namespace, name) (capstan_autoscaler_desired_replicas)`, "{{namespace}}/{{name}}")))
	b.WithPanel(series("Cold start p95",
		"Time from a request at zero replicas to the first replica serving.", "s",
		q(`histogram_quantile(0.95, sum by (le, endpoint, variant) (rate(capstan_endpoint_cold_start_seconds_bucket`+ep+rate+`)))`, "{{endpoint}}/{{variant}}"),
		q(`histogram_quantile(0.95, sum by (le, namespace, name) (rate(capstan_deployment_cold_start_seconds_bucket`+rate+`)))`, "{{namespace}}/{{name}}")))
	return finish(b)
}
