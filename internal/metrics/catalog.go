package metrics

import "strings"

// Type is a Prometheus metric type.
type Type string

// Metric types.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Scope says which process exports a metric.
type Scope string

// Scopes.
const (
	// Server: capstan serve's /metrics.
	Server Scope = "server"
	// Replica: each engine replica's /metrics (capstan engine sim, or a
	// real vLLM, whose names these are).
	Replica Scope = "replica"
)

// Area groups metric families in docs/metrics.md (and for dashboards).
type Area string

// Areas, in the order docs/metrics.md lists them.
const (
	AreaGateway     Area = "Gateway"
	AreaEndpoints   Area = "Endpoints"
	AreaDeployments Area = "Deployments and autoscaling"
	AreaCapacity    Area = "Capacity and training plans"
	AreaClusters    Area = "Clusters and nodes"
	AreaReplicas    Area = "Engine replicas"
)

// Areas lists every Area in document order.
var Areas = []Area{AreaGateway, AreaEndpoints, AreaDeployments, AreaCapacity, AreaClusters, AreaReplicas}

// Def describes one metric family.
type Def struct {
	Name   string
	Type   Type
	Scope  Scope
	Area   Area
	Labels []string // variable labels, in registration order
	Unit   string   // "seconds", "tokens", "requests", "usd", "hours", "bytes", "" for a count or ratio
}

