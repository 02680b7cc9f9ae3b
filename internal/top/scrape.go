// Package top is the model behind `capstan top`: it reads two successive
// scrapes of capstan's own /metrics and turns their difference into one row
// per endpoint or manifest deployment — request rate, time-to-first-token
// quantiles, replicas, KV cache hit rate, in-flight and queued requests —
// and renders the rows as aligned text. It does no I/O of its own: the
// command fetches /metrics, stamps each scrape with its clock and hands the
// text here.
package top

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics top reads; every one is in internal/metrics' catalog.
const (
	mRequests    = "capstan_gateway_requests_total"
	mTTFT        = "capstan_gateway_time_to_first_token_seconds"
	mTTFB        = "capstan_gateway_time_to_first_byte_seconds"
	mInFlight    = "capstan_gateway_in_flight_requests"
	mQueued      = "capstan_gateway_queued_requests"
	mCached      = "capstan_gateway_prompt_cached_tokens_total"
	mTokens      = "capstan_gateway_tokens_total"
	mEPReplicas  = "capstan_endpoint_replicas"
	mDepReplicas = "capstan_deployment_replicas"
)

// MaxScrapeBytes bounds what Parse reads: capstan's /metrics is tens of
// kilobytes even with hundreds of endpoints.
const MaxScrapeBytes = 32 << 20

// Deployment names one manifest deployment as capstan_deployment_replicas
// labels it.
type Deployment struct {
	Kind, Namespace, Name string
}

// Short is "iec/NAMESPACE/NAME" or "jsm/NAMESPACE/NAME" (the kinds' short
// names, as `capstan get` accepts them).
func (d Deployment) Short() string {
	k := d.Kind
	switch d.Kind {
	case "InferenceEndpointConfig":
		k = "iec"
	case "JumpStartModel":
		k = "jsm"
	}
	return k + "/" + d.Namespace + "/" + d.Name
}

// series is one time series' value keyed by its endpoint (or deployment)
// and its full label set, so that a counter reset is seen per series.
type series struct {
	owner string // endpoint name
	key   string // every label, sorted
}

// histogram is one classic histogram series: cumulative counts by upper
// bound, +Inf last.
type histogram struct {
	bounds []float64
	counts []float64
}

// replicas are a ready/desired pair.
type replicas struct {
	ready, desired float64
}

// Scrape is one reading of /metrics, reduced to what top shows.
type Scrape struct {
	// At is when the scrape was taken (the caller's clock): rates divide by
	// the difference of two scrapes' At.
	At time.Time

	requests     map[series]float64
	ttft, ttfb   map[series]histogram
	cachedServed map[series]float64
	tokensIn     map[series]float64
	inFlight     map[string]float64
	queued       map[string]float64
	// endpointReplicas is nil when the server exports no
	// capstan_endpoint_replicas family at all.
	endpointReplicas map[string]replicas
	deployments      map[Deployment]replicas
}

// Parse reads Prometheus text exposition (what capstan's /metrics answers
// to Accept: text/plain) taken at at.
func Parse(r io.Reader, at time.Time) (*Scrape, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(r, MaxScrapeBytes))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	s := &Scrape{At: at,
		requests: map[series]float64{}, ttft: map[series]histogram{}, ttfb: map[series]histogram{},
		cachedServed: map[series]float64{}, tokensIn: map[series]float64{},
		inFlight: map[string]float64{}, queued: map[string]float64{}, deployments: map[Deployment]replicas{}}
	for _, m := range fams[mRequests].GetMetric() {
		if sr, ok := seriesOf(m); ok {
			s.requests[sr] = m.GetCounter().GetValue()
		}
	}
	for name, into := range map[string]map[series]histogram{mTTFT: s.ttft, mTTFB: s.ttfb} {
		for _, m := range fams[name].GetMetric() {
			if sr, ok := seriesOf(m); ok && m.GetHistogram() != nil {
				into[sr] = histogramOf(m.GetHistogram())
			}
		}
	}
	for _, m := range fams[mCached].GetMetric() {
		if sr, ok := seriesOf(m); ok && label(m, "source") == "served" {
			s.cachedServed[sr] = m.GetCounter().GetValue()
		}
	}
	for _, m := range fams[mTokens].GetMetric() {
		if sr, ok := seriesOf(m); ok && label(m, "direction") == "in" {
			s.tokensIn[sr] = m.GetCounter().GetValue()
		}
	}
	for name, into := range map[string]map[string]float64{mInFlight: s.inFlight, mQueued: s.queued} {
		for _, m := range fams[name].GetMetric() {
			if sr, ok := seriesOf(m); ok {
				into[sr.owner] += m.GetGauge().GetValue()
			}
		}
	}
	if f, ok := fams[mEPReplicas]; ok {
		s.endpointReplicas = map[string]replicas{}
		for _, m := range f.GetMetric() {
			ep := label(m, "endpoint")
			if ep == "" {
				continue
			}
			r := s.endpointReplicas[ep]
			addState(&r, label(m, "state"), m.GetGauge().GetValue())
			s.endpointReplicas[ep] = r
		}
	}
	for _, m := range fams[mDepReplicas].GetMetric() {
		d := Deployment{Kind: label(m, "kind"), Namespace: label(m, "namespace"), Name: label(m, "name")}
		if d.Name == "" {
			continue
		}
		r := s.deployments[d]
		addState(&r, label(m, "state"), m.GetGauge().GetValue())
		s.deployments[d] = r
	}
	return s, nil
}

// Deployments lists the manifest deployments the scrape saw, in order.
func (s *Scrape) Deployments() []Deployment {
	out := make([]Deployment, 0, len(s.deployments))
	for d := range s.deployments {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Deployment) int { return strings.Compare(a.Short(), b.Short()) })
	return out
}

func addState(r *replicas, state string, v float64) {
	switch state {
	case "ready":
		r.ready += v
	case "desired":
		r.desired += v
	}
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// seriesOf keys a series by its endpoint label; series without one are
// not any endpoint's.
func seriesOf(m *dto.Metric) (series, bool) {
	var b strings.Builder
	ep := ""
	for _, lp := range m.GetLabel() { // the parser sorts labels by name
		if lp.GetName() == "endpoint" {
			ep = lp.GetValue()
		}
		b.WriteString(lp.GetName())
		b.WriteByte('=')
		b.WriteString(lp.GetValue())
		b.WriteByte(0)
	}
	return series{owner: ep, key: b.String()}, ep != ""
}

func histogramOf(h *dto.Histogram) histogram {
	var out histogram
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), +1) {
			continue
		}
		out.bounds = append(out.bounds, b.GetUpperBound())
		out.counts = append(out.counts, float64(b.GetCumulativeCount()))
	}
	// The text format always carries +Inf; its count is the sample count.
	out.bounds = append(out.bounds, math.Inf(+1))
	out.counts = append(out.counts, float64(h.GetSampleCount()))
	return out
}
