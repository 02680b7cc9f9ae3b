package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/metricstore"
	"github.com/capstan-dev/capstan/internal/testutil"
)

var cwT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// stat reads one series' aggregate over the minute from cwT0.
func stat(t *testing.T, st *metricstore.Store, ns, metric string, dims ...string) metricstore.Aggregate {
	t.Helper()
	var d []metricstore.Dimension
	for i := 0; i < len(dims); i += 2 {
		d = append(d, metricstore.Dimension{Name: dims[i], Value: dims[i+1]})
	}
	got, err := st.Statistics(metricstore.Query{Namespace: ns, Metric: metric, Dimensions: d,
		Start: cwT0, End: cwT0.Add(time.Minute), Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		return metricstore.Aggregate{}
	}
	return got[0]
}

// TestRecordsInvocations: every finished invocation records SageMaker's
// endpoint metrics; the backend takes 30 ms of the fake clock, which is the
// model latency, and the gateway's own time is the overhead.
func TestRecordsInvocations(t *testing.T) {
	clk := clock.NewFake(cwT0)
	st := metricstore.New(clk, metricstore.Options{})
	release := make(chan struct{})
	be := newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) {
		clk.Step(30 * time.Millisecond)
		switch r.URL.Path {
		case "/bad":
			w.WriteHeader(http.StatusNotFound)
		case "/boom":
			w.WriteHeader(http.StatusInternalServerError)
		case "/hold":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
		}
		_, _ = w.Write([]byte("x"))
	})
	g := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry(), MetricStore: st, MaxAttempts: 1})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1,
		Backends: []gateway.Backend{{ID: "r1", Addr: be.addr()}}}}})
	g.SetRoute(gateway.Route{Endpoint: "q", MaxConcurrency: 1, MaxQueue: 0, Variants: []gateway.VariantRoute{{Name: "v", Weight: 1,
		Backends: []gateway.Backend{{ID: "r1", Addr: be.addr()}, {ID: "r2", Addr: be.addr()}}}}})
	ctx := context.Background()
	for _, p := range []string{"/ok", "/bad", "/boom"} {
		res, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "ep", Path: p})
		if err != nil {
			t.Fatal(err)
		}
		if p == "/ok" {
			g.Observer(gateway.Invocation{Endpoint: "ep"}, res).FirstToken(50 * time.Millisecond)
		}
		readAll(t, res)
	}
	// A full queue: the caller gets 429, a 4xx.
	held, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "q", Path: "/hold"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "q", Path: "/ok"}); !gateway.IsQueueFull(err) {
		t.Fatalf("second request on q: %v", err)
	}
	clk.Step(10 * time.Millisecond) // the door's time after the model answered
	close(release)
	readAll(t, held)

	sm := gateway.NamespaceSageMaker
	type w struct{ n, sum, lo, hi float64 }
	cases := []struct {
		ep, variant, metric string
		want                w
	}{
		{"ep", "AllTraffic", gateway.MetricInvocations, w{3, 3, 1, 1}},
		{"ep", "AllTraffic", gateway.MetricInvocationsPerInstance, w{3, 3, 1, 1}},
		{"ep", "AllTraffic", gateway.MetricModelLatency, w{3, 90000, 30000, 30000}},
		{"ep", "AllTraffic", gateway.MetricOverheadLatency, w{3, 0, 0, 0}},
		{"ep", "AllTraffic", gateway.MetricInvocation4XXErrors, w{3, 1, 0, 1}},
		{"ep", "AllTraffic", gateway.MetricInvocation5XXErrors, w{3, 1, 0, 1}},
		{"ep", "AllTraffic", gateway.MetricInvocationModelErrors, w{3, 1, 0, 1}},
		{"q", "v", gateway.MetricInvocations, w{2, 2, 1, 1}},
		{"q", "v", gateway.MetricInvocationsPerInstance, w{2, 1, 0.5, 0.5}},
		{"q", "v", gateway.MetricInvocation4XXErrors, w{2, 1, 0, 1}},
		{"q", "v", gateway.MetricInvocation5XXErrors, w{2, 0, 0, 0}},
		{"q", "v", gateway.MetricInvocationModelErrors, w{2, 0, 0, 0}},
		{"q", "v", gateway.MetricModelLatency, w{1, 40000, 40000, 40000}},
		{"q", "v", gateway.MetricOverheadLatency, w{1, 0, 0, 0}},
	}
	for _, c := range cases {
		a := stat(t, st, sm, c.metric, "EndpointName", c.ep, "VariantName", c.variant)
		if got := (w{a.SampleCount, a.Sum, a.Min, a.Max}); got != c.want {
			t.Errorf("%s/%s %s: got %+v, want %+v", c.ep, c.variant, c.metric, got, c.want)
		}
	}
	if a := stat(t, st, gateway.NamespaceCapstan, gateway.MetricTimeToFirstToken, "EndpointName", "ep"); a.SampleCount != 1 || a.Sum != 0.05 {
		t.Errorf("TimeToFirstToken %+v", a)
	}
	// Unknown endpoints record nothing; the series are exactly these.
	if _, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "nope"}); !errors.Is(err, gateway.ErrUnknownEndpoint) {
		t.Fatal(err)
	}
	if n := len(st.List("", "", []metricstore.Dimension{{Name: "EndpointName", Value: "nope"}})); n != 0 {
		t.Errorf("%d series for an unknown endpoint", n)
	}
}

