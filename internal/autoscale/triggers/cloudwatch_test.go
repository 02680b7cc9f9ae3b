package triggers

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// finish records n finished invocations on the endpoint (and on variant v
// when non-empty), each with the given latency, errs of them failed.
func finish(s *gateway.EndpointSnapshot, v string, n, errs uint64, latency float64) {
	s.Requests += n
	s.Errors += errs
	s.LatencySeconds += float64(n) * latency
	if v != "" {
		if s.Variants == nil {
			s.Variants = map[string]gateway.VariantSnapshot{}
		}
		vs := s.Variants[v]
		vs.Requests += n
		vs.Errors += errs
		vs.LatencySeconds += float64(n) * latency
		s.Variants[v] = vs
	}
}

func TestCloudWatchReaderCounters(t *testing.T) {
	ctx := context.Background()
	const period = 60 * time.Second
	// Each case: history is fed at t0 (reader creation, 10 requests already
	// done before it), t0+30s and t0+60s (the read); the window is
	// (t0, t0+60s], baseline the creation snapshot.
	type step struct {
		n, errs  uint64
		latency  float64
		replicas int
	}
	cases := []struct {
		name, variant, metric, stat string
		steps                       [2]step
		want                        float64
		wantErr                     string
	}{
		{"Invocations Sum", "", "Invocations", "Sum", [2]step{{n: 6, replicas: 2}, {n: 4, replicas: 2}}, 10, ""},
		{"Invocations SampleCount", "", "Invocations", "SampleCount", [2]step{{n: 6}, {n: 4}}, 10, ""},
		{"Invocations Average is 1 per invocation", "", "Invocations", "Average", [2]step{{n: 6}, {n: 4}}, 1, ""},
		{"InvocationsPerInstance Sum divides by replicas now", "", "InvocationsPerInstance", "Sum", [2]step{{n: 6, replicas: 1}, {n: 6, replicas: 4}}, 3, ""},
		{"InvocationsPerInstance zero replicas counts as one", "", "InvocationsPerInstance", "Sum", [2]step{{n: 3}, {n: 2}}, 5, ""},
		{"ModelLatency Average in microseconds", "", "ModelLatency", "Average", [2]step{{n: 2, latency: 0.1}, {n: 2, latency: 0.3}}, 200_000, ""},
		{"ModelLatency Sum", "", "ModelLatency", "Sum", [2]step{{n: 1, latency: 0.5}, {n: 1, latency: 0.25}}, 750_000, ""},
		{"ModelLatency Maximum unavailable", "", "ModelLatency", "Maximum", [2]step{{n: 1, latency: 0.5}, {}}, 0, "not available"},
		{"5XX Sum", "", "Invocation5XXErrors", "Sum", [2]step{{n: 4, errs: 1}, {n: 4, errs: 2}}, 3, ""},
		{"5XX Average is the error rate", "", "Invocation5XXErrors", "Average", [2]step{{n: 4, errs: 1}, {n: 4, errs: 1}}, 0.25, ""},
		{"5XX Maximum 1 when any failed", "", "Invocation5XXErrors", "Maximum", [2]step{{n: 4, errs: 1}, {n: 4}}, 1, ""},
		{"5XX Minimum 0 unless all failed", "", "Invocation5XXErrors", "Minimum", [2]step{{n: 4, errs: 1}, {n: 4}}, 0, ""},
		{"5XX Minimum 1 when all failed", "", "Invocation5XXErrors", "Minimum", [2]step{{n: 2, errs: 2}, {n: 1, errs: 1}}, 1, ""},
		{"variant counters only", "blue", "Invocations", "Sum", [2]step{{n: 3}, {n: 2}}, 5, ""},
		{"no invocations is no data", "", "Invocations", "Sum", [2]step{{}, {}}, 0, ErrNoData.Error()},
		{"no invocations, latency no data", "", "ModelLatency", "Average", [2]step{{}, {}}, 0, ErrNoData.Error()},
		{"unknown metric", "", "OverheadLatency", "Average", [2]step{{n: 1}, {}}, 0, "unknown metric"},
		{"unknown statistic", "", "Invocations", "p99", [2]step{{n: 1}, {}}, 0, "not available"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, clk := newFakes()
			src.set(func(s *gateway.EndpointSnapshot) {
				finish(s, c.variant, 10, 1, 1) // before the reader: never counted
				if c.variant != "" {
					// Another variant's traffic must not leak into a variant read.
					finish(s, "green", 100, 100, 5)
				}
			})
			r := NewCloudWatchReader(src, clk, "ep")
			for _, st := range c.steps {
				clk.Step(30 * time.Second)
				src.set(func(s *gateway.EndpointSnapshot) {
					finish(s, c.variant, st.n, st.errs, st.latency)
					s.Replicas = st.replicas
					if c.variant != "" {
						v := s.Variants[c.variant]
						v.Replicas = st.replicas
						s.Variants[c.variant] = v
					}
				})
				if st == c.steps[0] {
					// An intermediate read feeds history, as polls do.
					_, _ = r.Read(ctx, c.variant, c.metric, c.stat, period)
				}
			}
			got, err := r.Read(ctx, c.variant, c.metric, c.stat, period)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Read = %v, %v; want error containing %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if math.Abs(got-c.want) > 1e-6 {
				t.Fatalf("Read = %v, want %v", got, c.want)
			}
		})
	}
}

