package metricstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Key is the series' identity as a string: namespace, metric and sorted
// dimensions, NUL-separated. List returns series in Key order, so a key is
// also a page position.
func (s Series) Key() string {
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

// MinuteResolution is the width of the coarse aggregates, into which
// seconds are rolled once their minute is over.
const MinuteResolution = time.Minute

// MinuteRetention of the per-minute aggregates (and of a series: one
// without a sample for this long is forgotten).
const MinuteRetention = 15 * 24 * time.Hour

// PruneInterval is how often Run rolls and prunes every series.
const PruneInterval = time.Minute

// DefaultMaxSeries bounds the number of series kept.
const DefaultMaxSeries = 10000

const (
	retentionSecs       = int64(Retention / time.Second)
	minuteSecs          = int64(MinuteResolution / time.Second)
	minuteRetentionSecs = int64(MinuteRetention / time.Second)
)

// ErrTooManySeries is returned by Record when a new series would pass
// Options.MaxSeries.
var ErrTooManySeries = errors.New("metricstore: too many series")

// Options configure a Store.
type Options struct {
	MaxSeries int // 0: DefaultMaxSeries
}

// Store holds metric series. Safe for concurrent use: the series map has
// one lock, each series its own, so recorders of different series do not
// contend.
type Store struct {
	clk clock.Clock
	max int

	mu     sync.RWMutex
	series map[string]*series
}

// series is one series' two tiers. secs holds the per-second aggregates of
// the last Retention, mins the per-minute ones of the last MinuteRetention;
// seconds before rolled (minute-aligned) have been rolled into mins, those
// from rolled on are only in secs.
type series struct {
	id Series

	mu     sync.Mutex
	secs   []agg // ascending t
	mins   []agg // ascending t
	rolled int64
	last   int64 // newest sample's second
	dead   bool  // pruned from the store: a Handle must look again
}

// New returns an empty store reading time from clk.
func New(clk clock.Clock, o Options) *Store {
	if o.MaxSeries <= 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	return &Store{clk: clk, max: o.MaxSeries, series: map[string]*series{}}
}

// Record adds one sample of value to the series at the clock's now.
// dims need not be sorted. A hot path that records into the same series
// again and again uses a Handle instead.
func (s *Store) Record(namespace, metric string, dims []Dimension, value float64) error {
	if err := finite(namespace, metric, value); err != nil {
		return err
	}
	id := Series{Namespace: namespace, Metric: metric, Dimensions: sortedDims(dims)}
	se, err := s.get(id, id.Key())
	if err != nil {
		return err
	}
	se.record(s, s.clk.Now().Unix(), value, false)
	return nil
}

func finite(namespace, metric string, value float64) error {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Errorf("metricstore: %s/%s: value %v is not finite", namespace, metric, value)
	}
	return nil
}

