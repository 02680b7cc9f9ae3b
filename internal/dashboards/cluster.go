package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// cl filters a series by the cluster variable.
const cl = `{cluster=~"$cluster"}`

// Cluster is the dashboard of HyperPod clusters: nodes, GPUs and MIG
// slices, replicas waiting for room, node-hours and what they cost.
func Cluster() (dashboard.Dashboard, error) {
	b := newDashboard(ClusterUID, "capstan / Cluster",
		"HyperPod clusters: nodes by group and capacity type, GPU instances and MIG slices, pending replicas, node-hours and cost.").
		WithVariable(labelVar("cluster", "Cluster", "capstan_cluster_nodes"))

	b.WithRow(dashboard.NewRowBuilder("Nodes"))
	b.WithPanel(series("Nodes by group and capacity type",
		"Cluster nodes of every status by instance group and capacity type (on-demand, reserved through a training plan, spot).", "short",
		q(`sum by (cluster, group, capacity_type) (capstan_cluster_nodes`+cl+`)`, "{{cluster}}/{{group}} {{capacity_type}}")).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	b.WithPanel(series("Nodes by status",
		"Cluster nodes by status (Pending, Running, ShuttingDown, Failure…).", "short",
		q(`sum by (cluster, status) (capstan_cluster_nodes`+cl+`)`, "{{cluster}} {{status}}")))
	b.WithPanel(series("Node launch time p50/p95/p99",
		"Time from a node's launch to its being Running, all clusters.", "s",
		quantiles("capstan_cluster_node_launch_seconds", "", "", "")...))
	b.WithPanel(series("Node events by reason",
		"Cluster and node events per interval (launches, failures, replacements…), all clusters.", "short",
		q(`sum by (reason) (increase(capstan_cluster_node_events_total`+rate+`))`, "{{reason}}")).
		DrawStyle(common.GraphDrawStyleBars))

	b.WithRow(dashboard.NewRowBuilder("GPUs"))
	b.WithPanel(series("GPU and MIG slice allocation",
		"MIG slices of the clusters' partitioned GPUs by profile: held by a replica (used) or free.", "short",
		q(`sum by (cluster, instance_type, profile, state) (capstan_cluster_mig_slices`+cl+`)`, "{{cluster}} {{instance_type}} {{profile}} {{state}}")).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	b.WithPanel(series("GPU instances by type",
		"Instances backing endpoints by instance type: on demand, and booked by Active training plans (reserved).", "short",
		q(`sum by (instance_type) (capstan_on_demand_instances)`, "{{instance_type}} on-demand"),
		q(`sum by (instance_type) (capstan_reserved_instances)`, "{{instance_type}} reserved")))

	b.WithRow(dashboard.NewRowBuilder("Scaling"))
	b.WithPanel(series("Pending replicas",
		"Replicas waiting for room on a node: as the node autoscaler counts them per cluster, and per manifest deployment.", "short",
		q(`sum by (cluster) (capstan_node_autoscaler_pending_replicas`+cl+`)`, "{{cluster}} waiting for a node"),
		q(`sum by (namespace, name) (capstan_deployment_replicas{state="pending"})`, "{{namespace}}/{{name}} pending")))
	b.WithPanel(series("Nodes launched and disrupted",
		"Nodes the node autoscaler launched (by capacity type) and disrupted (by reason) per interval.", "short",
		q(`sum by (cluster, capacity_type) (increase(capstan_node_autoscaler_nodes_launched_total`+cl+rate+`))`, "{{cluster}} launched {{capacity_type}}"),
		q(`sum by (cluster, reason) (increase(capstan_node_autoscaler_nodes_disrupted_total`+cl+rate+`))`, "{{cluster}} disrupted {{reason}}")).
		DrawStyle(common.GraphDrawStyleBars))
	b.WithPanel(rightAxis(series("Provisioning decisions",
		"Node autoscaler provisioning decisions per interval by result, and its decision latency p95.", "short",
		q(`sum by (cluster, result) (increase(capstan_node_autoscaler_provisioning_decisions_total`+cl+rate+`))`, "{{cluster}} {{result}}"),
		q(`histogram_quantile(0.95, sum by (le, cluster) (rate(capstan_node_autoscaler_decision_latency_seconds_bucket`+cl+rate+`)))`, "{{cluster}} decision latency p95")), "B", "s"))

	b.WithRow(dashboard.NewRowBuilder("Node-hours and cost"))
	b.WithPanel(single("Node-hours", "Node-hours of Running nodes over the dashboard's time range.", "suffix: h",
		q(`sum by (capacity_type) (increase(capstan_cluster_node_hours_total`+cl+`[$__range]))`, "{{capacity_type}}")))
	b.WithPanel(single("Node cost", "What Running nodes cost over the dashboard's time range, at their price per hour.", "currencyUSD",
		q(`sum by (capacity_type) (increase(capstan_cluster_node_cost_dollars_total`+cl+`[$__range]))`, "{{capacity_type}}")))
	b.WithPanel(series("Node cost per hour",
		"Spend rate of Running nodes in USD per hour, by group and capacity type.", "currencyUSD",
		q(`sum by (cluster, group, capacity_type) (rate(capstan_cluster_node_cost_dollars_total`+cl+rate+`)) * 3600`, "{{cluster}}/{{group}} {{capacity_type}}")))
	b.WithPanel(grid("Endpoint instance-hours and cost",
		"Instance-hours by consumer (SageMaker endpoints; clusters as cluster/NAME) and source (the instance type on demand, trainingplan:PLAN on a reservation), and their on-demand cost, over the dashboard's time range.",
		q(`sum by (endpoint, source) (increase(capstan_endpoint_instance_hours_total[$__range]))`, ""),
		q(`sum by (endpoint) (increase(capstan_endpoint_cost_usd_total[$__range]))`, "")))
	return finish(b)
}
