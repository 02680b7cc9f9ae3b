// Package metrics is the catalog of every Prometheus metric capstan
// exports: the server's own (gateway, endpoints, deployments, autoscalers,
// capacity and training plans, clusters and nodes, cost) and the engine
// replicas' (vLLM's names). docs/metrics.md is generated from it, and a
// test holds it equal to what the real registries register. Dashboards and
// alert rules check the metric names they use against it.
//
// It owns the list only; each collector is defined in the package whose
// numbers it reports.
package metrics
