package alarm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Evaluator evaluates configured alarms against a Gatherer (the registry
// capstan's /metrics serves). It is safe for concurrent use.
type Evaluator struct {
	gatherer prometheus.Gatherer
	alarms   map[string]Alarm
}

// NewEvaluator validates alarms (see Validate) and keeps them by name.
func NewEvaluator(g prometheus.Gatherer, alarms []Alarm) (*Evaluator, error) {
	if err := Validate(alarms); err != nil {
		return nil, err
	}
	byName := make(map[string]Alarm, len(alarms))
	for _, a := range alarms {
		byName[a.Name] = a
	}
	return &Evaluator{gatherer: g, alarms: byName}, nil
}

// Watch is a set of alarms armed for one endpoint, holding the values their
// series had when armed. It is safe for concurrent use.
type Watch struct {
	gatherer prometheus.Gatherer
	endpoint string
	armed    []armed
}

// armed is one alarm of a Watch and its baseline.
type armed struct {
	Alarm
	// stat is the statistic in effect; empty while the metric had no series
	// when armed and the alarm names none (the metric's type decides later).
	stat Statistic
	base map[string]*dto.Metric // series key → sample when armed
}

// Known returns an *UnknownAlarmError listing the names that are not
// configured, or nil: an update naming them is refused before it starts.
func (e *Evaluator) Known(names []string) error {
	var unknown []string
	for _, n := range names {
		if _, ok := e.alarms[n]; !ok && !slices.Contains(unknown, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return &UnknownAlarmError{Names: unknown}
	}
	return nil
}

// Arm snapshots the named alarms' series carrying endpoint=endpoint, so
// that Check measures growth from now. Names are deduplicated; any that
// are not configured give an *UnknownAlarmError listing them all. A
// statistic that does not fit the metric's type is an error when the
// metric already has series (otherwise Check finds out, and the alarm has
// no data). A failed gather is an error: a baseline missing series would
// count their whole value as growth later.
func (e *Evaluator) Arm(ctx context.Context, endpoint string, names []string) (*Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("arm alarms: %w", err)
	}
	if endpoint == "" {
		return nil, errors.New("arm alarms: endpoint is empty")
	}
	var unknown []string
	w := &Watch{gatherer: e.gatherer, endpoint: endpoint}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		a, ok := e.alarms[n]
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		w.armed = append(w.armed, armed{Alarm: a, stat: a.Statistic})
	}
	if len(unknown) > 0 {
		return nil, &UnknownAlarmError{Names: unknown}
	}
	fams, err := e.gatherer.Gather()
	if err != nil {
		return nil, fmt.Errorf("arm alarms for endpoint %s: gather metrics: %w", endpoint, err)
	}
	byName := index(fams)
	for i := range w.armed {
		a := &w.armed[i]
		a.base = map[string]*dto.Metric{}
		f := byName[a.Metric]
		if f == nil {
			continue
		}
		if a.stat, err = resolve(a.Statistic, f.GetType()); err != nil {
			return nil, fmt.Errorf("alarm %q: %w", a.Name, err)
		}
		for _, m := range f.GetMetric() {
			if w.matches(a.Labels, m) {
				a.base[seriesKey(m)] = m
			}
		}
	}
	return w, nil
}

// Check gathers the metrics again and reports the first armed alarm (in
// the order Arm was given) whose statistic breaches its threshold, with a
// reason naming the alarm, series, statistic, value and threshold. An
// alarm without data (no matching series, no observations since armed, a
// statistic that does not fit the metric) does not fire, as a CloudWatch
// alarm with missing data stays OK. A gather that fails part-way is
// evaluated on what it returned: the families present are whole.
func (w *Watch) Check() (fired bool, reason string) {
	fams, _ := w.gatherer.Gather()
	byName := index(fams)
	for _, a := range w.armed {
		f := byName[a.Metric]
		if f == nil {
			continue
		}
		stat, err := resolve(a.stat, f.GetType())
		if err != nil {
			continue
		}
		var cur []*dto.Metric
		for _, m := range f.GetMetric() {
			if w.matches(a.Labels, m) {
				cur = append(cur, m)
			}
		}
		v, ok := statistic(stat, a.base, cur)
		if !ok || !breaches(a.Comparison, v, a.Threshold) {
			continue
		}
		return true, fmt.Sprintf("alarm %q: %s%s %s %s %s threshold %s", a.Name, a.Metric, selector(a.Labels), stat,
			number(v), symbol[a.Comparison], number(a.Threshold))
	}
	return false, ""
}

// resolve returns the statistic in effect for a metric of type t.
func resolve(s Statistic, t dto.MetricType) (Statistic, error) {
	kind := strings.ToLower(t.String())
	switch {
	case s == "" && t == dto.MetricType_COUNTER:
		return Increase, nil
	case s == "" && (t == dto.MetricType_GAUGE || t == dto.MetricType_UNTYPED):
		return Value, nil
	case s == "" && t == dto.MetricType_HISTOGRAM:
		return "", errors.New("a histogram needs statistic p50, p90, p99 or mean")
	case s == Increase && t == dto.MetricType_COUNTER,
		s == Value && (t == dto.MetricType_GAUGE || t == dto.MetricType_UNTYPED),
		(s == Mean || quantiles[s] > 0) && t == dto.MetricType_HISTOGRAM:
		return s, nil
	case s == "":
		return "", fmt.Errorf("metric type %s is not supported", kind)
	}
	return "", fmt.Errorf("statistic %s does not apply to a %s", s, kind)
}