// Catalog is every metric family capstan exports, by name, except the Go
// client library's runtime and process collectors (see InRuntimeGroup).
var Catalog = []Def{
	// gateway (every front door: SageMaker runtime, response stream, OpenAI)
	{Name: "capstan_gateway_requests_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant", "status"}, Unit: "requests"},
	{Name: "capstan_gateway_request_duration_seconds", Type: Histogram, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant"}, Unit: "seconds"},
	{Name: "capstan_gateway_in_flight_requests", Type: Gauge, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant"}, Unit: "requests"},
	{Name: "capstan_gateway_retries_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant", "reason"}, Unit: "requests"},
	{Name: "capstan_gateway_queued_requests", Type: Gauge, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint"}, Unit: "requests"},
	{Name: "capstan_gateway_rejected_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint"}, Unit: "requests"},
	{Name: "capstan_gateway_routing_decisions_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "strategy", "outcome"}},
	{Name: "capstan_gateway_backend_ejections_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"backend"}},
	{Name: "capstan_gateway_kv_event_gaps_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"backend", "outcome"}},
	{Name: "capstan_gateway_time_to_first_byte_seconds", Type: Histogram, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant"}, Unit: "seconds"},
	{Name: "capstan_gateway_time_to_first_token_seconds", Type: Histogram, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant"}, Unit: "seconds"},
	{Name: "capstan_gateway_inter_token_latency_seconds", Type: Histogram, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant"}, Unit: "seconds"},
	{Name: "capstan_gateway_tokens_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "variant", "direction"}, Unit: "tokens"},
	{Name: "capstan_gateway_prompt_cached_tokens_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint", "strategy", "source"}, Unit: "tokens"},
	{Name: "capstan_gateway_activations_total", Type: Counter, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint"}},
	{Name: "capstan_gateway_held_requests", Type: Gauge, Scope: Server, Area: AreaGateway, Labels: []string{"endpoint"}, Unit: "requests"},

	// endpoints (SageMaker)
	{Name: "capstan_endpoints", Type: Gauge, Scope: Server, Area: AreaEndpoints, Labels: []string{"status"}},
	{Name: "capstan_endpoint_replicas", Type: Gauge, Scope: Server, Area: AreaEndpoints, Labels: []string{"endpoint", "variant", "state"}},
	{Name: "capstan_endpoint_cold_start_seconds", Type: Histogram, Scope: Server, Area: AreaEndpoints, Labels: []string{"endpoint", "variant"}, Unit: "seconds"},
	{Name: "capstan_endpoint_instance_hours_total", Type: Counter, Scope: Server, Area: AreaEndpoints, Labels: []string{"endpoint", "source"}, Unit: "hours"},
	{Name: "capstan_endpoint_cost_usd_total", Type: Counter, Scope: Server, Area: AreaEndpoints, Labels: []string{"endpoint"}, Unit: "usd"},
	{Name: "capstan_endpoint_on_expired_plan", Type: Gauge, Scope: Server, Area: AreaEndpoints, Labels: []string{"endpoint", "plan"}},
	{Name: "capstan_async_backlog", Type: Gauge, Scope: Server, Area: AreaEndpoints, Labels: []string{"endpoint"}, Unit: "requests"},
	{Name: "capstan_async_invocations_total", Type: Counter, Scope: Server, Area: AreaEndpoints, Labels: []string{"endpoint", "outcome"}, Unit: "requests"},
	{Name: "capstan_appautoscaling_desired", Type: Gauge, Scope: Server, Area: AreaDeployments, Labels: []string{"endpoint", "variant"}},
	{Name: "capstan_appautoscaling_metric_value", Type: Gauge, Scope: Server, Area: AreaDeployments, Labels: []string{"endpoint", "variant", "policy"}},

	// manifest deployments and their autoscaler
	{Name: "capstan_deployment_replicas", Type: Gauge, Scope: Server, Area: AreaDeployments, Labels: []string{"namespace", "name", "kind", "state"}},
	{Name: "capstan_deployment_cold_start_seconds", Type: Histogram, Scope: Server, Area: AreaDeployments, Labels: []string{"namespace", "name", "kind"}, Unit: "seconds"},
	{Name: "capstan_deployment_replica_seconds_total", Type: Counter, Scope: Server, Area: AreaDeployments, Labels: []string{"namespace", "name", "kind"}, Unit: "seconds"},
	{Name: "capstan_autoscaler_trigger_value", Type: Gauge, Scope: Server, Area: AreaDeployments, Labels: []string{"namespace", "name", "kind", "trigger"}},
	{Name: "capstan_autoscaler_desired_replicas", Type: Gauge, Scope: Server, Area: AreaDeployments, Labels: []string{"namespace", "name", "kind"}},
	{Name: "capstan_autoscaler_decisions_total", Type: Counter, Scope: Server, Area: AreaDeployments, Labels: []string{"namespace", "name", "kind", "reason"}},

	// capacity and training plans
	{Name: "capstan_reserved_instances", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"instance_type", "zone"}},
	{Name: "capstan_reserved_instances_in_use", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"plan"}},
	{Name: "capstan_reserved_instances_available", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"plan"}},
	{Name: "capstan_on_demand_instances", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"instance_type", "zone"}},
	{Name: "capstan_plan_instance_hours_total", Type: Counter, Scope: Server, Area: AreaCapacity, Labels: []string{"plan"}, Unit: "hours"},
	{Name: "capstan_training_plans", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"status"}},
	{Name: "capstan_training_plan_reserved_instance_hours", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"plan"}, Unit: "hours"},
	{Name: "capstan_training_plan_remaining_seconds", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"plan"}, Unit: "seconds"},
	{Name: "capstan_training_plan_upfront_fee_usd", Type: Gauge, Scope: Server, Area: AreaCapacity, Labels: []string{"plan"}, Unit: "usd"},

	// clusters, nodes and the node autoscaler
	{Name: "capstan_cluster_nodes", Type: Gauge, Scope: Server, Area: AreaClusters, Labels: []string{"cluster", "group", "capacity_type", "status"}},
	{Name: "capstan_cluster_node_hours_total", Type: Counter, Scope: Server, Area: AreaClusters, Labels: []string{"cluster", "group", "capacity_type"}, Unit: "hours"},
	{Name: "capstan_cluster_node_cost_dollars_total", Type: Counter, Scope: Server, Area: AreaClusters, Labels: []string{"cluster", "group", "capacity_type"}, Unit: "usd"},
	{Name: "capstan_cluster_node_launch_seconds", Type: Histogram, Scope: Server, Area: AreaClusters, Unit: "seconds"},
	{Name: "capstan_cluster_node_events_total", Type: Counter, Scope: Server, Area: AreaClusters, Labels: []string{"reason"}},
	{Name: "capstan_cluster_mig_slices", Type: Gauge, Scope: Server, Area: AreaClusters, Labels: []string{"cluster", "instance_type", "profile", "state"}},
	{Name: "capstan_node_autoscaler_pending_replicas", Type: Gauge, Scope: Server, Area: AreaClusters, Labels: []string{"cluster"}},
	{Name: "capstan_node_autoscaler_provisioning_decisions_total", Type: Counter, Scope: Server, Area: AreaClusters, Labels: []string{"cluster", "result"}},
	{Name: "capstan_node_autoscaler_nodes_launched_total", Type: Counter, Scope: Server, Area: AreaClusters, Labels: []string{"cluster", "capacity_type"}},
	{Name: "capstan_node_autoscaler_nodes_disrupted_total", Type: Counter, Scope: Server, Area: AreaClusters, Labels: []string{"cluster", "reason"}},
	{Name: "capstan_node_autoscaler_decision_latency_seconds", Type: Histogram, Scope: Server, Area: AreaClusters, Labels: []string{"cluster"}, Unit: "seconds"},
	{Name: "capstan_spaces", Type: Gauge, Scope: Server, Area: AreaClusters, Labels: []string{"phase"}},
	{Name: "capstan_space_cost_usd_total", Type: Counter, Scope: Server, Area: AreaClusters, Labels: []string{"namespace", "space"}, Unit: "usd"},

	// engine replicas (vLLM's names; model_name and engine are constant labels)
	{Name: "vllm:num_requests_running", Type: Gauge, Scope: Replica, Area: AreaReplicas, Unit: "requests"},
	{Name: "vllm:num_requests_waiting", Type: Gauge, Scope: Replica, Area: AreaReplicas, Unit: "requests"},
	{Name: "vllm:kv_cache_usage_perc", Type: Gauge, Scope: Replica, Area: AreaReplicas},
	{Name: "vllm:prefix_cache_queries_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Unit: "tokens"},
	{Name: "vllm:prefix_cache_hits_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Unit: "tokens"},
	{Name: "vllm:prompt_tokens_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Unit: "tokens"},
	{Name: "vllm:generation_tokens_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Unit: "tokens"},
	{Name: "vllm:num_preemptions_total", Type: Counter, Scope: Replica, Area: AreaReplicas},
	{Name: "vllm:time_to_first_token_seconds", Type: Histogram, Scope: Replica, Area: AreaReplicas, Unit: "seconds"},
	{Name: "vllm:inter_token_latency_seconds", Type: Histogram, Scope: Replica, Area: AreaReplicas, Unit: "seconds"},
	{Name: "vllm:e2e_request_latency_seconds", Type: Histogram, Scope: Replica, Area: AreaReplicas, Unit: "seconds"},
	{Name: "vllm:request_queue_time_seconds", Type: Histogram, Scope: Replica, Area: AreaReplicas, Unit: "seconds"},
	{Name: "vllm:request_success_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Labels: []string{"finished_reason"}, Unit: "requests"},
	{Name: "vllm:cache_config_info", Type: Gauge, Scope: Replica, Area: AreaReplicas, Labels: []string{"block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization", "num_gpu_blocks", "num_cpu_blocks"}},
	{Name: "capstan_engine_kv_tier_hits_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Labels: []string{"tier"}},
	{Name: "capstan_engine_kv_tier_bytes_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Labels: []string{"tier", "direction"}, Unit: "bytes"},
	{Name: "capstan_engine_kv_tier_errors_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Labels: []string{"tier", "op"}},
	{Name: "capstan_engine_kv_tier_dropped_writes_total", Type: Counter, Scope: Replica, Area: AreaReplicas, Labels: []string{"tier"}},
	{Name: "capstan_engine_kv_tieredstorage_blocks", Type: Gauge, Scope: Replica, Area: AreaReplicas},
	{Name: "capstan_engine_kv_tier_used_bytes", Type: Gauge, Scope: Replica, Area: AreaReplicas, Labels: []string{"tier"}, Unit: "bytes"},
	{Name: "capstan_engine_kv_tier_capacity_bytes", Type: Gauge, Scope: Replica, Area: AreaReplicas, Labels: []string{"tier"}, Unit: "bytes"},
	{Name: "capstan_engine_kv_tieredstorage_corrupt_total", Type: Counter, Scope: Replica, Area: AreaReplicas},
	{Name: "capstan_engine_placement_info", Type: Gauge, Scope: Replica, Area: AreaReplicas, Labels: []string{"device", "gpu", "mig_profile", "tensor_parallel"}},
}

// Lookup returns the catalog entry of a metric family name. A histogram's
// _bucket, _sum and _count series and a counter's name are looked up by
// their family name: pass the family name.
func Lookup(name string) (Def, bool) {
	for _, d := range Catalog {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// InRuntimeGroup reports whether name is one of the Go runtime (go_*) or
// process (process_*) families capstan serve also exports. They are
// documented as one group rather than listed in the Catalog: their set
// depends on the Go version and the platform.
func InRuntimeGroup(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
}
