package metricstore

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// t0 is minute-aligned, so offsets below read as seconds into a minute.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var dims = []Dimension{{"VariantName", "AllTraffic"}, {"EndpointName", "ep"}}

const ns, metric = "AWS/SageMaker", "ModelLatency"

// at is one sample recorded off seconds after t0.
type at struct {
	off time.Duration
	v   float64
}

// want is one expected aggregate: its start offset from t0 and statistics.
type want struct {
	start          time.Duration
	n, sum, lo, hi float64
}

func feed(t *testing.T, clk *clock.Fake, s *Store, samples []at) {
	t.Helper()
	for _, x := range samples {
		clk.Set(t0.Add(x.off))
		if err := s.Record(ns, metric, dims, x.v); err != nil {
			t.Fatal(err)
		}
	}
}

func check(t *testing.T, got []Aggregate, ws []want) {
	t.Helper()
	if len(got) != len(ws) {
		t.Fatalf("got %d aggregates %+v, want %d", len(got), got, len(ws))
	}
	for i, w := range ws {
		g := got[i]
		if !g.Start.Equal(t0.Add(w.start)) || g.SampleCount != w.n || g.Sum != w.sum || g.Min != w.lo || g.Max != w.hi {
			t.Errorf("aggregate %d: start %v n %v sum %v min %v max %v; want start %v n %v sum %v min %v max %v",
				i, g.Start.Sub(t0), g.SampleCount, g.Sum, g.Min, g.Max, w.start, w.n, w.sum, w.lo, w.hi)
		}
	}
}

func TestStatistics(t *testing.T) {
	s, m, h := time.Second, time.Minute, time.Hour
	cases := []struct {
		name       string
		samples    []at
		now        time.Duration // clock when querying
		start, end time.Duration
		period     time.Duration
		want       []want
	}{
		{"per-second periods", []at{{0, 1}, {0, 3}, {1 * s, 5}, {3 * s, 7}}, 10 * s, 0, 10 * s, s,
			[]want{{0, 2, 4, 1, 3}, {s, 1, 5, 5, 5}, {3 * s, 1, 7, 7, 7}}},
		{"merge across seconds", []at{{0, 1}, {1 * s, 5}, {4 * s, 2}, {5 * s, 9}}, 10 * s, 0, 10 * s, 5 * s,
			[]want{{0, 3, 8, 1, 5}, {5 * s, 1, 9, 9, 9}}},
		{"end is exclusive, start inclusive", []at{{0, 1}, {2 * s, 2}, {4 * s, 4}}, 10 * s, 2 * s, 4 * s, 10 * s,
			[]want{{2 * s, 1, 2, 2, 2}}},
		{"fractional bounds round up", []at{{0, 1}, {1 * s, 2}, {2 * s, 4}}, 10 * s, 500 * time.Millisecond, 1500 * time.Millisecond, s,
			[]want{{s, 1, 2, 2, 2}}},
		{"minute tier merges minutes", []at{{10 * s, 1}, {70 * s, 2}, {130 * s, 3}, {190 * s, 4}}, 10 * m, 0, 10 * m, 2 * m,
			[]want{{0, 2, 3, 1, 2}, {2 * m, 2, 7, 3, 4}}},
		{"period not a multiple of a minute: seconds", []at{{10 * s, 1}, {80 * s, 2}, {100 * s, 3}}, 10 * m, 0, 10 * m, 90 * s,
			[]want{{0, 2, 3, 1, 2}, {90 * s, 1, 3, 3, 3}}},
		{"minute tier, unaligned start reads edge seconds", []at{{10 * s, 1}, {40 * s, 2}, {70 * s, 3}, {100 * s, 4}}, 2 * m, 30 * s, 90 * s, m,
			[]want{{30 * s, 2, 5, 2, 3}}},
		{"minute tier includes the current, unrolled minute", []at{{10 * s, 1}, {61 * s, 2}, {62 * s, 3}}, 62 * s, 0, 2 * m, m,
			[]want{{0, 1, 1, 1, 1}, {m, 2, 5, 2, 3}}},
		{"3 h later seconds are still kept", []at{{0, 1}, {1 * s, 2}}, 3 * h, 0, 2 * s, s,
			[]want{{0, 1, 1, 1, 1}, {s, 1, 2, 2, 2}}},
		{"past 3 h a seconds query is empty", []at{{0, 1}, {1 * s, 2}}, 3*h + s, 0, 2 * s, s, nil},
		{"past 3 h minutes still answer", []at{{0, 1}, {1 * s, 2}}, 3*h + s, 0, m, m,
			[]want{{0, 2, 3, 1, 2}}},
		{"past 3 h a minute split by the start counts in its start's period", []at{{0, 1}, {70 * s, 2}}, 4 * h, 30 * s, 150 * s, m,
			[]want{{30 * s, 1, 2, 2, 2}}},
		{"15 days later minutes are kept", []at{{0, 1}}, 15 * 24 * h, 0, h, h, []want{{0, 1, 1, 1, 1}}},
		{"past 15 days nothing", []at{{0, 1}}, 15*24*h + m, 0, h, h, nil},
		{"negative and zero samples", []at{{0, -2}, {0, 0}, {0, 3}}, s, 0, s, s, []want{{0, 3, 1, -2, 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			st := New(clk, Options{})
			feed(t, clk, st, c.samples)
			clk.Set(t0.Add(c.now))
			got, err := st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims,
				Start: t0.Add(c.start), End: t0.Add(c.end), Period: c.period})
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, c.want)
		})
	}
}