// get returns the live series of id, creating it within the series cap.
func (s *Store) get(id Series, k string) (*series, error) {
	s.mu.RLock()
	se := s.series[k]
	s.mu.RUnlock()
	if se != nil {
		return se, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if se = s.series[k]; se != nil {
		return se, nil
	}
	if len(s.series) >= s.max {
		return nil, fmt.Errorf("%w (%d): %s/%s not recorded", ErrTooManySeries, s.max, id.Namespace, id.Metric)
	}
	se = &series{id: id}
	s.series[k] = se
	return se, nil
}

// record adds v at second sec (replace: as the second's only sample). A
// series found dead (pruned meanwhile) is looked up again, once.
func (se *series) record(s *Store, sec int64, v float64, replace bool) *series {
	se.mu.Lock()
	if se.dead {
		se.mu.Unlock()
		k := se.id.Key()
		nse, err := s.get(se.id, k)
		if err != nil {
			return se
		}
		se = nse
		se.mu.Lock()
	}
	defer se.mu.Unlock()
	if len(se.secs) == 0 && len(se.mins) == 0 {
		se.rolled = floorMinute(sec)
	}
	if sec >= se.rolled+minuteSecs {
		se.maintain(sec)
	}
	n := len(se.secs)
	switch {
	case n > 0 && se.secs[n-1].t == sec:
		if replace {
			se.secs[n-1] = agg{t: sec}
		}
		se.secs[n-1].add(v)
	case n == 0 || se.secs[n-1].t < sec:
		se.secs = append(se.secs, agg{t: sec})
		se.secs[n].add(v)
	default:
		// The clock went back (a wall clock stepped): put the sample in
		// its second.
		i, ok := slices.BinarySearchFunc(se.secs, sec, cmpT)
		if !ok {
			se.secs = slices.Insert(se.secs, i, agg{t: sec})
		}
		if replace {
			se.secs[i] = agg{t: sec}
		}
		se.secs[i].add(v)
	}
	if sec < se.rolled {
		// Its minute was rolled already: by a clock that went back, or by
		// a reader that took the lock between this sample's clock reading
		// and its recording. Roll that minute again from its seconds while
		// they are all kept; past that, add the sample to the minute.
		if m := floorMinute(sec); se.secs[0].t <= m {
			se.reroll(m)
		} else {
			se.addToMinute(m, v)
		}
	}
	se.last = max(se.last, sec)
	return se
}

// addToMinute adds v to minute m's aggregate. se.mu is held.
func (se *series) addToMinute(m int64, v float64) {
	j, ok := slices.BinarySearchFunc(se.mins, m, cmpT)
	if !ok {
		se.mins = slices.Insert(se.mins, j, agg{t: m})
	}
	se.mins[j].add(v)
}

// reroll rebuilds minute m's aggregate from its seconds. se.mu is held.
func (se *series) reroll(m int64) {
	j, ok := slices.BinarySearchFunc(se.mins, m, cmpT)
	if !ok {
		se.mins = slices.Insert(se.mins, j, agg{t: m})
	}
	se.mins[j] = agg{t: m}
	i, _ := slices.BinarySearchFunc(se.secs, m, cmpT)
	for ; i < len(se.secs) && se.secs[i].t < m+minuteSecs; i++ {
		se.mins[j].merge(&se.secs[i])
	}
}

func cmpT(a agg, t int64) int {
	switch {
	case a.t < t:
		return -1
	case a.t > t:
		return 1
	}
	return 0
}

func floorMinute(sec int64) int64 {
	m := sec - sec%minuteSecs
	if sec < 0 && sec%minuteSecs != 0 {
		m -= minuteSecs
	}
	return m
}

// maintain rolls every complete minute before now's into mins and drops
// what is past retention. se.mu is held.
func (se *series) maintain(now int64) {
	cur := floorMinute(now)
	if cur > se.rolled {
		i, _ := slices.BinarySearchFunc(se.secs, se.rolled, cmpT)
		for ; i < len(se.secs) && se.secs[i].t < cur; i++ {
			m := floorMinute(se.secs[i].t)
			if n := len(se.mins); n == 0 || se.mins[n-1].t != m {
				se.mins = append(se.mins, agg{t: m})
			}
			se.mins[len(se.mins)-1].merge(&se.secs[i])
		}
		se.rolled = cur
	}
	if i, _ := slices.BinarySearchFunc(se.secs, now-retentionSecs, cmpT); i > 0 {
		clear(se.secs[:i]) // release their histograms
		se.secs = se.secs[i:]
	}
	if i, _ := slices.BinarySearchFunc(se.mins, now-minuteRetentionSecs, cmpT); i > 0 {
		clear(se.mins[:i])
		se.mins = se.mins[i:]
	}
}

// Handle records into one series without building its key each time: the
// gateway's per-request path. Recording allocates only when a new second
// opens for the series (amortised growth of its slice). Safe for
// concurrent use.
type Handle struct {
	s  *Store
	id Series
	k  string
	se atomic.Pointer[series]
}

// Handle returns a recorder for one series. The series is created on the
// first Record (within the series cap), and again after the store forgot it.
func (s *Store) Handle(namespace, metric string, dims []Dimension) *Handle {
	id := Series{Namespace: namespace, Metric: metric, Dimensions: sortedDims(dims)}
	return &Handle{s: s, id: id, k: id.Key()}
}

// Series names the handle's series.
func (h *Handle) Series() Series { return h.id }

// Record adds one sample of value at the clock's now.
func (h *Handle) Record(value float64) error { return h.RecordAt(h.s.clk.Now(), value) }

// RecordAt adds one sample of value at t (a caller recording several
// series for one event reads the clock once).
func (h *Handle) RecordAt(t time.Time, value float64) error { return h.recordAt(t, value, false) }

// SetAt records value as the only sample of t's second, replacing one
// recorded in that second before: a gauge sampled more often than once a
// second keeps one sample a second, its newest value.
func (h *Handle) SetAt(t time.Time, value float64) error { return h.recordAt(t, value, true) }

func (h *Handle) recordAt(t time.Time, value float64, replace bool) error {
	if err := finite(h.id.Namespace, h.id.Metric, value); err != nil {
		return err
	}
	se := h.se.Load()
	if se == nil {
		var err error
		if se, err = h.s.get(h.id, h.k); err != nil {
			return err
		}
	}
	if got := se.record(h.s, t.Unix(), value, replace); got != se || h.se.Load() == nil {
		h.se.Store(got)
	}
	return nil
}

// Prune rolls every series' complete minutes and drops aggregates past
// their retention and series with no sample within MinuteRetention. Record
// and Statistics keep the series they touch in order; Prune (Run calls it
// every PruneInterval) bounds the memory of the ones nobody touches.
func (s *Store) Prune() {
	now := s.clk.Now().Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, se := range s.series {
		se.mu.Lock()
		se.maintain(now)
		if se.last < now-minuteRetentionSecs || len(se.secs) == 0 && len(se.mins) == 0 {
			se.dead = true
			delete(s.series, k)
		}
		se.mu.Unlock()
	}
}

// Run prunes every PruneInterval of the store's clock until ctx ends.
func (s *Store) Run(ctx context.Context) {
	t := s.clk.NewTicker(PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.Prune()
		}
	}
}

