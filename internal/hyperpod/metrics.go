package hyperpod

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus series; a nil *metrics records
// nothing (no Registerer).
type metrics struct {
	nodes  *prometheus.GaugeVec
	hours  *prometheus.CounterVec
	cost   *prometheus.CounterVec
	launch prometheus.Histogram
	events *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_cluster_nodes",
			Help: "HyperPod cluster nodes by group, capacity type and status."}, []string{"cluster", "group", "capacity_type", "status"}),
		hours: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_cluster_node_hours_total",
			Help: "Node-hours of Running cluster nodes."}, []string{"cluster", "group", "capacity_type"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_cluster_node_cost_dollars_total",
			Help: "What Running cluster nodes cost, at their price per hour."}, []string{"cluster", "group", "capacity_type"}),
		launch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "capstan_cluster_node_launch_seconds",
			Help: "Time from a node's launch to its being Running.", Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1800, 3600}}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_cluster_node_events_total",
			Help: "Cluster and node events by reason."}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.nodes, m.hours, m.cost, m.launch, m.events} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("hyperpod: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) event(reason string) {
	if m != nil {
		m.events.WithLabelValues(reason).Inc()
	}
}

func (m *metrics) launched(d time.Duration) {
	if m != nil {
		m.launch.Observe(d.Seconds())
	}
}

// observe sets the node gauge from nodes and accrues the hours and cost of
// Running nodes over [from, to) (each from its Ready on).
func (m *metrics) observe(nodes []Node, from, to time.Time) {
	if m == nil {
		return
	}
	m.nodes.Reset()
	for _, n := range nodes {
		ct := string(n.CapacityType)
		m.nodes.WithLabelValues(n.Cluster, n.Group, ct, string(n.Status)).Inc()
		if n.Status != NodeRunning {
			continue
		}
		if h := to.Sub(later(from, n.Ready)).Hours(); h > 0 {
			m.hours.WithLabelValues(n.Cluster, n.Group, ct).Add(h)
			m.cost.WithLabelValues(n.Cluster, n.Group, ct).Add(h * n.PricePerHour)
		}
	}
}