func TestStatisticsBadQueries(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	feed(t, clk, st, []at{{0, 1}})
	for _, p := range []time.Duration{0, -time.Second, 1500 * time.Millisecond} {
		if _, err := st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0.Add(time.Hour), Period: p}); err == nil {
			t.Errorf("period %v: no error", p)
		}
	}
	// An empty range, another dimension set, an unknown metric: no data, no error.
	for _, q := range []Query{
		{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0, Period: time.Second},
		{Namespace: ns, Metric: metric, Dimensions: dims[:1], Start: t0, End: t0.Add(time.Hour), Period: time.Second},
		{Namespace: ns, Metric: "Nope", Dimensions: dims, Start: t0, End: t0.Add(time.Hour), Period: time.Second},
	} {
		if got, err := st.Statistics(q); err != nil || len(got) != 0 {
			t.Errorf("%+v: %v, %v", q, got, err)
		}
	}
	if err := st.Record(ns, metric, dims, math.NaN()); err == nil {
		t.Error("NaN recorded")
	}
	if err := st.Record(ns, metric, dims, math.Inf(1)); err == nil {
		t.Error("+Inf recorded")
	}
}

// TestPercentileAccuracy: percentiles of a wide distribution, from the
// per-second tier and from minutes merged over an hour, are within 1 % of
// the exact nearest-rank sample.
func TestPercentileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	var all []float64
	for sec := range 3600 {
		clk.Set(t0.Add(time.Duration(sec) * time.Second))
		for range 5 {
			v := math.Exp(rng.NormFloat64()*2) * 1000 // microseconds, spread over decades
			all = append(all, v)
			if err := st.Record(ns, metric, dims, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	exact := slices.Clone(all[:3599*5]) // the range leaves out the last second
	slices.Sort(exact)
	clk.Set(t0.Add(2 * time.Hour))
	for _, period := range []time.Duration{3600 * time.Second, 3599 * time.Second} { // minutes; seconds
		got, err := st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0.Add(3599 * time.Second), Period: period})
		if err != nil || len(got) != 1 {
			t.Fatalf("period %v: %v, %v", period, got, err)
		}
		a := got[0]
		if a.SampleCount != 3599*5 {
			t.Fatalf("period %v: %v samples", period, a.SampleCount)
		}
		for _, p := range []float64{1, 10, 50, 90, 99, 99.9} {
			want := exact[int(math.Ceil(p/100*float64(len(exact))))-1]
			if g := a.Percentile(p); math.Abs(g-want)/want > 0.0101 {
				t.Errorf("period %v p%v = %v, exact %v (%.2f %%)", period, p, g, want, 100*(g-want)/want)
			}
		}
		if a.Min != exact[0] || a.Max != exact[len(exact)-1] {
			t.Errorf("min/max %v %v, want %v %v", a.Min, a.Max, exact[0], exact[len(exact)-1])
		}
	}
}

