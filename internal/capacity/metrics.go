package capacity

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/store"
)

// Collector exposes the calendar as Prometheus metrics, computed at scrape
// time from the store (so they are never stale):
//
//	capstan_reserved_instances{instance_type,zone}   instances booked by Active plans now
//	capstan_reserved_instances_in_use{plan}          plan instances held by endpoints
//	capstan_reserved_instances_available{plan}       plan instances free (0 once Expired)
//	capstan_on_demand_instances{instance_type,zone}  on-demand instances held by endpoints
//	capstan_plan_instance_hours_total{plan}          instance-hours endpoints used on a plan
//	capstan_endpoint_instance_hours_total{endpoint,source}  instance-hours per endpoint (source = instance type or trainingplan:<plan>)
//	capstan_endpoint_cost_usd_total{endpoint}        on-demand cost per endpoint (plus AddCost's charges)
//	capstan_training_plans{status}                   plans by status (Scheduled, Active, Expired; zeros included)
//	capstan_training_plan_reserved_instance_hours{plan}  instances × the plan's duration
//	capstan_training_plan_remaining_seconds{plan}    seconds until the plan ends (0 once ended)
//	capstan_training_plan_upfront_fee_usd{plan}      the fee paid for the plan
type Collector struct {
	cal *Calendar

	reserved, inUse, avail, onDemand, planHours, epHours, epCost *prometheus.Desc
	plans, planReserved, planRemaining, planFee                  *prometheus.Desc

	mu    sync.Mutex
	extra map[string]float64 // AddCost's charges by endpoint
}

// AddCost adds usd to endpoint's capstan_endpoint_cost_usd_total: charges
// per request (serverless variants) rather than per instance-hour. They are
// kept in memory, so after a restart the counter starts again from the
// instance-hour accounting (a counter reset, to Prometheus).
func (m *Collector) AddCost(endpoint string, usd float64) {
	if !(usd > 0) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.extra == nil {
		m.extra = map[string]float64{}
	}
	m.extra[endpoint] += usd
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns the metrics of cal.
func NewCollector(cal *Calendar) *Collector {
	return &Collector{cal: cal,
		reserved:  prometheus.NewDesc("capstan_reserved_instances", "Instances booked by Active training plans.", []string{"instance_type", "zone"}, nil),
		inUse:     prometheus.NewDesc("capstan_reserved_instances_in_use", "Training plan instances held by endpoints.", []string{"plan"}, nil),
		avail:     prometheus.NewDesc("capstan_reserved_instances_available", "Training plan instances free for endpoints.", []string{"plan"}, nil),
		onDemand:  prometheus.NewDesc("capstan_on_demand_instances", "On-demand instances held by endpoints.", []string{"instance_type", "zone"}, nil),
		planHours: prometheus.NewDesc("capstan_plan_instance_hours_total", "Instance-hours endpoints used on a training plan.", []string{"plan"}, nil),
		epHours:   prometheus.NewDesc("capstan_endpoint_instance_hours_total", "Instance-hours used by an endpoint.", []string{"endpoint", "source"}, nil),
		epCost:    prometheus.NewDesc("capstan_endpoint_cost_usd_total", "On-demand cost of an endpoint in USD.", []string{"endpoint"}, nil),
		plans:     prometheus.NewDesc("capstan_training_plans", "Training plans by status (Scheduled, Active, Expired).", []string{"status"}, nil),
		planReserved: prometheus.NewDesc("capstan_training_plan_reserved_instance_hours",
			"Instance-hours a training plan reserves: its instances times its duration.", []string{"plan"}, nil),
		planRemaining: prometheus.NewDesc("capstan_training_plan_remaining_seconds",
			"Seconds until a training plan ends (0 once it has ended).", []string{"plan"}, nil),
		planFee: prometheus.NewDesc("capstan_training_plan_upfront_fee_usd", "Upfront fee paid for a training plan, in USD.", []string{"plan"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.reserved, m.inUse, m.avail, m.onDemand, m.planHours, m.epHours, m.epCost,
		m.plans, m.planReserved, m.planRemaining, m.planFee} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Collector) Collect(ch chan<- prometheus.Metric) {
	views, err := m.cal.ListPlans()
	if err != nil {
		return
	}
	reserved := map[[2]string]int{}
	now := m.cal.clock.Now()
	byStatus := map[string]int{StatusScheduled: 0, StatusActive: 0, StatusExpired: 0}
	for _, v := range views {
		byStatus[v.Status]++
		ch <- prometheus.MustNewConstMetric(m.planReserved, prometheus.GaugeValue, float64(v.Total())*v.End.Sub(v.Start).Hours(), v.Name)
		ch <- prometheus.MustNewConstMetric(m.planRemaining, prometheus.GaugeValue, max(v.End.Sub(now).Seconds(), 0), v.Name)
		// Fees are quoted in CurrencyCode (USD); a plan stored in another
		// currency, or with no parsable fee, has no fee series.
		if fee, err := strconv.ParseFloat(v.UpfrontFee, 64); err == nil && (v.CurrencyCode == "" || v.CurrencyCode == CurrencyCode) {
			ch <- prometheus.MustNewConstMetric(m.planFee, prometheus.GaugeValue, fee, v.Name)
		}
		ch <- prometheus.MustNewConstMetric(m.inUse, prometheus.GaugeValue, float64(v.InUse), v.Name)
		ch <- prometheus.MustNewConstMetric(m.avail, prometheus.GaugeValue, float64(v.Available), v.Name)
		ch <- prometheus.MustNewConstMetric(m.planHours, prometheus.CounterValue, v.Usage.InstanceHours[v.Key], v.Name)
		if v.Status == StatusActive {
			for _, r := range v.Capacities {
				reserved[[2]string{v.InstanceType, r.Zone}] += r.Count
			}
		}
	}
	for s, n := range byStatus {
		ch <- prometheus.MustNewConstMetric(m.plans, prometheus.GaugeValue, float64(n), s)
	}
	for k, n := range reserved {
		ch <- prometheus.MustNewConstMetric(m.reserved, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	var hs map[string]Holding
	if err := m.cal.store.View(func(tx *store.Tx) error {
		var err error
		hs, err = holdings(tx)
		return err
	}); err != nil {
		return
	}
	for t, zs := range onDemand(hs, "") {
		for z, n := range zs {
			ch <- prometheus.MustNewConstMetric(m.onDemand, prometheus.GaugeValue, float64(n), t, z)
		}
	}
	owners := map[string]bool{}
	_ = m.cal.store.View(func(tx *store.Tx) error {
		return tx.Each(KindAccounting, func(name string, _ []byte) error {
			if len(name) < 5 || name[:5] != "plan/" {
				owners[name] = true
			}
			return nil
		})
	})
	for o := range hs {
		owners[o] = true
	}
	m.mu.Lock()
	extra := make(map[string]float64, len(m.extra))
	for o, usd := range m.extra {
		extra[o] = usd
		owners[o] = true
	}
	m.mu.Unlock()
	for o := range owners {
		u, err := m.cal.EndpointUsage(o)
		if err != nil {
			continue
		}
		for src, h := range u.InstanceHours {
			ch <- prometheus.MustNewConstMetric(m.epHours, prometheus.CounterValue, h, o, src)
		}
		ch <- prometheus.MustNewConstMetric(m.epCost, prometheus.CounterValue, u.CostUSD+extra[o], o)
	}
}