// TestRecordsOverhead: time before the upstream call (a queue wait, a
// failed try on another backend) is overhead, the upstream call is model
// latency.
func TestRecordsOverhead(t *testing.T) {
	clk := clock.NewFake(cwT0)
	st := metricstore.New(clk, metricstore.Options{})
	dead := deadAddr(t)
	be := newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) {
		clk.Step(20 * time.Millisecond)
		_, _ = w.Write([]byte("x"))
	})
	var tr http.RoundTripper = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Host == dead {
			clk.Step(7 * time.Millisecond) // a failed connect
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	g := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry(), MetricStore: st, Transport: tr, Seed: 1})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "v", Weight: 1, RoutingStrategy: "roundrobin",
		Backends: []gateway.Backend{{ID: "dead", Addr: dead}, {ID: "ok", Addr: be.addr()}}}}})
	for range 2 {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/x"})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
	}
	model := stat(t, st, gateway.NamespaceSageMaker, gateway.MetricModelLatency, "EndpointName", "ep", "VariantName", "v")
	over := stat(t, st, gateway.NamespaceSageMaker, gateway.MetricOverheadLatency, "EndpointName", "ep", "VariantName", "v")
	if model.SampleCount != 2 || model.Sum != 40000 {
		t.Errorf("ModelLatency %+v", model)
	}
	// One of the two requests tried the dead backend first.
	if over.SampleCount != 2 || over.Sum != 7000 || over.Max != 7000 {
		t.Errorf("OverheadLatency %+v", over)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSampler: the gauges of every routed endpoint, once per second.
func TestSampler(t *testing.T) {
	clk := clock.NewFake(cwT0)
	st := metricstore.New(clk, metricstore.Options{})
	release := make(chan struct{})
	be := newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = w.Write([]byte("x"))
	})
	defer close(release)
	g := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry(), MetricStore: st})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1,
		Backends: []gateway.Backend{{ID: "r1", Addr: be.addr()}, {ID: "r2", Addr: be.addr()}}}}})
	g.SetRoute(gateway.Route{Endpoint: "two", Variants: []gateway.VariantRoute{
		{Name: "a", Weight: 1, Backends: []gateway.Backend{{ID: "r3", Addr: be.addr()}}},
		{Name: "b", Weight: 1, Backends: []gateway.Backend{{ID: "r4", Addr: be.addr()}}}}})
	ctx := context.Background()
	started := make(chan struct{}, 3)
	for range 3 {
		go func() {
			started <- struct{}{}
			if res, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "ep", Path: "/hold"}); err == nil {
				res.Response.Body.Close()
			}
		}()
	}
	for range 3 {
		<-started
	}
	testutil.Eventually(t, 10*time.Second, "3 in flight", func() bool { return g.Snapshot("ep").InFlight == 3 })
	s := g.Sampler()
	s.Step()
	s.Step() // the same second: one sample a second, the newest
	clk.Step(2 * time.Second)
	for range 4 {
		res, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "ep", Path: "/fast"})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
	}
	s.Step()

	cp := gateway.NamespaceCapstan
	type w struct{ n, sum float64 }
	cases := []struct {
		ns, metric string
		dims       []string
		want       w
	}{
		{gateway.NamespaceSageMaker, gateway.MetricConcurrentRequestsPerModel, []string{"EndpointName", "ep", "VariantName", "AllTraffic"}, w{2, 6}},
		{gateway.NamespaceSageMaker, gateway.MetricConcurrentRequestsPerModel, []string{"EndpointName", "two", "VariantName", "a"}, w{2, 0}},
		{cp, gateway.MetricInFlightPerReplica, []string{"EndpointName", "ep"}, w{2, 3}},
		{cp, gateway.MetricQueueDepth, []string{"EndpointName", "ep"}, w{2, 0}},
		{cp, gateway.MetricKVCacheUtilization, []string{"EndpointName", "ep"}, w{2, 0}},
		{cp, gateway.MetricArrivalRate, []string{"EndpointName", "ep"}, w{1, 2}}, // 4 arrivals in 2 s; the first sample is the baseline
		{cp, gateway.MetricReplicas, []string{"EndpointName", "ep"}, w{2, 4}},
		{cp, gateway.MetricReplicas, []string{"EndpointName", "two"}, w{2, 4}}, // both variants' replicas
	}
	for _, c := range cases {
		a := stat(t, st, c.ns, c.metric, c.dims...)
		if got := (w{a.SampleCount, a.Sum}); got != c.want {
			t.Errorf("%s %v: got %+v, want %+v", c.metric, c.dims, got, c.want)
		}
	}

	// A name never routed gets no series.
	s.Sample("never-routed")
	if n := len(st.List("", "", []metricstore.Dimension{{Name: "EndpointName", Value: "never-routed"}})); n != 0 {
		t.Errorf("%d series for an endpoint never routed", n)
	}

	// Run samples on the clock's ticks.
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	clk.BlockUntil(1)
	clk.Step(time.Second)
	testutil.Eventually(t, 10*time.Second, "a sample from Run", func() bool {
		return stat(t, st, cp, gateway.MetricQueueDepth, "EndpointName", "two").SampleCount == 3
	})
	cancel()
	<-done
}

