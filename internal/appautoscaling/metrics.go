package appautoscaling

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the controller's gauges. Series of deregistered targets and
// deleted policies are removed on the next evaluation.
type metrics struct {
	desired *prometheus.GaugeVec
	value   *prometheus.GaugeVec

	desiredSet map[[2]string]bool
	valueSet   map[[3]string]bool
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capstan_appautoscaling_desired",
			Help: "Desired instance count of a SageMaker variant under Application Auto Scaling, as last read or set.",
		}, []string{"endpoint", "variant"}),
		value: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capstan_appautoscaling_metric_value",
			Help: "Last value of a target-tracking policy's metric.",
		}, []string{"endpoint", "variant", "policy"}),
		desiredSet: map[[2]string]bool{},
		valueSet:   map[[3]string]bool{},
	}
	if reg != nil {
		reg.MustRegister(m.desired, m.value)
	}
	return m
}

func (m *metrics) setDesired(ep, variant string, n int) {
	m.desired.WithLabelValues(ep, variant).Set(float64(n))
	m.desiredSet[[2]string{ep, variant}] = true
}

func (m *metrics) setValue(ep, variant, policy string, v float64) {
	m.value.WithLabelValues(ep, variant, policy).Set(v)
	m.valueSet[[3]string{ep, variant, policy}] = true
}

// prune deletes the series not in the live sets.
func (m *metrics) prune(liveTargets map[[2]string]bool, livePolicies map[[3]string]bool) {
	for k := range m.desiredSet {
		if !liveTargets[k] {
			m.desired.DeleteLabelValues(k[0], k[1])
			delete(m.desiredSet, k)
		}
	}
	for k := range m.valueSet {
		if !livePolicies[k] {
			m.value.DeleteLabelValues(k[0], k[1], k[2])
			delete(m.valueSet, k)
		}
	}
}
