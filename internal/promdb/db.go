package promdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
)

// samplesPerChunk is where a series' chunk is cut, as in Prometheus' head.
const samplesPerChunk = 120

// Defaults of Options.
const (
	DefaultRetention = 3 * time.Hour
	DefaultMaxSeries = 10000
)

// ErrTooManySeries is Append's error for a new series past MaxSeries.
var ErrTooManySeries = errors.New("promdb: series limit reached")

// DB is an in-memory series store that PromQL reads (storage.Queryable).
// Safe for concurrent use: chunks are cut at samplesPerChunk, and a query
// reads the series' full chunks as they are and a copy of the one being
// appended to.
type DB struct {
	retention time.Duration
	maxSeries int

	mu     sync.RWMutex
	series map[uint64][]*memSeries // by labels hash; a collision chains
	count  int
}

// memSeries is one series' samples in time order.
type memSeries struct {
	lset labels.Labels

	mu     sync.Mutex
	chunks []chunkMeta // oldest first; the last is appended to
	app    chunkenc.Appender
	maxT   int64 // the last sample's time; math.MinInt64 before any
}

type chunkMeta struct {
	c          *chunkenc.XORChunk
	minT, maxT int64
}

// NewDB is an empty store keeping samples for retention (DefaultRetention
// if zero) and at most maxSeries series (DefaultMaxSeries if zero).
func NewDB(retention time.Duration, maxSeries int) *DB {
	if retention <= 0 {
		retention = DefaultRetention
	}
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	return &DB{retention: retention, maxSeries: maxSeries, series: map[uint64][]*memSeries{}}
}

// Series is how many series the store holds.
func (db *DB) Series() int {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.count
}

// Append adds one sample at t (milliseconds). A sample not after the
// series' last is dropped (returns false), as Prometheus drops an
// out-of-order sample; a new series past the limit is ErrTooManySeries.
func (db *DB) Append(lset labels.Labels, t int64, v float64) (bool, error) {
	s, err := db.getOrCreate(lset)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t <= s.maxT {
		return false, nil
	}
	if s.app == nil || s.chunks[len(s.chunks)-1].c.NumSamples() >= samplesPerChunk {
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		if err != nil {
			return false, fmt.Errorf("promdb: new chunk: %w", err)
		}
		s.chunks = append(s.chunks, chunkMeta{c: c, minT: t, maxT: t})
		s.app = app
	}
	s.app.Append(0, t, v)
	s.chunks[len(s.chunks)-1].maxT = t
	s.maxT = t
	return true, nil
}

func (db *DB) getOrCreate(lset labels.Labels) (*memSeries, error) {
	h := lset.Hash()
	db.mu.RLock()
	s := find(db.series[h], lset)
	db.mu.RUnlock()
	if s != nil {
		return s, nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if s := find(db.series[h], lset); s != nil {
		return s, nil
	}
	if db.count >= db.maxSeries {
		return nil, ErrTooManySeries
	}
	s = &memSeries{lset: lset.Copy(), maxT: math.MinInt64}
	db.series[h] = append(db.series[h], s)
	db.count++
	return s, nil
}

func find(list []*memSeries, lset labels.Labels) *memSeries {
	for _, s := range list {
		if labels.Equal(s.lset, lset) {
			return s
		}
	}
	return nil
}

// Prune drops the chunks that ended before now − retention and the series
// left without any.
func (db *DB) Prune(now time.Time) {
	minT := now.Add(-db.retention).UnixMilli()
	db.mu.Lock()
	defer db.mu.Unlock()
	for h, list := range db.series {
		kept := list[:0]
		for _, s := range list {
			s.mu.Lock()
			i := 0
			for i < len(s.chunks) && s.chunks[i].maxT < minT {
				i++
			}
			if i == len(s.chunks) {
				s.chunks, s.app = nil, nil
			} else {
				s.chunks = s.chunks[i:]
			}
			empty := len(s.chunks) == 0
			s.mu.Unlock()
			if empty {
				db.count--
				continue
			}
			kept = append(kept, s)
		}
		if len(kept) == 0 {
			delete(db.series, h)
		} else {
			db.series[h] = kept
		}
	}
}

// Querier reads the samples between mint and maxt (milliseconds).
func (db *DB) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{db: db, mint: mint, maxt: maxt}, nil
}

type querier struct {
	db         *DB
	mint, maxt int64
}

// selected is a matching series' labels and its chunks overlapping the
// querier's range, the one being appended to copied.
func (q *querier) selected(ms []*labels.Matcher) []storage.Series {
	q.db.mu.RLock()
	var out []storage.Series
	for _, list := range q.db.series {
		for _, s := range list {
			if !matches(s.lset, ms) {
				continue
			}
			if sr := s.snapshot(q.mint, q.maxt); sr != nil {
				out = append(out, sr)
			}
		}
	}
	q.db.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
	return out
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (s *memSeries) snapshot(mint, maxt int64) *series {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []chunkenc.Chunk
	for i, m := range s.chunks {
		if m.maxT < mint || m.minT > maxt {
			continue
		}
		if i == len(s.chunks)-1 {
			// The head chunk is still appended to: read a copy.
			b := slices.Clone(m.c.Bytes())
			c, err := chunkenc.FromData(chunkenc.EncXOR, b)
			if err != nil {
				continue
			}
			cs = append(cs, c)
			continue
		}
		cs = append(cs, m.c)
	}
	if len(cs) == 0 {
		return nil
	}
	return &series{lset: s.lset, chunks: cs}
}

func (q *querier) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	return &seriesSet{list: q.selected(ms), i: -1}
}

func (q *querier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]bool{}
	for _, s := range q.selected(ms) {
		if v := s.Labels().Get(name); v != "" {
			seen[v] = true
		}
	}
	return sortedKeys(seen), nil, nil
}

func (q *querier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]bool{}
	for _, s := range q.selected(ms) {
		s.Labels().Range(func(l labels.Label) { seen[l.Name] = true })
	}
	return sortedKeys(seen), nil, nil
}

func (q *querier) Close() error { return nil }

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type seriesSet struct {
	list []storage.Series
	i    int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *seriesSet) At() storage.Series                { return s.list[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

type series struct {
	lset   labels.Labels
	chunks []chunkenc.Chunk
}

func (s *series) Labels() labels.Labels { return s.lset }

// Iterator reads the series' chunks, which follow each other in time, as
// one sequence.
func (s *series) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	its := make([]chunkenc.Iterator, len(s.chunks))
	for i, c := range s.chunks {
		its[i] = c.Iterator(nil)
	}
	return storage.ChainSampleIteratorFromIterators(nil, its)
}

// staleNaN is Prometheus' staleness marker: a series that a scrape no
// longer returns ends there instead of lingering for the lookback delta.
var staleNaN = math.Float64frombits(value.StaleNaN)
