package promdb

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/observability"
)

// DefaultScrapeInterval is how often a Scraper reads its targets, as the
// generated prometheus.yml does.
const DefaultScrapeInterval = observability.DefaultScrapeInterval

// pruneEvery is how often Run drops samples past retention.
const pruneEvery = time.Minute

// Scraper appends capstan serve's own metrics (job capstan) and every ready
// replica's (job capstan-replicas, labelled by discovery, engine series
// renamed to the catalog's) to DB on every Interval of Clock, with the job
// and instance labels Prometheus gives them under the generated config.
type Scraper struct {
	DB       *DB
	Clock    clock.Clock
	Interval time.Duration // DefaultScrapeInterval when zero
	// Server is capstan serve's registry; Instance its listen address.
	Server   prometheus.Gatherer
	Instance string
	// Replicas lists the replica targets (nil: none) and Reads gives the
	// last read of one's /metrics: capstan serve reads every engine's
	// metrics once, in its gateway, and the store takes that read rather
	// than reading again. A replica with no read (in no route yet) is not a
	// target.
	Replicas observability.Lister
	Reads    func(replicaID string) (ReplicaRead, bool)
	// SkipClusters names the clusters whose observability add-on is off:
	// series labelled with one (cluster="…") are not kept. nil: none.
	SkipClusters func() map[string]bool
	Log          *slog.Logger

	last    map[string]map[uint64]labels.Labels // target → series of its last scrape
	full    bool                                // the series limit was hit (logged once until Prune makes room)
	sampled int                                 // samples appended by the last ScrapeOnce
	skip    map[string]bool                     // SkipClusters of this scrape
}

// Run scrapes until ctx ends.
func (s *Scraper) Run(ctx context.Context) {
	iv := s.interval()
	t := s.Clock.NewTicker(iv)
	defer t.Stop()
	lastPrune := s.Clock.Now()
	s.ScrapeOnce(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.ScrapeOnce(ctx)
			if now := s.Clock.Now(); now.Sub(lastPrune) >= pruneEvery {
				s.DB.Prune(now)
				lastPrune = now
				// Room again: the next time the limit is hit is logged.
				s.full = s.full && s.DB.Series() >= s.DB.maxSeries
			}
		}
	}
}

func (s *Scraper) interval() time.Duration {
	if s.Interval <= 0 {
		return DefaultScrapeInterval
	}
	return s.Interval
}

// ScrapeOnce reads every target once, at the clock's now. It returns how
// many samples it appended (staleness markers included).
func (s *Scraper) ScrapeOnce(ctx context.Context) int {
	if s.last == nil {
		s.last = map[string]map[uint64]labels.Labels{}
	}
	s.sampled = 0
	s.skip = nil
	if s.SkipClusters != nil {
		s.skip = s.SkipClusters()
	}
	t := s.Clock.Now().UnixMilli()
	seen := map[string]bool{}

	if s.Server != nil {
		began := s.Clock.Now()
		mfs, err := s.Server.Gather()
		s.write("capstan", t, map[string]string{"job": observability.JobServer, "instance": s.Instance}, "", mfs, err, clock.Since(s.Clock, began))
		seen["capstan"] = true
	}
	if s.Replicas != nil && s.Reads != nil {
		for _, g := range observability.Targets(s.Replicas.List()) {
			id := g.Labels["replica"]
			rd, ok := s.Reads(id)
			if !ok {
				continue
			}
			target := map[string]string{"job": observability.JobReplicas, "instance": s.Instance}
			for k, v := range g.Labels {
				target[k] = v
			}
			s.write("replica/"+id, t, target, g.Labels["engine"], rd.families(), rd.Err, rd.Took)
			seen["replica/"+id] = true
		}
	}
	// A target gone (a replica stopped): its series end here.
	for key, prev := range s.last {
		if !seen[key] {
			for _, l := range prev {
				s.append(l, t, staleNaN)
			}
			delete(s.last, key)
		}
	}
	return s.sampled
}

// ReplicaRead is one read of a replica's /metrics, made by the gateway.
type ReplicaRead struct {
	Families map[string]*dto.MetricFamily // by the engine's own names
	Took     time.Duration
	Err      error // the read failed: the target is down
}

func (r ReplicaRead) families() []*dto.MetricFamily {
	out := make([]*dto.MetricFamily, 0, len(r.Families))
	for _, mf := range r.Families {
		out = append(out, mf)
	}
	return out
}