// TestArrivalRateWindow: ArrivalRate counts arrivals over at least a
// second, however close together the reads come (a trigger reads between
// the sampler's ticks). Two reads either side of a second's boundary once
// made one arrival in 2 ms a rate of 500 req/s.
func TestArrivalRateWindow(t *testing.T) {
	type read struct {
		after    time.Duration // since the previous read
		arrivals int           // just before this read
		want     float64       // the newest ArrivalRate sample; -1: none yet
	}
	cases := []struct {
		name  string
		reads []read
	}{
		{"the first second is the baseline", []read{{0, 0, -1}, {500 * time.Millisecond, 3, -1}, {500 * time.Millisecond, 1, 4}}},
		{"reads either side of a second's boundary", []read{{0, 0, -1}, {1699 * time.Millisecond, 2, 2 / 1.699}, {2 * time.Millisecond, 1, 3 / 1.701}}},
		// The base is the newest read at least a second old.
		{"reads ten times a second", []read{{0, 0, -1},
			{100 * time.Millisecond, 1, -1}, {900 * time.Millisecond, 5, 6}, {100 * time.Millisecond, 1, 6},
			{100 * time.Millisecond, 0, 6 / 1.1}, {100 * time.Millisecond, 1, 7 / 1.2}}},
		{"a burst is spread over the window", []read{{0, 0, -1}, {time.Second, 1, 1}, {300 * time.Millisecond, 4, 5 / 1.3}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(cwT0.Add(300 * time.Millisecond)) // reads 1.699 s later fall at .999 of a second
			st := metricstore.New(clk, metricstore.Options{})
			be := newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("x")) })
			g := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry(), MetricStore: st})
			g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1,
				Backends: []gateway.Backend{{ID: "r1", Addr: be.addr()}}}}})
			s := g.Sampler()
			for i, rd := range tc.reads {
				clk.Step(rd.after)
				for range rd.arrivals {
					res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/"})
					if err != nil {
						t.Fatal(err)
					}
					readAll(t, res)
				}
				s.Sample("ep")
				got, err := st.Statistics(metricstore.Query{Namespace: gateway.NamespaceCapstan, Metric: gateway.MetricArrivalRate,
					Dimensions: []metricstore.Dimension{{Name: "EndpointName", Value: "ep"}},
					Start:      clk.Now().Truncate(time.Second), End: clk.Now().Add(time.Second), Period: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				v := -1.0
				if len(got) > 0 && got[0].SampleCount > 0 {
					v = got[0].Sum / got[0].SampleCount
				}
				if math.Abs(v-rd.want) > 1e-6 {
					t.Errorf("read %d at +%s: ArrivalRate %v, want %v", i, clk.Now().Sub(cwT0), v, rd.want)
				}
			}
		})
	}
}

// TestSamplerReplicas: the Replicas gauge follows the route's backends,
// down to 0 while the endpoint is still routed.
func TestSamplerReplicas(t *testing.T) {
	clk := clock.NewFake(cwT0)
	st := metricstore.New(clk, metricstore.Options{})
	g := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry(), MetricStore: st})
	route := func(n int) {
		var bs []gateway.Backend
		for i := range n {
			bs = append(bs, gateway.Backend{ID: fmt.Sprintf("r%d", i), Addr: "127.0.0.1:1"})
		}
		g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "v", Weight: 1, Backends: bs}}})
	}
	s := g.Sampler()
	for _, n := range []int{1, 3, 0} {
		route(n)
		s.Step()
		clk.Step(time.Second)
	}
	got, err := st.Statistics(metricstore.Query{Namespace: gateway.NamespaceCapstan, Metric: gateway.MetricReplicas,
		Dimensions: []metricstore.Dimension{{Name: "EndpointName", Value: "ep"}}, Start: cwT0, End: cwT0.Add(3 * time.Second), Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var seq []float64
	for _, a := range got {
		seq = append(seq, a.Max)
	}
	if fmt.Sprint(seq) != "[1 3 0]" {
		t.Fatalf("Replicas per second: %v, want [1 3 0]", seq)
	}
}

// TestNoStoreNoRecording: without Options.MetricStore nothing is recorded
// and there is no sampler.
func TestNoStoreNoRecording(t *testing.T) {
	be := newBackend(t, "b", nil)
	g := gateway.New(gateway.Options{Registerer: prometheus.NewRegistry()})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "v", Weight: 1,
		Backends: []gateway.Backend{{ID: "r1", Addr: be.addr()}}}}})
	res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, res); !strings.HasPrefix(got, "b ") {
		t.Fatal(got)
	}
	if g.MetricStore() != nil || g.Sampler() != nil {
		t.Fatal("a store or sampler without Options.MetricStore")
	}
	g.SampleGauges("ep") // a no-op
}
