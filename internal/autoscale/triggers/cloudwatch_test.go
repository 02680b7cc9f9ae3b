package triggers

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// TestCloudWatchReaderPerRequest: Read is the store's statistic over the
// period's whole seconds ending with the current one.
func TestCloudWatchReaderPerRequest(t *testing.T) {
	ctx := context.Background()
	// at is one batch of samples recorded off after t0 on a variant.
	type at struct {
		off     time.Duration
		variant string
		vals    []float64
	}
	ones := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	cases := []struct {
		name, variant, metric, stat string
		samples                     []at
		want                        float64
		wantErr                     string
	}{
		{"Invocations Sum", "", "Invocations", "Sum", []at{{10 * time.Second, "v1", ones(6)}, {40 * time.Second, "v1", ones(4)}}, 10, ""},
		{"the period's first second is out, the current one in", "", "Invocations", "Sum",
			[]at{{0, "v1", ones(100)}, {time.Second, "v1", ones(1)}, {time.Minute, "v1", ones(2)}}, 3, ""},
		{"Invocations SampleCount", "", "Invocations", "SampleCount", []at{{10 * time.Second, "v1", ones(6)}}, 6, ""},
		{"Invocations Average is 1", "", "Invocations", "Average", []at{{10 * time.Second, "v1", ones(6)}}, 1, ""},
		{"InvocationsPerInstance Sum", "", "InvocationsPerInstance", "Sum", []at{{10 * time.Second, "v1", []float64{1, 1, 0.25, 0.25}}}, 2.5, ""},
		{"ModelLatency Average in microseconds", "", "ModelLatency", "Average", []at{{10 * time.Second, "v1", []float64{100_000, 300_000}}}, 200_000, ""},
		{"ModelLatency Maximum", "", "ModelLatency", "Maximum", []at{{10 * time.Second, "v1", []float64{100_000, 300_000}}}, 300_000, ""},
		{"ModelLatency p50 from the histogram", "", "ModelLatency", "p50", []at{{10 * time.Second, "v1", []float64{1000, 2000, 3000, 4000, 5000}}}, 3000, ""},
		{"OverheadLatency p99", "", "OverheadLatency", "p99", []at{{10 * time.Second, "v1", []float64{10, 20, 30, 40, 5000}}}, 5000, ""},
		{"5XX Average is the error rate", "", "Invocation5XXErrors", "Average", []at{{10 * time.Second, "v1", []float64{0, 1, 0, 0}}}, 0.25, ""},
		{"4XX Sum", "", "Invocation4XXErrors", "Sum", []at{{10 * time.Second, "v1", []float64{0, 1, 1, 0}}}, 2, ""},
		{"whole endpoint merges variants", "", "Invocations", "Sum", []at{{10 * time.Second, "blue", ones(3)}, {20 * time.Second, "green", ones(4)}}, 7, ""},
		{"a variant reads its own series", "blue", "Invocations", "Sum", []at{{10 * time.Second, "blue", ones(3)}, {20 * time.Second, "green", ones(4)}}, 3, ""},
		{"TimeToFirstToken in seconds", "", "TimeToFirstToken", "Average", []at{{10 * time.Second, "", []float64{0.2, 0.4}}}, 0.3, ""},
		{"no invocations is no data", "", "Invocations", "Sum", []at{{0, "v1", ones(3)}}, 0, ErrNoData.Error()},
		{"unknown metric", "", "CPUUtilization", "Average", nil, 0, "unknown metric"},
		{"bad statistic", "", "Invocations", "Median", nil, 0, "not available"},
		{"p100 is not a percentile", "", "Invocations", "p100", nil, 0, "not available"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, clk := newFakes()
			src.set(func(s *gateway.EndpointSnapshot) {
				s.Variants = map[string]gateway.VariantSnapshot{}
				for _, a := range c.samples {
					if a.variant != "" {
						s.Variants[a.variant] = gateway.VariantSnapshot{}
					}
				}
			})
			for _, a := range c.samples {
				clk.Set(t0.Add(a.off))
				src.record(Metric(c.metric), a.variant, a.vals...)
			}
			clk.Set(t0.Add(time.Minute))
			r := NewCloudWatchReader(src, clk, "ep")
			got, err := r.Read(ctx, c.variant, c.metric, c.stat, time.Minute)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Read = %v, %v; want error containing %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if math.Abs(got-c.want) > 0.01*math.Abs(c.want)+1e-9 {
				t.Fatalf("Read = %v, want %v", got, c.want)
			}
			if src.samples != 0 {
				t.Fatalf("a per-request metric sampled gauges %d times", src.samples)
			}
		})
	}
}

