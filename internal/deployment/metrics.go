package deployment

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the deployment controller's Prometheus series. Every series
// carries namespace, name and kind of the manifest.
type metrics struct {
	replicas       *prometheus.GaugeVec
	triggerValue   *prometheus.GaugeVec
	desired        *prometheus.GaugeVec
	decisions      *prometheus.CounterVec
	coldStart      *prometheus.HistogramVec
	replicaSeconds *prometheus.CounterVec
}

var objLabels = []string{"namespace", "name", "kind"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	with := func(extra ...string) []string { return append(append([]string(nil), objLabels...), extra...) }
	m := &metrics{
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_deployment_replicas",
			Help: "Replicas of a manifest deployment by state: desired, current (placed and started), ready (serving), pending (waiting for room on a node)."},
			with("state")),
		triggerValue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_autoscaler_trigger_value",
			Help: "Last value an autoscaling trigger reported (the fallback value while it fails)."}, with("trigger")),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_autoscaler_desired_replicas",
			Help: "Replica count the autoscaler last decided."}, with()),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_autoscaler_decisions_total",
			Help: "Autoscaler decisions by reason (Activated also counts activations by the gateway)."}, with("reason")),
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "capstan_deployment_cold_start_seconds",
			Help:    "Time from an activation at zero replicas to the first replica serving.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, with()),
		replicaSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_deployment_replica_seconds_total",
			Help: "Replica-seconds used (placed and started replicas × time), for replica-hour comparisons."}, with()),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.replicas, m.triggerValue, m.desired, m.decisions, m.coldStart, m.replicaSeconds} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// forget removes every series of one object.
func (m *metrics) forget(namespace, name, kind string) {
	l := prometheus.Labels{"namespace": namespace, "name": name, "kind": kind}
	m.replicas.DeletePartialMatch(l)
	m.triggerValue.DeletePartialMatch(l)
	m.desired.DeletePartialMatch(l)
	m.decisions.DeletePartialMatch(l)
	m.coldStart.DeletePartialMatch(l)
	m.replicaSeconds.DeletePartialMatch(l)
}