func TestCloudWatchReaderWindow(t *testing.T) {
	ctx := context.Background()
	src, clk := newFakes()
	r := NewCloudWatchReader(src, clk, "ep")
	// Polls every 30 s with 3 requests per poll.
	for range 6 {
		clk.Step(30 * time.Second)
		src.set(func(s *gateway.EndpointSnapshot) { finish(s, "", 3, 0, 0.01) })
		if _, err := r.Read(ctx, "", "Invocations", "Sum", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("sliding window uses the newest baseline at least a period old", func(t *testing.T) {
		clk.Step(30 * time.Second)
		src.set(func(s *gateway.EndpointSnapshot) { finish(s, "", 7, 0, 0.01) })
		got, err := r.Read(ctx, "", "Invocations", "Sum", time.Minute)
		if err != nil || got != 10 {
			t.Fatalf("Sum over 1m = %v, %v; want 3+7", got, err)
		}
	})
	t.Run("a longer period than the history uses all of it", func(t *testing.T) {
		clk.Step(30 * time.Second)
		got, err := r.Read(ctx, "", "Invocations", "Sum", time.Hour)
		if err != nil || got != 6*3+7 {
			t.Fatalf("Sum over 1h = %v, %v; want %d", got, err, 6*3+7)
		}
	})
	t.Run("idle period is no data", func(t *testing.T) {
		clk.Step(5 * time.Minute)
		if _, err := r.Read(ctx, "", "Invocations", "Sum", time.Minute); !errors.Is(err, ErrNoData) {
			t.Fatalf("err = %v, want ErrNoData", err)
		}
	})
	t.Run("a counter reset counts the new value", func(t *testing.T) {
		clk.Step(time.Minute)
		src.set(func(s *gateway.EndpointSnapshot) { s.Requests = 2 })
		got, err := r.Read(ctx, "", "Invocations", "Sum", time.Minute)
		if err != nil || got != 2 {
			t.Fatalf("after reset = %v, %v; want 2", got, err)
		}
	})
}

func TestCloudWatchReaderGauges(t *testing.T) {
	ctx := context.Background()
	// Samples at t0 (creation), +10s, +20s, +30s (the read) with a 25 s
	// period: the window is (t0+5s, t0+30s] → the last three.
	type state struct {
		replicas, inflight, queued, waiting int
		kv                                  float64
	}
	states := []state{
		{replicas: 1, inflight: 100, queued: 100, waiting: 100, kv: 1}, // outside the window
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
			apply := func(st state) {
				src.set(func(s *gateway.EndpointSnapshot) {
					s.Replicas, s.InFlight, s.Queued, s.EngineWaiting, s.KVUsage = st.replicas, st.inflight, st.queued, st.waiting, st.kv
				})
			}
			apply(states[0])
			r := NewCloudWatchReader(src, clk, "ep")
			for i, st := range states[1:] {
				clk.Step(10 * time.Second)
				apply(st)
				if i < len(states)-2 {
					if _, err := r.Read(ctx, "", c.metric, c.stat, 25*time.Second); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := r.Read(ctx, "", c.metric, c.stat, 25*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("= %v, want %v", got, c.want)
			}
		})
	}
}

func TestCloudWatchReaderTTFT(t *testing.T) {
	ctx := context.Background()
	src, clk := newFakes()
	src.set(func(s *gateway.EndpointSnapshot) { s.TTFTSeconds, s.TTFTCount = 100, 10 })
	r := NewCloudWatchReader(src, clk, "ep")
	clk.Step(time.Minute)
	if _, err := r.Read(ctx, "", "TimeToFirstToken", "Average", time.Minute); !errors.Is(err, ErrNoData) {
		t.Fatalf("no streamed request: err = %v, want ErrNoData", err)
	}
	clk.Step(time.Minute)
	src.set(func(s *gateway.EndpointSnapshot) { s.TTFTSeconds += 0.2 + 0.4; s.TTFTCount += 2 })
	got, err := r.Read(ctx, "", "TimeToFirstToken", "Average", time.Minute)
	if err != nil || math.Abs(got-0.3) > 1e-9 {
		t.Fatalf("mean TTFT = %v, %v; want 0.3 s", got, err)
	}
}

// TestCloudWatchReaderArrivalRate: arrivals per second over the period,
// from the newest snapshot at least a period old; a younger history divides
// by the span it really covers, and no arrivals is a rate of 0, not "no
// data" (an idle endpoint is a real reading).
func TestCloudWatchReaderArrivalRate(t *testing.T) {
	ctx := context.Background()
	const period = time.Second
	type step struct {
		after    time.Duration
		arrivals uint64
	}
	cases := []struct {
		name    string
		steps   []step // each: advance, add arrivals, read
		want    []float64
		wantErr string
	}{
		{"whole periods", []step{{time.Second, 3}, {time.Second, 12}}, []float64{3, 12}, ""},
		{"history shorter than the period divides by its span", []step{{500 * time.Millisecond, 2}}, []float64{4}, ""},
		{"sliding window at 100 ms reads", []step{
			{100 * time.Millisecond, 1}, {100 * time.Millisecond, 0}, {800 * time.Millisecond, 1}, // 2 in the first second
			{100 * time.Millisecond, 5}, {100 * time.Millisecond, 5}, // the first 100 ms leave the window
		}, []float64{10, 10 / 2.0, 2, 6, 11}, ""},
		{"no arrivals is zero", []step{{time.Second, 0}}, []float64{0}, ""},
		{"Sum is refused", []step{{time.Second, 1}}, nil, "not available"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, clk := newFakes()
			src.set(func(s *gateway.EndpointSnapshot) { s.Arrivals = 1000 }) // before the reader: never counted
			r := NewCloudWatchReader(src, clk, "ep")
			stat := "Average"
			if c.wantErr != "" {
				stat = "Sum"
			}
			for i, st := range c.steps {
				clk.Step(st.after)
				src.set(func(s *gateway.EndpointSnapshot) { s.Arrivals += st.arrivals })
				got, err := r.Read(ctx, "", "ArrivalRate", stat, period)
				if c.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), c.wantErr) {
						t.Fatalf("err = %v, want %q", err, c.wantErr)
					}
					return
				}
				if err != nil || math.Abs(got-c.want[i]) > 1e-9 {
					t.Fatalf("read %d = %v, %v; want %v", i, got, err, c.want[i])
				}
			}
		})
	}
}