// TestCloudWatchReaderAgreesWithStore: a Read is exactly the aggregate the
// store (and so the CloudWatch API) gives for the same range, whichever
// tier answers.
func TestCloudWatchReaderAgreesWithStore(t *testing.T) {
	src, clk := newFakes()
	src.set(func(s *gateway.EndpointSnapshot) { s.Variants = map[string]gateway.VariantSnapshot{"v1": {}} })
	for i := range 900 {
		clk.Set(t0.Add(time.Duration(i) * time.Second))
		src.record(MetricModelLatency, "v1", float64(1000+i))
	}
	r := NewCloudWatchReader(src, clk, "ep")
	for _, period := range []time.Duration{time.Second, 10 * time.Second, 90 * time.Second, 5 * time.Minute, 10 * time.Minute} {
		end := clk.Now().Add(time.Second)
		want, err := src.store.Statistics(metricstore.Query{Namespace: NamespaceSageMaker, Metric: "ModelLatency",
			Dimensions: variantDims("ep", "v1"), Start: end.Add(-period), End: end, Period: period})
		if err != nil || len(want) != 1 {
			t.Fatalf("%v: %v %v", period, want, err)
		}
		for _, stat := range []string{"Sum", "SampleCount", "Minimum", "Maximum", "p90"} {
			got, err := r.Read(context.Background(), "v1", "ModelLatency", stat, period)
			w, _ := want[0].Value(stat)
			if err != nil || got != w {
				t.Errorf("%v %s = %v, %v; store says %v", period, stat, got, err, w)
			}
		}
		if n, _ := r.Read(context.Background(), "v1", "ModelLatency", "SampleCount", period); n != period.Seconds() {
			t.Errorf("%v: %v samples", period, n)
		}
	}
}

// TestCloudWatchReaderGauges: gauges are what the sampler recorded in the
// period; a Read samples first when the current second has none.
func TestCloudWatchReaderGauges(t *testing.T) {
	ctx := context.Background()
	type state struct {
		replicas, inflight, queued, waiting int
		kv                                  float64
	}
	// Sampled at t0 (outside a 25 s window read at t0+30s), +10s, +20s,
	// and at the read.
	states := []state{
		{replicas: 1, inflight: 100, queued: 100, waiting: 100, kv: 1},
		{replicas: 2, inflight: 4, queued: 2, waiting: 1, kv: 0.2},
		{replicas: 2, inflight: 8, queued: 0, waiting: 3, kv: 0.4},
		{replicas: 4, inflight: 6, queued: 6, waiting: 0, kv: 0.9},
	}
	cases := []struct {
		metric, stat string
		want         float64
	}{
		{"QueueDepth", "Average", (3 + 3 + 6) / 3.0},
		{"QueueDepth", "Maximum", 6},
		{"QueueDepth", "Minimum", 3},
		{"QueueDepth", "SampleCount", 3},
		{"QueueDepth", "Sum", 12},
		{"InFlightPerReplica", "Average", (3 + 4 + 3) / 3.0},
		{"InFlightPerReplica", "p50", 3},
		{"InFlightPerReplica", "p99", 4},
		{"KVCacheUtilization", "Maximum", 0.9},
		{"KVCacheUtilization", "Average", 0.5},
		{"ConcurrentRequestsPerModel", "Average", (6 + 8 + 12) / 3.0},
	}
	for _, c := range cases {
		t.Run(c.metric+" "+c.stat, func(t *testing.T) {
			src, clk := newFakes()
			r := NewCloudWatchReader(src, clk, "ep")
			for i, st := range states {
				if i > 0 {
					clk.Step(10 * time.Second)
				}
				src.set(func(s *gateway.EndpointSnapshot) {
					s.Replicas, s.InFlight, s.Queued, s.EngineWaiting, s.KVUsage = st.replicas, st.inflight, st.queued, st.waiting, st.kv
					s.Variants = map[string]gateway.VariantSnapshot{"v1": {InFlight: st.inflight}}
				})
				if i < len(states)-1 {
					src.SampleGauges("ep") // the sampler's tick
				}
			}
			got, err := r.Read(ctx, "", c.metric, c.stat, 25*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-c.want) > 0.01*c.want {
				t.Fatalf("= %v, want %v", got, c.want)
			}
			// Read again in the same second: no second sample.
			n, _ := r.Read(ctx, "", c.metric, "SampleCount", 25*time.Second)
			if n != 3 {
				t.Fatalf("%v samples after two reads in one second, want 3", n)
			}
		})
	}
}

