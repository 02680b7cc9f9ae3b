package endpoint

import (
	"github.com/prometheus/client_golang/prometheus"
)

// stateCollector exports the endpoints' state, read from the store at
// scrape time (so it is never stale and needs no bookkeeping when an
// endpoint goes away):
//
//	capstan_endpoint_replicas{endpoint,variant,state}  desired: the variant's desired instance count
//	                                                   (DescribeEndpoint's DesiredInstanceCount);
//	                                                   ready: its replicas serving (healthy, not retiring;
//	                                                   during an update, of both sides)
//	capstan_endpoint_on_expired_plan{endpoint,plan}    1 for an endpoint whose configuration is bound to a
//	                                                   training plan that has ended, 0 while the plan runs
//
// Endpoints a manifest deployment runs are left to capstan_deployment_replicas.
type stateCollector struct {
	c                *Controller
	replicas, expiry *prometheus.Desc
}

var _ prometheus.Collector = (*stateCollector)(nil)

// Replica states of capstan_endpoint_replicas.
const (
	ReplicasDesired = "desired"
	ReplicasReady   = "ready"
)

func newStateCollector(c *Controller) *stateCollector {
	return &stateCollector{c: c,
		replicas: prometheus.NewDesc("capstan_endpoint_replicas",
			"Replicas of a SageMaker endpoint's variant by state: desired (the variant's desired instance count), ready (healthy replicas serving it; during an update, of both sides).",
			[]string{"endpoint", "variant", "state"}, nil),
		expiry: prometheus.NewDesc("capstan_endpoint_on_expired_plan",
			"1 when an endpoint's configuration is bound to a training plan that has ended (it serves nothing until updated), 0 while the plan runs.",
			[]string{"endpoint", "plan"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.replicas
	ch <- s.expiry
}

// Collect implements prometheus.Collector.
func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	eps, err := s.c.list()
	if err != nil {
		s.c.log.Warn("endpoint metrics", "err", err)
		return
	}
	now := s.c.clock.Now()
	for i := range eps {
		ep := &eps[i]
		if ep.ManagedBy != "" {
			continue
		}
		retiring := map[string]bool{}
		for _, id := range ep.Retiring {
			retiring[id] = true
		}
		var names []string
		desired, ready := map[string]int{}, map[string]int{}
		expired := map[string]float64{} // plan name → 1 if ended
		for _, d := range []*Deployment{ep.Current, ep.Pending} {
			if d == nil {
				continue
			}
			for _, v := range d.Variants {
				if _, seen := desired[v.Name]; !seen {
					// The serving side's desired count, as DescribeEndpoint
					// reports it; a create's pending side until it serves.
					names = append(names, v.Name)
					desired[v.Name] = v.DesiredCount
				}
				for _, id := range v.Replicas {
					if !retiring[id] && s.c.eng.Healthy(id) {
						ready[v.Name]++
					}
				}
				if pl, ok := s.c.plan(&v); ok {
					ended := 0.0
					if !now.Before(pl.End) {
						ended = 1
					}
					expired[pl.Name] = max(expired[pl.Name], ended)
				}
			}
		}
		for _, v := range names {
			ch <- prometheus.MustNewConstMetric(s.replicas, prometheus.GaugeValue, float64(desired[v]), ep.Name, v, ReplicasDesired)
			ch <- prometheus.MustNewConstMetric(s.replicas, prometheus.GaugeValue, float64(ready[v]), ep.Name, v, ReplicasReady)
		}
		for pl, v := range expired {
			ch <- prometheus.MustNewConstMetric(s.expiry, prometheus.GaugeValue, v, ep.Name, pl)
		}
	}
}