func TestCloudWatchReaderVariants(t *testing.T) {
	ctx := context.Background()
	t.Run("unknown variant on a single-variant endpoint reads the endpoint", func(t *testing.T) {
		src, clk := newFakes()
		r := NewCloudWatchReader(src, clk, "ep")
		clk.Step(time.Minute)
		src.set(func(s *gateway.EndpointSnapshot) { finish(s, "v1", 5, 0, 0) })
		got, err := r.Read(ctx, "AllTraffic", "Invocations", "Sum", time.Minute)
		if err != nil || got != 5 {
			t.Fatalf("= %v, %v; want 5", got, err)
		}
	})
	t.Run("unknown variant among several is an error", func(t *testing.T) {
		src, clk := newFakes()
		r := NewCloudWatchReader(src, clk, "ep")
		clk.Step(time.Minute)
		src.set(func(s *gateway.EndpointSnapshot) { finish(s, "v1", 5, 0, 0); finish(s, "v2", 1, 0, 0) })
		if _, err := r.Read(ctx, "AllTraffic", "Invocations", "Sum", time.Minute); err == nil || !strings.Contains(err.Error(), "no variant") {
			t.Fatalf("err = %v, want no variant", err)
		}
	})
	t.Run("reads the reader's endpoint", func(t *testing.T) {
		src, clk := newFakes()
		r := NewCloudWatchReader(src, clk, "my-ep")
		_, _ = r.Read(ctx, "", "QueueDepth", "Average", time.Minute)
		for _, e := range src.asked {
			if e != "my-ep" {
				t.Fatalf("asked for %q", e)
			}
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		src, clk := newFakes()
		r := NewCloudWatchReader(src, clk, "ep")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.Read(cctx, "", "QueueDepth", "Average", time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCloudWatchReaderHistoryBounded(t *testing.T) {
	src, clk := newFakes()
	r := NewCloudWatchReader(src, clk, "ep")
	for range maxSamples + 100 {
		clk.Step(time.Second)
		_, _ = r.Read(context.Background(), "", "QueueDepth", "Average", time.Second)
	}
	if n := len(r.samples); n > maxSamples {
		t.Fatalf("%d samples kept, bound %d", n, maxSamples)
	}
	clk.Step(48 * time.Hour)
	_, _ = r.Read(context.Background(), "", "QueueDepth", "Average", time.Second)
	if n := len(r.samples); n > 2 {
		t.Fatalf("%d samples kept after a day idle, want ≤ 2", n)
	}
}

func BenchmarkCloudWatchReaderRead(b *testing.B) {
	src, clk := newFakes()
	r := NewCloudWatchReader(src, clk, "ep")
	ctx := context.Background()
	for range 600 {
		clk.Step(time.Second)
		src.set(func(s *gateway.EndpointSnapshot) { finish(s, "", 1, 0, 0.1) })
		_, _ = r.Read(ctx, "", "Invocations", "Sum", 5*time.Minute)
	}
	b.ResetTimer()
	for b.Loop() {
		clk.Step(time.Second)
		if _, err := r.Read(ctx, "", "ConcurrentRequestsPerModel", "p90", 5*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCloudWatchReaderConcurrent(t *testing.T) {
	src, clk := newFakes()
	r := NewCloudWatchReader(src, clk, "ep")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			src.set(func(s *gateway.EndpointSnapshot) { finish(s, "", 1, 0, 0.1) })
			clk.Step(time.Second)
		}
	}()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for range 200 {
				if _, err := r.Read(context.Background(), "", "ModelLatency", "Average", 10*time.Second); err != nil && !errors.Is(err, ErrNoData) {
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
	for i := 1; i < len(r.samples); i++ {
		if r.samples[i].at.Before(r.samples[i-1].at) {
			t.Fatalf("history out of order at %d", i)
		}
	}
}