func TestAggregateValue(t *testing.T) {
	var a Aggregate
	for _, v := range []float64{1, 2, 3, 4} {
		b := agg{}
		b.add(v)
		a.mergeAgg(&b)
	}
	cases := []struct {
		stat string
		want float64
		ok   bool
	}{
		{"SampleCount", 4, true}, {"Sum", 10, true}, {"Average", 2.5, true}, {"Minimum", 1, true}, {"Maximum", 4, true},
		{"p50", 2, true}, {"p100", 0, false}, {"p0", 0, false}, {"p", 0, false}, {"pabc", 0, false}, {"p1e1", 0, false},
		{"average", 0, false}, {"", 0, false},
	}
	for _, c := range cases {
		got, err := a.Value(c.stat)
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v", c.stat, err)
			continue
		}
		if c.ok && math.Abs(got-c.want)/c.want > 0.011 {
			t.Errorf("%q = %v, want %v", c.stat, got, c.want)
		}
	}
	var b Aggregate
	b.Merge(a)
	b.Merge(a)
	if b.SampleCount != 8 || b.Sum != 20 || b.Min != 1 || b.Max != 4 {
		t.Errorf("merged %+v", b)
	}
}

func TestSeriesCapAndPrune(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{MaxSeries: 2})
	rec := func(ep string) error {
		return st.Record(ns, "Invocations", []Dimension{{"EndpointName", ep}}, 1)
	}
	if err := rec("a"); err != nil {
		t.Fatal(err)
	}
	clk.Step(24 * time.Hour)
	if err := rec("b"); err != nil {
		t.Fatal(err)
	}
	if err := rec("c"); !errors.Is(err, ErrTooManySeries) {
		t.Fatalf("third series: %v", err)
	}
	if err := rec("a"); err != nil {
		t.Fatalf("an existing series at the cap: %v", err)
	}
	h := st.Handle(ns, "Invocations", []Dimension{{"EndpointName", "a"}})
	// a's last sample is now; b's is now too. 15 days on both go.
	clk.Step(15*24*time.Hour + time.Second)
	if got := st.List(ns, "", nil); len(got) != 0 {
		t.Fatalf("listed past retention: %v", got)
	}
	if st.Len() != 2 {
		t.Fatalf("before Prune: %d series", st.Len())
	}
	st.Prune()
	if st.Len() != 0 {
		t.Fatalf("after Prune: %d series", st.Len())
	}
	if err := rec("c"); err != nil {
		t.Fatalf("after Prune: %v", err)
	}
	// A handle whose series was forgotten creates it again.
	if err := h.Record(5); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Statistics(Query{Namespace: ns, Metric: "Invocations", Dimensions: []Dimension{{"EndpointName", "a"}},
		Start: clk.Now().Add(-time.Minute), End: clk.Now().Add(time.Second), Period: time.Minute})
	if len(got) != 1 || got[0].Sum != 5 {
		t.Fatalf("after re-creation: %+v", got)
	}
	if err := rec("d"); !errors.Is(err, ErrTooManySeries) {
		t.Fatalf("cap after re-creation: %v", err)
	}
}

