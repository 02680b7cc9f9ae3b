package nodes

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the node autoscaler's Prometheus series, by cluster.
type metrics struct {
	pending   *prometheus.GaugeVec
	decisions *prometheus.CounterVec
	launched  *prometheus.CounterVec
	disrupted *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_node_autoscaler_pending_replicas",
			Help: "Replicas of autoscaled clusters that no node has room for."}, []string{"cluster"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_node_autoscaler_provisioning_decisions_total",
			Help: "Provisioning outcomes: launch, insufficient_capacity, error (per launch), unschedulable (per replica)."},
			[]string{"cluster", "result"}),
		launched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_node_autoscaler_nodes_launched_total",
			Help: "Nodes the autoscaler launched, by capacity type (reserved, spot, on-demand)."}, []string{"cluster", "capacity_type"}),
		disrupted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_node_autoscaler_nodes_disrupted_total",
			Help: "Nodes the autoscaler disrupted, by reason (Empty, Underutilized)."}, []string{"cluster", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "capstan_node_autoscaler_decision_latency_seconds",
			Help:    "Time from a replica becoming pending to the launch that makes room for it (batching included).",
			Buckets: []float64{0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600}}, []string{"cluster"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.pending, m.decisions, m.launched, m.disrupted, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register metrics: %w", err)
			}
		}
	}
	return m, nil
}