// statistic computes s over the current samples cur of the matching series,
// given their samples when armed; ok is false when there is no data.
func statistic(s Statistic, base map[string]*dto.Metric, cur []*dto.Metric) (v float64, ok bool) {
	if len(cur) == 0 {
		return 0, false
	}
	switch s {
	case Increase:
		for _, m := range cur {
			now, was := m.GetCounter().GetValue(), base[seriesKey(m)].GetCounter().GetValue()
			if now < was { // the counter restarted: all of now is growth
				was = 0
			}
			v += now - was
		}
		return v, true
	case Value:
		for _, m := range cur {
			if m.GetGauge() != nil {
				v += m.GetGauge().GetValue()
			} else {
				v += m.GetUntyped().GetValue()
			}
		}
		return v, true
	}
	d := histogramDelta(base, cur)
	if d.count == 0 {
		return 0, false
	}
	if s == Mean {
		return d.sum / d.count, true
	}
	v = d.quantile(quantiles[s])
	return v, !math.IsNaN(v)
}

// delta is the observations of a set of histogram series since armed.
type delta struct {
	count, sum float64
	buckets    map[float64]float64 // finite upper bound → cumulative count
}

func histogramDelta(base map[string]*dto.Metric, cur []*dto.Metric) delta {
	d := delta{buckets: map[float64]float64{}}
	for _, m := range cur {
		h, was := m.GetHistogram(), base[seriesKey(m)].GetHistogram()
		if h.GetSampleCount() < was.GetSampleCount() { // restarted: all of h is new
			was = nil
		}
		d.count += float64(h.GetSampleCount() - was.GetSampleCount())
		d.sum += h.GetSampleSum() - was.GetSampleSum()
		before := map[float64]uint64{}
		for _, b := range was.GetBucket() {
			before[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		for _, b := range h.GetBucket() {
			if ub := b.GetUpperBound(); !math.IsInf(ub, 1) {
				d.buckets[ub] += float64(b.GetCumulativeCount() - before[ub])
			}
		}
	}
	return d
}

// quantile interpolates linearly within the bucket holding rank q·count, as
// PromQL's histogram_quantile does: the lowest bucket starts at 0, and a
// rank beyond the highest finite bucket answers that bucket's upper bound.
func (d delta) quantile(q float64) float64 {
	bounds := make([]float64, 0, len(d.buckets))
	for ub := range d.buckets {
		bounds = append(bounds, ub)
	}
	if len(bounds) == 0 {
		return math.NaN()
	}
	slices.Sort(bounds)
	rank := q * d.count
	lower, below := 0.0, 0.0
	for i, ub := range bounds {
		c := d.buckets[ub]
		if c >= rank {
			if i == 0 && ub <= 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-below)/(c-below)
		}
		lower, below = ub, c
	}
	return bounds[len(bounds)-1]
}

var symbol = map[Comparison]string{
	GreaterThanThreshold:          ">",
	GreaterThanOrEqualToThreshold: ">=",
	LessThanThreshold:             "<",
	LessThanOrEqualToThreshold:    "<=",
}

func breaches(c Comparison, v, threshold float64) bool {
	switch c {
	case GreaterThanThreshold:
		return v > threshold
	case GreaterThanOrEqualToThreshold:
		return v >= threshold
	case LessThanThreshold:
		return v < threshold
	case LessThanOrEqualToThreshold:
		return v <= threshold
	}
	return false
}

// matches reports whether series m belongs to the watched endpoint and
// carries every wanted label.
func (w *Watch) matches(want map[string]string, m *dto.Metric) bool {
	found := 0
	for _, lp := range m.GetLabel() {
		name, val := lp.GetName(), lp.GetValue()
		if name == EndpointLabel {
			if val != w.endpoint {
				return false
			}
			found++
			continue
		}
		if wv, ok := want[name]; ok {
			if !valueMatches(wv, val) {
				return false
			}
			found++
		}
	}
	return found == len(want)+1
}

// valueMatches is exact, except that a wanted "5xx" (any digit, then "xx")
// also matches a three-digit value starting with that digit: HTTP status
// codes are labelled one by one, and an alarm means a class of them.
func valueMatches(want, got string) bool {
	if want == got {
		return true
	}
	if len(want) != 3 || want[1:] != "xx" || len(got) != 3 || got[0] != want[0] {
		return false
	}
	for _, r := range got {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// seriesKey identifies a series within its family by its label pairs,
// which the Gatherer contract returns sorted by name.
func seriesKey(m *dto.Metric) string {
	var b strings.Builder
	for _, lp := range m.GetLabel() {
		b.WriteString(lp.GetName())
		b.WriteByte(0xff)
		b.WriteString(lp.GetValue())
		b.WriteByte(0xff)
	}
	return b.String()
}

// number writes counts as integers and anything else to six significant
// digits, which is all a reason needs.
func number(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// selector renders an alarm's labels PromQL-style for reasons.
func selector(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	parts := make([]string, 0, len(labels))
	for _, k := range sortedKeys(labels) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func index(fams []*dto.MetricFamily) map[string]*dto.MetricFamily {
	byName := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	return byName
}