// TestPruneBoundsSeconds: a series recorded every second for longer than
// Retention keeps about Retention of seconds (plus a minute) and every
// minute it had.
func TestPruneBoundsSeconds(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	h := st.Handle(ns, metric, dims)
	for sec := range 4 * 3600 {
		clk.Set(t0.Add(time.Duration(sec) * time.Second))
		if err := h.Record(1); err != nil {
			t.Fatal(err)
		}
	}
	st.Prune()
	se := h.se.Load()
	if n := len(se.secs); n < 3*3600 || n > 3*3600+60 {
		t.Fatalf("%d seconds kept", n)
	}
	if n := len(se.mins); n != 4*60-1 {
		t.Fatalf("%d minutes rolled, want %d", n, 4*60-1)
	}
	got, _ := st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0.Add(4 * time.Hour), Period: time.Hour})
	if len(got) != 4 || got[0].SampleCount != 3600 || got[3].SampleCount != 3600 {
		t.Fatalf("hours %+v", got)
	}
}

// TestRunPrunesOnTick: series nobody records into any more are forgotten by
// Run's tick, not only by the next Record.
func TestRunPrunesOnTick(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	if err := st.Record(ns, metric, dims, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { st.Run(ctx); close(done) }()
	clk.BlockUntil(1)
	clk.Step(MinuteRetention + PruneInterval)
	deadline := time.Now().Add(5 * time.Second)
	for st.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not prune")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

// TestClockBack: a wall clock stepped back puts samples in their own second
// and minute.
func TestClockBack(t *testing.T) {
	clk := &settable{now: t0.Add(10 * time.Minute)}
	st := New(clk, Options{})
	h := st.Handle(ns, metric, dims)
	_ = h.Record(1)
	clk.now = t0.Add(2 * time.Minute)
	_ = h.Record(2)
	clk.now = t0.Add(11 * time.Minute)
	_ = h.Record(4) // rolls minutes up to 11
	clk.now = t0.Add(5 * time.Minute)
	_ = h.Record(8) // into a rolled minute
	clk.now = t0.Add(12 * time.Minute)
	for _, p := range []time.Duration{time.Second * 59, time.Minute} {
		got, err := st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0.Add(12 * time.Minute), Period: p * 20})
		if err != nil || len(got) != 1 || got[0].Sum != 15 || got[0].SampleCount != 4 {
			t.Fatalf("period %v: %+v %v", p*20, got, err)
		}
	}
}

// settable is a clock a test may set backwards.
type settable struct {
	clock.Real
	now time.Time
}

func (c *settable) Now() time.Time { return c.now }

func TestList(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	for _, r := range []struct {
		ns, m string
		d     []Dimension
	}{
		{ns, "Invocations", []Dimension{{"EndpointName", "a"}, {"VariantName", "v1"}}},
		{ns, "Invocations", []Dimension{{"VariantName", "v2"}, {"EndpointName", "a"}}},
		{ns, "ModelLatency", []Dimension{{"EndpointName", "b"}, {"VariantName", "v1"}}},
		{"capstan", "QueueDepth", []Dimension{{"EndpointName", "a"}}},
	} {
		if err := st.Record(r.ns, r.m, r.d, 1); err != nil {
			t.Fatal(err)
		}
	}
	names := func(ss []Series) (out []string) {
		for _, s := range ss {
			n := s.Namespace + "/" + s.Metric
			for _, d := range s.Dimensions {
				n += " " + d.Name + "=" + d.Value
			}
			out = append(out, n)
		}
		return out
	}
	cases := []struct {
		ns, m  string
		filter []Dimension
		want   []string
	}{
		{ns, "Invocations", nil, []string{"AWS/SageMaker/Invocations EndpointName=a VariantName=v1", "AWS/SageMaker/Invocations EndpointName=a VariantName=v2"}},
		{"", "", []Dimension{{"EndpointName", "a"}, {"VariantName", ""}}, []string{"AWS/SageMaker/Invocations EndpointName=a VariantName=v1", "AWS/SageMaker/Invocations EndpointName=a VariantName=v2"}},
		{"", "", []Dimension{{"VariantName", "v1"}}, []string{"AWS/SageMaker/Invocations EndpointName=a VariantName=v1", "AWS/SageMaker/ModelLatency EndpointName=b VariantName=v1"}},
		{"capstan", "", nil, []string{"capstan/QueueDepth EndpointName=a"}},
		{"Nope", "", nil, nil},
	}
	for _, c := range cases {
		if got := names(st.List(c.ns, c.m, c.filter)); !slices.Equal(got, c.want) {
			t.Errorf("List(%q, %q, %v) = %q, want %q", c.ns, c.m, c.filter, got, c.want)
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	st := New(clock.Real{}, Options{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = st.Record(ns, metric, dims, float64(i%1000))
	}
}

func BenchmarkHandleRecord(b *testing.B) {
	st := New(clock.Real{}, Options{})
	h := st.Handle(ns, metric, dims)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_ = h.Record(float64(i % 1000))
			i++
		}
	})
}

