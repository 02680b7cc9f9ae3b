package triggers

import (
	"maps"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// fakeSource is a hand-fed MetricSource: Snapshot returns what the test set
// last and counts calls; the store is real, and SampleGauges records the
// snapshot's gauges the way the gateway's Sampler does (one sample a
// second, the newest; the real Sampler is tested in package gateway, and
// gateway_seam_test.go reads through a real gateway).
type fakeSource struct {
	mu      sync.Mutex
	clk     clock.Clock
	snap    gateway.EndpointSnapshot
	asked   []string
	store   *metricstore.Store
	samples int // SampleGauges calls

	sampled      bool
	lastSec      int64
	lastAt       time.Time
	lastArrivals uint64
}

var _ MetricSource = (*fakeSource)(nil)

func (f *fakeSource) Snapshot(endpoint string) gateway.EndpointSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, endpoint)
	s := f.snap
	s.Variants = maps.Clone(f.snap.Variants)
	return s
}

func (f *fakeSource) MetricStore() *metricstore.Store { return f.store }

func (f *fakeSource) SampleGauges(endpoint string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.samples++
	now := f.clk.Now()
	s := f.snap
	ep := []metricstore.Dimension{{Name: "EndpointName", Value: endpoint}}
	set := func(m Metric, d []metricstore.Dimension, v float64) {
		if err := f.store.Handle(metrics[m].namespace, string(m), d).SetAt(now, v); err != nil {
			panic(err)
		}
	}
	set(MetricQueueDepth, ep, float64(s.Queued+s.EngineWaiting))
	set(MetricInFlightPerReplica, ep, float64(s.InFlight+s.Queued)/float64(max(s.Replicas, 1)))
	set(MetricKVCacheUtilization, ep, s.KVUsage)
	for name, v := range s.Variants {
		n := v.InFlight
		if len(s.Variants) == 1 {
			n += s.Queued
		}
		set(MetricConcurrentRequestsPerModel, variantDims(endpoint, name), float64(n))
	}
	if f.sampled && now.Unix() <= f.lastSec {
		return // ArrivalRate: once a second
	}
	if f.sampled {
		set(MetricArrivalRate, ep, float64(s.Arrivals-f.lastArrivals)/now.Sub(f.lastAt).Seconds())
	}
	f.sampled, f.lastSec, f.lastAt, f.lastArrivals = true, now.Unix(), now, s.Arrivals
}

func (f *fakeSource) set(mut func(s *gateway.EndpointSnapshot)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mut(&f.snap)
}

func (f *fakeSource) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

func variantDims(endpoint, variant string) []metricstore.Dimension {
	return []metricstore.Dimension{{Name: "EndpointName", Value: endpoint}, {Name: "VariantName", Value: variant}}
}

// record records per-request samples of a SageMaker metric for endpoint
// "ep"'s variant (or a capstan built-in, variant ignored) at the clock's now.
func (f *fakeSource) record(m Metric, variant string, vals ...float64) {
	d := variantDims("ep", variant)
	if metrics[m].namespace == NamespaceCapstan {
		d = d[:1]
	}
	for _, v := range vals {
		if err := f.store.Record(metrics[m].namespace, string(m), d, v); err != nil {
			panic(err)
		}
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakes() (*fakeSource, *clock.Fake) {
	clk := clock.NewFake(t0)
	return &fakeSource{clk: clk, store: metricstore.New(clk, metricstore.Options{})}, clk
}
