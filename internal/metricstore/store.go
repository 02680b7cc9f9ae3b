package metricstore

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// Dimension is one CloudWatch dimension of a series.
type Dimension struct{ Name, Value string }

// Series names one metric: a namespace, a metric name and a dimension set
// (sorted by name). Two dimension sets are two series, as in CloudWatch.
type Series struct {
	Namespace, Metric string
	Dimensions        []Dimension
}

// key is the series' map key.
func (s Series) key() string {
	var b strings.Builder
	b.WriteString(s.Namespace)
	b.WriteByte(0)
	b.WriteString(s.Metric)
	for _, d := range s.Dimensions {
		b.WriteByte(0)
		b.WriteString(d.Name)
		b.WriteByte('=')
		b.WriteString(d.Value)
	}
	return b.String()
}

// Resolution is the width of the finest stored aggregate.
const Resolution = time.Second

// Retention of the per-second aggregates.
const Retention = 3 * time.Hour

// DefaultMaxSeries bounds the number of series kept.
const DefaultMaxSeries = 10000

// ErrTooManySeries is returned by Record when a new series would pass
// Options.MaxSeries.
var ErrTooManySeries = errors.New("metricstore: too many series")

// Options configure a Store.
type Options struct {
	MaxSeries int // 0: DefaultMaxSeries
}

// Store holds metric series. Safe for concurrent use.
type Store struct {
	clk clock.Clock
	max int

	mu     sync.Mutex
	series map[string]*series
}

type series struct {
	id      Series
	buckets map[int64]*Aggregate // unix second → aggregate
	last    int64                // newest bucket
}

// New returns an empty store reading time from clk.
func New(clk clock.Clock, o Options) *Store {
	if o.MaxSeries <= 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	return &Store{clk: clk, max: o.MaxSeries, series: map[string]*series{}}
}

// Record adds one sample of value to the series at the clock's now.
// dims need not be sorted.
func (s *Store) Record(namespace, metric string, dims []Dimension, value float64) error {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Errorf("metricstore: %s/%s: value %v is not finite", namespace, metric, value)
	}
	id := Series{Namespace: namespace, Metric: metric, Dimensions: sortedDims(dims)}
	k := id.key()
	now := s.clk.Now()
	sec := now.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.series[k]
	if se == nil {
		if len(s.series) >= s.max {
			return ErrTooManySeries
		}
		se = &series{id: id, buckets: map[int64]*Aggregate{}}
		s.series[k] = se
	}
	a := se.buckets[sec]
	if a == nil {
		a = &Aggregate{Start: time.Unix(sec, 0).UTC()}
		se.buckets[sec] = a
		s.prune(se, now)
	}
	if sec > se.last {
		se.last = sec
	}
	a.add(value)
	return nil
}

// prune drops se's buckets older than Retention.
func (s *Store) prune(se *series, now time.Time) {
	oldest := now.Add(-Retention).Unix()
	for sec := range se.buckets {
		if sec < oldest {
			delete(se.buckets, sec)
		}
	}
}

// Query selects one series (exact dimension set) over [Start, End) in
// periods of Period.
type Query struct {
	Namespace, Metric string
	Dimensions        []Dimension
	Start, End        time.Time
	Period            time.Duration
}

// Statistics returns one Aggregate per period of q that holds at least one
// sample, oldest first; Aggregate.Start is the period's start (Start plus a
// multiple of Period). An unknown series gives no aggregates and no error.
func (s *Store) Statistics(q Query) ([]Aggregate, error) {
	if q.Period < Resolution || q.Period%Resolution != 0 {
		return nil, fmt.Errorf("metricstore: period %v is not a positive multiple of %v", q.Period, Resolution)
	}
	if !q.End.After(q.Start) {
		return nil, nil
	}
	id := Series{Namespace: q.Namespace, Metric: q.Metric, Dimensions: sortedDims(q.Dimensions)}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.series[id.key()]
	if se == nil {
		return nil, nil
	}
	per := int64(q.Period / Resolution)
	from, to := ceilSec(q.Start), ceilSec(q.End) // seconds [from, to)
	out := map[int64]*Aggregate{}
	for sec, a := range se.buckets {
		if sec < from || sec >= to {
			continue
		}
		p := from + (sec-from)/per*per
		agg := out[p]
		if agg == nil {
			agg = &Aggregate{Start: time.Unix(p, 0).UTC()}
			out[p] = agg
		}
		agg.merge(a)
	}
	res := make([]Aggregate, 0, len(out))
	for _, a := range out {
		res = append(res, *a)
	}
	slices.SortFunc(res, func(a, b Aggregate) int { return a.Start.Compare(b.Start) })
	return res, nil
}

// List returns the series of namespace (every namespace when "") and
// metric (every metric when "") that carry every dimension of filter
// (a filter with Value "" matches any value of that name) and have a sample
// within Retention, sorted.
func (s *Store) List(namespace, metric string, filter []Dimension) []Series {
	oldest := s.clk.Now().Add(-Retention).Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Series
	for _, se := range s.series {
		if namespace != "" && se.id.Namespace != namespace || metric != "" && se.id.Metric != metric || se.last < oldest {
			continue
		}
		if !matches(se.id.Dimensions, filter) {
			continue
		}
		out = append(out, se.id)
	}
	slices.SortFunc(out, func(a, b Series) int { return strings.Compare(a.key(), b.key()) })
	return out
}

func matches(dims, filter []Dimension) bool {
	for _, f := range filter {
		ok := false
		for _, d := range dims {
			if d.Name == f.Name && (f.Value == "" || d.Value == f.Value) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func sortedDims(d []Dimension) []Dimension {
	out := slices.Clone(d)
	slices.SortFunc(out, func(a, b Dimension) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ceilSec is the first whole second at or after t.
func ceilSec(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