// write appends one target's scrape: its families' samples, the series
// Prometheus adds for every target (up, scrape_duration_seconds,
// scrape_samples_scraped), and staleness markers for the series its last
// scrape had and this one lacks. took is the scrape's time on the clock.
func (s *Scraper) write(key string, t int64, target map[string]string, engine string, mfs []*dto.MetricFamily, err error, took time.Duration) {
	now := map[uint64]labels.Labels{}
	up := 1.0
	if err != nil {
		up = 0
		s.logger().Debug("metrics store: scrape failed", "target", key, "err", err)
	} else {
		for _, mf := range mfs {
			eachSample(mf, func(name string, extra []labels.Label, v float64) {
				for _, l := range extra {
					if l.Name == "cluster" && s.skip[l.Value] {
						return
					}
				}
				if engine != "" {
					name = observability.CatalogName(engine, name)
				}
				l := seriesLabels(name, target, extra)
				now[l.Hash()] = l
				s.append(l, t, v)
			})
		}
	}
	scraped := float64(len(now))
	for name, v := range map[string]float64{"up": up, "scrape_duration_seconds": took.Seconds(), "scrape_samples_scraped": scraped} {
		l := seriesLabels(name, target, nil)
		now[l.Hash()] = l
		s.append(l, t, v)
	}
	for h, l := range s.last[key] {
		if _, ok := now[h]; !ok {
			s.append(l, t, staleNaN)
		}
	}
	s.last[key] = now
}

func (s *Scraper) append(l labels.Labels, t int64, v float64) {
	ok, err := s.DB.Append(l, t, v)
	if err != nil {
		if !s.full {
			s.full = true
			s.logger().Warn("metrics store: series limit reached; new series are dropped until old ones age out (metricsStore.maxSeries in capstan.yaml)",
				"maxSeries", s.DB.maxSeries)
		}
		return
	}
	if ok {
		s.sampled++
	}
}

func (s *Scraper) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// seriesLabels is a series' label set: its name, the target's labels and
// the sample's own. A sample label a target label also sets is kept as
// exported_<name>, as Prometheus does without honor_labels.
func seriesLabels(name string, target map[string]string, extra []labels.Label) labels.Labels {
	b := labels.NewScratchBuilder(len(target) + len(extra) + 1)
	b.Add(labels.MetricName, name)
	for k, v := range target {
		b.Add(k, v)
	}
	for _, l := range extra {
		if _, clash := target[l.Name]; clash {
			b.Add("exported_"+l.Name, l.Value)
			continue
		}
		b.Add(l.Name, l.Value)
	}
	b.Sort()
	return b.Labels()
}

// eachSample yields the samples of one metric family as Prometheus stores a
// classic exposition: counters, gauges and untyped values under the
// family's name; summaries as quantiles, _sum and _count; histograms as
// cumulative _bucket{le}, _sum and _count.
func eachSample(mf *dto.MetricFamily, emit func(name string, extra []labels.Label, v float64)) {
	name := mf.GetName()
	for _, m := range mf.GetMetric() {
		base := make([]labels.Label, 0, len(m.GetLabel())+1)
		for _, lp := range m.GetLabel() {
			base = append(base, labels.Label{Name: lp.GetName(), Value: lp.GetValue()})
		}
		with := func(n, v string) []labels.Label {
			return append(base[:len(base):len(base)], labels.Label{Name: n, Value: v})
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			emit(name, base, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			emit(name, base, m.GetGauge().GetValue())
		case dto.MetricType_UNTYPED:
			emit(name, base, m.GetUntyped().GetValue())
		case dto.MetricType_SUMMARY:
			sm := m.GetSummary()
			for _, q := range sm.GetQuantile() {
				emit(name, with(model.QuantileLabel, formatFloat(q.GetQuantile())), q.GetValue())
			}
			emit(name+"_sum", base, sm.GetSampleSum())
			emit(name+"_count", base, float64(sm.GetSampleCount()))
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			h := m.GetHistogram()
			inf := false
			for _, b := range h.GetBucket() {
				if math.IsInf(b.GetUpperBound(), 1) {
					inf = true
				}
				emit(name+"_bucket", with(model.BucketLabel, formatFloat(b.GetUpperBound())), float64(b.GetCumulativeCount()))
			}
			if !inf {
				emit(name+"_bucket", with(model.BucketLabel, "+Inf"), float64(h.GetSampleCount()))
			}
			emit(name+"_sum", base, h.GetSampleSum())
			emit(name+"_count", base, float64(h.GetSampleCount()))
		}
	}
}

// formatFloat writes an le or quantile label as the text exposition does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