// TestSetAt: a gauge set several times in a second keeps one sample, its
// newest value; the next second is a new sample.
func TestSetAt(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	h := st.Handle(ns, "ConcurrentRequestsPerModel", dims)
	for _, v := range []float64{5, 9, 2} {
		clk.Step(100 * time.Millisecond)
		if err := h.SetAt(clk.Now(), v); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Second)
	_ = h.SetAt(clk.Now(), 7)
	got, err := st.Statistics(Query{Namespace: ns, Metric: "ConcurrentRequestsPerModel", Dimensions: dims, Start: t0, End: t0.Add(time.Minute), Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, []want{{0, 1, 2, 2, 2}, {time.Second, 1, 7, 7, 7}})
	if err := h.SetAt(clk.Now(), math.NaN()); err == nil {
		t.Fatal("NaN set")
	}
}

// TestConcurrent: recorders, readers and the pruner at once (run with
// -race); every sample recorded is counted once.
func TestConcurrent(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	h := st.Handle(ns, metric, dims)
	const writers, each = 4, 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			clk.Step(time.Second)
			st.Prune()
			_, _ = st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0.Add(time.Hour), Period: time.Minute})
			_ = st.List("", "", nil)
		}
	}()
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			for range each {
				var err error
				if i%2 == 0 {
					err = h.Record(1)
				} else {
					err = st.Record(ns, metric, dims, 1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	got, err := st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0.Add(time.Hour), Period: time.Hour})
	if err != nil || len(got) != 1 || got[0].SampleCount != writers*each {
		t.Fatalf("%+v %v, want %d samples", got, err, writers*each)
	}
}

// TestLateSampleInARolledMinute: a sample whose second's minute was rolled
// between its clock reading and its recording (a reader took the lock in
// between) still counts in the minute tier.
func TestLateSampleInARolledMinute(t *testing.T) {
	clk := clock.NewFake(t0)
	st := New(clk, Options{})
	if err := st.Record(ns, metric, dims, 1); err != nil {
		t.Fatal(err)
	}
	sec := t0.Unix()
	id := Series{Namespace: ns, Metric: metric, Dimensions: sortedDims(dims)}
	se, err := st.get(id, id.Key())
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(90 * time.Second)
	se.mu.Lock()
	se.maintain(clk.Now().Unix()) // a reader rolls t0's minute
	se.mu.Unlock()
	se.record(st, sec, 1, false) // the late sample, read at t0
	got, err := st.Statistics(Query{Namespace: ns, Metric: metric, Dimensions: dims, Start: t0, End: t0.Add(time.Hour), Period: time.Hour})
	if err != nil || len(got) != 1 || got[0].SampleCount != 2 {
		t.Fatalf("%+v %v, want 2 samples", got, err)
	}
}