// Len is the number of series kept.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.series)
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
// multiple of Period). Start and End count from the first whole second at
// or after them. An unknown series gives no aggregates and no error.
//
// Which tier answers, as in CloudWatch: when the whole range is within
// Retention (3 h) and Period is under a minute or not a multiple of one,
// the per-second aggregates; otherwise the per-minute ones. A range that
// reaches past Retention with a Period that is not a multiple of a minute
// gives no aggregates (CloudWatch returns no datapoints then). From the
// minute tier a minute counts whole in the period holding it; a minute
// split by a period or range boundary is read from its seconds while they
// are kept, else counted in the period of its start. So while seconds are
// kept, every answer is exact to the second whatever the tier.
func (s *Store) Statistics(q Query) ([]Aggregate, error) {
	if q.Period < Resolution || q.Period%Resolution != 0 {
		return nil, fmt.Errorf("metricstore: period %v is not a positive multiple of %v", q.Period, Resolution)
	}
	if !q.End.After(q.Start) {
		return nil, nil
	}
	id := Series{Namespace: q.Namespace, Metric: q.Metric, Dimensions: sortedDims(q.Dimensions)}
	now := s.clk.Now().Unix()
	per := int64(q.Period / Resolution)
	from, to := ceilSec(q.Start), ceilSec(q.End) // seconds [from, to)
	oldest := now - retentionSecs                // first second kept
	seconds := from >= oldest && (per < minuteSecs || per%minuteSecs != 0)
	if !seconds && per%minuteSecs != 0 {
		return nil, nil
	}
	s.mu.RLock()
	se := s.series[id.Key()]
	s.mu.RUnlock()
	if se == nil {
		return nil, nil
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	se.maintain(now)

	var out []Aggregate // one per period index, allocated lazily
	idx := map[int64]int{}
	put := func(t int64, a *agg) {
		p := (t - from) / per
		i, ok := idx[p]
		if !ok {
			i = len(out)
			idx[p] = i
			out = append(out, Aggregate{Start: time.Unix(from+p*per, 0).UTC()})
		}
		out[i].mergeAgg(a)
	}
	secsIn := func(lo, hi int64) {
		i, _ := slices.BinarySearchFunc(se.secs, max(lo, oldest), cmpT)
		for ; i < len(se.secs) && se.secs[i].t < hi; i++ {
			put(se.secs[i].t, &se.secs[i])
		}
	}
	if seconds {
		secsIn(from, to)
	} else {
		i, _ := slices.BinarySearchFunc(se.mins, from-minuteSecs+1, cmpT)
		for ; i < len(se.mins) && se.mins[i].t < to; i++ {
			m := &se.mins[i]
			end := m.t + minuteSecs
			switch {
			case m.t >= from && end <= to && (m.t-from)/per == (end-1-from)/per:
				put(m.t, m) // whole, in one period
			case m.t >= oldest:
				secsIn(max(m.t, from), min(end, to))
			case m.t >= from:
				put(m.t, m)
			}
		}
		secsIn(max(from, se.rolled), to) // not rolled yet
	}
	slices.SortFunc(out, func(a, b Aggregate) int { return a.Start.Compare(b.Start) })
	return out, nil
}

// List returns the series of namespace (every namespace when "") and
// metric (every metric when "") that carry every dimension of filter
// (a filter with Value "" matches any value of that name) and have a sample
// within MinuteRetention (what Statistics can still answer), sorted.
func (s *Store) List(namespace, metric string, filter []Dimension) []Series {
	oldest := s.clk.Now().Unix() - minuteRetentionSecs
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Series
	for _, se := range s.series {
		if namespace != "" && se.id.Namespace != namespace || metric != "" && se.id.Metric != metric {
			continue
		}
		if !matches(se.id.Dimensions, filter) {
			continue
		}
		se.mu.Lock()
		last := se.last
		se.mu.Unlock()
		if last < oldest {
			continue
		}
		out = append(out, se.id)
	}
	slices.SortFunc(out, func(a, b Series) int { return strings.Compare(a.Key(), b.Key()) })
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
