package spaces

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/store"
)

// costMeter exports spaces by phase and what each has cost: its share of
// its node's price (its GPUs or MIG slice, or its CPUs on a CPU node) for
// the time it ran. The node's whole price is in the cluster's node cost
// already; this says how much of it a space accounts for.
type costMeter struct {
	s      *Service
	mu     sync.Mutex
	usd    map[string]float64  // by space key
	since  map[*proc]time.Time // accounted up to
	phases *prometheus.Desc
	cost   *prometheus.Desc
}

func newCostMeter(s *Service) *costMeter {
	return &costMeter{s: s, usd: map[string]float64{}, since: map[*proc]time.Time{},
		phases: prometheus.NewDesc("capstan_spaces", "Spaces (HyperPod Workspaces) by phase.", []string{"phase"}, nil),
		cost: prometheus.NewDesc("capstan_space_cost_usd_total",
			"What each space has cost while it ran: its share of its node's hourly price (GPUs, MIG slice by compute slices, or CPUs).",
			[]string{"namespace", "space"}, nil)}
}

// add accounts p's cost up to now.
func (c *costMeter) add(p *proc, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	from, ok := c.since[p]
	if !ok {
		from = p.since
	}
	if d := now.Sub(from); d > 0 {
		c.usd[p.key] += d.Hours() * p.pricePerHour * p.share
	}
	c.since[p] = now
	select {
	case <-p.done:
		delete(c.since, p)
	default:
	}
}

func (c *costMeter) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.phases
	ch <- c.cost
}

func (c *costMeter) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{}
	keys := map[string]bool{}
	_ = c.s.o.Store.View(func(tx *store.Tx) error {
		recs, err := store.List[record](tx, bucketSpaces)
		for _, r := range recs {
			ph := r.Workspace.Status.Phase
			if ph == "" {
				ph = "Pending"
			}
			counts[ph]++
			keys[key(r.Workspace.Metadata.Namespace, r.Workspace.Metadata.Name)] = true
		}
		return err
	})
	for ph, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.phases, prometheus.GaugeValue, float64(n), ph)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.usd {
		if !keys[k] {
			delete(c.usd, k) // deleted spaces leave the metric
			continue
		}
		ns, name := splitKey(k)
		ch <- prometheus.MustNewConstMetric(c.cost, prometheus.CounterValue, v, ns, name)
	}
}