// TestCloudWatchReaderArrivalRate: arrivals per second between samples;
// no arrivals is a rate of 0, not "no data" (an idle endpoint is a real
// reading), and every statistic applies.
func TestCloudWatchReaderArrivalRate(t *testing.T) {
	ctx := context.Background()
	src, clk := newFakes()
	src.set(func(s *gateway.EndpointSnapshot) { s.Arrivals = 1000 }) // before the first sample: never counted
	r := NewCloudWatchReader(src, clk, "ep")
	if _, err := r.Read(ctx, "", "ArrivalRate", "Average", time.Second); !errors.Is(err, ErrNoData) {
		t.Fatalf("the first sample is a baseline: err = %v", err)
	}
	steps := []struct {
		after    time.Duration
		arrivals uint64
		period   time.Duration
		stat     string
		want     float64
	}{
		{time.Second, 3, time.Second, "Average", 3},
		{2 * time.Second, 12, time.Second, "Average", 6},
		{time.Second, 0, time.Second, "Average", 0},
		{time.Second, 4, 5 * time.Second, "Maximum", 6},
		{time.Second, 4, 5 * time.Second, "Sum", 6 + 0 + 4 + 4}, // the samples of t0+2s … t0+6s
	}
	for i, st := range steps {
		clk.Step(st.after)
		src.set(func(s *gateway.EndpointSnapshot) { s.Arrivals += st.arrivals })
		got, err := r.Read(ctx, "", "ArrivalRate", st.stat, st.period)
		if err != nil || math.Abs(got-st.want) > 1e-9 {
			t.Fatalf("read %d = %v, %v; want %v", i, got, err, st.want)
		}
	}
}

func TestCloudWatchReaderVariants(t *testing.T) {
	ctx := context.Background()
	t.Run("unknown variant on a single-variant endpoint reads the endpoint", func(t *testing.T) {
		src, clk := newFakes()
		src.set(func(s *gateway.EndpointSnapshot) { s.Variants = map[string]gateway.VariantSnapshot{"v1": {}} })
		src.record(MetricInvocations, "v1", 1, 1, 1, 1, 1)
		got, err := NewCloudWatchReader(src, clk, "ep").Read(ctx, "AllTraffic", "Invocations", "Sum", time.Minute)
		if err != nil || got != 5 {
			t.Fatalf("= %v, %v; want 5", got, err)
		}
	})
	t.Run("unknown variant among several is an error", func(t *testing.T) {
		src, clk := newFakes()
		src.set(func(s *gateway.EndpointSnapshot) { s.Variants = map[string]gateway.VariantSnapshot{"v1": {}, "v2": {}} })
		src.record(MetricInvocations, "v1", 1)
		if _, err := NewCloudWatchReader(src, clk, "ep").Read(ctx, "AllTraffic", "Invocations", "Sum", time.Minute); err == nil || !strings.Contains(err.Error(), "no variant") {
			t.Fatalf("err = %v, want no variant", err)
		}
	})
	t.Run("built-ins ignore the variant", func(t *testing.T) {
		src, clk := newFakes()
		src.set(func(s *gateway.EndpointSnapshot) { s.Queued = 2 })
		got, err := NewCloudWatchReader(src, clk, "ep").Read(ctx, "v9", "QueueDepth", "Average", time.Minute)
		if err != nil || got != 2 {
			t.Fatalf("= %v, %v", got, err)
		}
	})
	t.Run("reads the reader's endpoint", func(t *testing.T) {
		src, clk := newFakes()
		src.record(MetricTimeToFirstToken, "", 9) // endpoint "ep"
		r := NewCloudWatchReader(src, clk, "my-ep")
		if _, err := r.Read(ctx, "", "TimeToFirstToken", "Average", time.Minute); !errors.Is(err, ErrNoData) {
			t.Fatalf("another endpoint's data: %v", err)
		}
		_, _ = r.Read(ctx, "", "QueueDepth", "Average", time.Minute)
		if got, err := r.Read(ctx, "", "QueueDepth", "SampleCount", time.Minute); err != nil || got != 1 {
			t.Fatalf("my-ep's QueueDepth samples = %v, %v", got, err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		src, clk := newFakes()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := NewCloudWatchReader(src, clk, "ep").Read(cctx, "", "QueueDepth", "Average", time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a source without a store is an error, not no data", func(t *testing.T) {
		src, clk := newFakes()
		src.store = nil
		_, err := NewCloudWatchReader(src, clk, "ep").Read(ctx, "", "Invocations", "Sum", time.Minute)
		if err == nil || errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "no metric store") {
			t.Fatalf("err = %v", err)
		}
	})
}

func BenchmarkCloudWatchReaderRead(b *testing.B) {
	src, clk := newFakes()
	src.set(func(s *gateway.EndpointSnapshot) { s.Variants = map[string]gateway.VariantSnapshot{"v1": {}} })
	r := NewCloudWatchReader(src, clk, "ep")
	for range 600 {
		clk.Step(time.Second)
		src.record(MetricModelLatency, "v1", 1000, 2000, 3000)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.Read(ctx, "", "ModelLatency", "p90", 5*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCloudWatchReaderConcurrent(t *testing.T) {
	src, clk := newFakes()
	src.set(func(s *gateway.EndpointSnapshot) { s.Variants = map[string]gateway.VariantSnapshot{"v1": {}} })
	r := NewCloudWatchReader(src, clk, "ep")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			src.record(MetricModelLatency, "v1", 100)
			clk.Step(time.Second)
		}
	}()
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			metric := []string{"ModelLatency", "QueueDepth"}[i%2]
			for range 200 {
				if _, err := r.Read(context.Background(), "", metric, "Average", 10*time.Second); err != nil && !errors.Is(err, ErrNoData) {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
}
