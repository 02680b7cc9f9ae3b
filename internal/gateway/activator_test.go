package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// countingActivator records Activate calls.
type countingActivator struct {
	mu    sync.Mutex
	calls []string
	ch    chan string
}

func newActivator() *countingActivator { return &countingActivator{ch: make(chan string, 16)} }

func (a *countingActivator) Activate(endpoint string) {
	a.mu.Lock()
	a.calls = append(a.calls, endpoint)
	a.mu.Unlock()
	a.ch <- endpoint
}

func (a *countingActivator) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls)
}

type invokeResult struct {
	i       int
	backend string
	err     error
}

// coldRoute is an endpoint with an activator and no backends.
func coldRoute(act gateway.Activator, maxHeld int, timeout time.Duration) gateway.Route {
	return gateway.Route{Endpoint: "cold", Activator: act, MaxHeld: maxHeld, HoldTimeout: timeout,
		Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1, RoutingStrategy: "roundrobin"}}}
}

func warm(r gateway.Route, addrs ...string) gateway.Route {
	v := r.Variants[0]
	v.Backends = nil
	for i, a := range addrs {
		v.Backends = append(v.Backends, gateway.Backend{ID: fmt.Sprintf("b%d", i), Addr: a})
	}
	r.Variants = []gateway.VariantRoute{v}
	return r
}

// holdN starts n invocations one after another, each only once the previous
// is held, so their arrival order is known.
func holdN(t *testing.T, ctx context.Context, g *gateway.Gateway, n int, out chan<- invokeResult) {
	t.Helper()
	base := g.Snapshot("cold").Held
	for i := 0; i < n; i++ {
		go func(i int) {
			res, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "cold", Path: "/invocations"})
			r := invokeResult{i: i, err: err}
			if err == nil {
				r.backend = res.BackendID
				res.Response.Body.Close()
			}
			out <- r
		}(i)
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("request %d to be held", i), func() bool { return g.Snapshot("cold").Held == base+i+1 })
	}
}

func TestActivatorHoldAndRelease(t *testing.T) {
	b0 := newBackend(t, "b0", nil)
	b1 := newBackend(t, "b1", nil)
	tests := []struct {
		name        string
		held        int
		wantBackend []string // by arrival order: round robin sees them in order
	}{
		{name: "one request", held: 1, wantBackend: []string{"b0"}},
		{name: "five in arrival order", held: 5, wantBackend: []string{"b0", "b1", "b0", "b1", "b0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			clk := clock.NewFake(time.Unix(0, 0))
			g := gateway.New(gateway.Options{Clock: clk, Seed: 1, Registerer: reg})
			act := newActivator()
			r := coldRoute(act, 0, 0)
			g.SetRoute(r)
			out := make(chan invokeResult, tt.held)
			holdN(t, context.Background(), g, tt.held, out)
			if got := <-act.ch; got != "cold" {
				t.Fatalf("activated %q", got)
			}
			if s := g.Snapshot("cold"); s.Held != tt.held || s.Queued != tt.held || s.Replicas != 0 || s.Requests != 0 || s.Arrivals != uint64(tt.held) {
				t.Fatalf("snapshot while held: %+v", s)
			}
			if v := promtest.ToFloat64(counterFor(t, reg, "capstan_gateway_held_requests")); v != float64(tt.held) {
				t.Fatalf("held_requests gauge = %v", v)
			}
			g.SetRoute(warm(r, b0.addr(), b1.addr()))
			got := make([]string, tt.held)
			for range tt.held {
				res := <-out
				if res.err != nil {
					t.Fatalf("request %d: %v", res.i, res.err)
				}
				got[res.i] = res.backend
			}
			if strings.Join(got, ",") != strings.Join(tt.wantBackend, ",") {
				t.Fatalf("backends by arrival = %v, want %v", got, tt.wantBackend)
			}
			if n := act.count(); n != 1 {
				t.Fatalf("Activate called %d times in one episode", n)
			}
			s := g.Snapshot("cold")
			// Arrivals counts each request once, though a held one resolves twice.
			if s.Held != 0 || s.Requests != uint64(tt.held) || s.Errors != 0 || s.Replicas != 2 || s.Arrivals != uint64(tt.held) {
				t.Fatalf("snapshot after release: %+v", s)
			}
			if v := promtest.ToFloat64(counterFor(t, reg, "capstan_gateway_activations_total")); v != 1 {
				t.Fatalf("activations_total = %v", v)
			}
			if v := promtest.ToFloat64(counterFor(t, reg, "capstan_gateway_held_requests")); v != 0 {
				t.Fatalf("held_requests gauge after release = %v", v)
			}
		})
	}
}

func TestActivatorFailures(t *testing.T) {
	tests := []struct {
		name    string
		maxHeld int
		timeout time.Duration
		// run holds requests and returns the error of the one under test.
		run   func(t *testing.T, g *gateway.Gateway, clk *clock.Fake, r gateway.Route) error
		check func(t *testing.T, err error)
	}{
		{
			name: "hold timeout", timeout: 30 * time.Second,
			run: func(t *testing.T, g *gateway.Gateway, clk *clock.Fake, _ gateway.Route) error {
				out := make(chan invokeResult, 1)
				holdN(t, context.Background(), g, 1, out)
				clk.BlockUntil(1)
				clk.Step(29 * time.Second)
				// Its hold timer is still pending, and only it or a backend
				// (there is none) releases the request.
				if n := clk.Waiters(); n != 1 {
					t.Fatalf("%d clock waiters a second before the timeout, want the hold's timer", n)
				}
				select {
				case r := <-out:
					t.Fatalf("released before the timeout: %+v", r)
				default:
				}
				clk.Step(time.Second)
				return (<-out).err
			},
			check: func(t *testing.T, err error) {
				var ae *gateway.ActivationError
				if !errors.As(err, &ae) || ae.Overflow || ae.Timeout != 30*time.Second || ae.Endpoint != "cold" {
					t.Fatalf("err = %#v", err)
				}
				if !strings.Contains(err.Error(), "no replica became ready within 30s") {
					t.Fatalf("message %q", err)
				}
			},
		},
		{
			name: "default timeout is 60s",
			run: func(t *testing.T, g *gateway.Gateway, clk *clock.Fake, _ gateway.Route) error {
				out := make(chan invokeResult, 1)
				holdN(t, context.Background(), g, 1, out)
				clk.BlockUntil(1)
				clk.Step(gateway.DefaultHoldTimeout)
				return (<-out).err
			},
			check: func(t *testing.T, err error) {
				var ae *gateway.ActivationError
				if !errors.As(err, &ae) || ae.Timeout != 60*time.Second {
					t.Fatalf("err = %#v", err)
				}
			},
		},
		{
			name: "overflow beyond MaxHeld", maxHeld: 2,
			run: func(t *testing.T, g *gateway.Gateway, clk *clock.Fake, _ gateway.Route) error {
				out := make(chan invokeResult, 2)
				holdN(t, context.Background(), g, 2, out)
				_, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "cold"})
				if s := g.Snapshot("cold"); s.Held != 2 || s.Requests != 1 || s.Errors != 1 || s.Arrivals != 3 {
					t.Fatalf("snapshot after overflow: %+v", s)
				}
				return err
			},
			check: func(t *testing.T, err error) {
				var ae *gateway.ActivationError
				if !errors.As(err, &ae) || !ae.Overflow || ae.MaxHeld != 2 {
					t.Fatalf("err = %#v", err)
				}
			},
		},
		{
			name: "client cancels while held",
			run: func(t *testing.T, g *gateway.Gateway, clk *clock.Fake, _ gateway.Route) error {
				ctx, cancel := context.WithCancel(context.Background())
				out := make(chan invokeResult, 1)
				holdN(t, ctx, g, 1, out)
				cancel()
				err := (<-out).err
				if s := g.Snapshot("cold"); s.Held != 0 || s.Queued != 0 {
					t.Fatalf("cancelled request still held: %+v", s)
				}
				return err
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v", err)
				}
			},
		},
		{
			name: "route deleted while held",
			run: func(t *testing.T, g *gateway.Gateway, clk *clock.Fake, _ gateway.Route) error {
				out := make(chan invokeResult, 1)
				holdN(t, context.Background(), g, 1, out)
				g.DeleteRoute("cold")
				return (<-out).err
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, gateway.ErrUnknownEndpoint) {
					t.Fatalf("err = %v", err)
				}
			},
		},
		{
			name: "activator removed while held",
			run: func(t *testing.T, g *gateway.Gateway, clk *clock.Fake, r gateway.Route) error {
				out := make(chan invokeResult, 1)
				holdN(t, context.Background(), g, 1, out)
				r.Activator = nil
				g.SetRoute(r)
				return (<-out).err
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, gateway.ErrNoBackend) {
					t.Fatalf("err = %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			g := gateway.New(gateway.Options{Clock: clk, Seed: 1})
			r := coldRoute(newActivator(), tt.maxHeld, tt.timeout)
			g.SetRoute(r)
			tt.check(t, tt.run(t, g, clk, r))
		})
	}
}

func TestActivatorWithoutActivatorFailsFast(t *testing.T) {
	g := gateway.New(gateway.Options{Seed: 1})
	g.SetRoute(coldRoute(nil, 0, 0))
	if _, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "cold"}); !errors.Is(err, gateway.ErrNoBackend) {
		t.Fatalf("err = %v", err)
	}
}

func TestActivateOncePerEpisode(t *testing.T) {
	be := newBackend(t, "b0", nil)
	clk := clock.NewFake(time.Unix(0, 0))
	g := gateway.New(gateway.Options{Clock: clk, Seed: 1})
	act := newActivator()
	cold := coldRoute(act, 0, 0)
	steps := []struct {
		name      string
		held      int
		wantCalls int
	}{
		{name: "first episode, three requests", held: 3, wantCalls: 1},
		{name: "scaled to zero again: second episode", held: 2, wantCalls: 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			g.SetRoute(cold)
			out := make(chan invokeResult, st.held)
			holdN(t, context.Background(), g, st.held, out)
			testutil.Eventually(t, 10*time.Second, "Activate", func() bool { return act.count() == st.wantCalls })
			g.SetRoute(warm(cold, be.addr()))
			for range st.held {
				if r := <-out; r.err != nil {
					t.Fatal(r.err)
				}
			}
			if n := act.count(); n != st.wantCalls {
				t.Fatalf("Activate called %d times, want %d", n, st.wantCalls)
			}
		})
	}
}

// A request that gives up while the released requests take their turns in
// order must not stall the ones behind it.
func TestActivatorCancelledMidQueueDoesNotBlockOthers(t *testing.T) {
	be := newBackend(t, "b0", nil)
	clk := clock.NewFake(time.Unix(0, 0))
	g := gateway.New(gateway.Options{Clock: clk, Seed: 1})
	r := coldRoute(newActivator(), 0, 0)
	g.SetRoute(r)
	out := make(chan invokeResult, 3)
	holdN(t, context.Background(), g, 1, out)
	ctx, cancel := context.WithCancel(context.Background())
	mid := make(chan invokeResult, 1)
	go func() {
		_, err := g.Invoke(ctx, gateway.Invocation{Endpoint: "cold"})
		mid <- invokeResult{err: err}
	}()
	testutil.Eventually(t, 10*time.Second, "second request held", func() bool { return g.Snapshot("cold").Held == 2 })
	holdN(t, context.Background(), g, 1, out)
	cancel()
	if err := (<-mid).err; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	g.SetRoute(warm(r, be.addr()))
	for range 2 {
		if res := <-out; res.err != nil {
			t.Fatal(res.err)
		}
	}
}

func TestSnapshotCounters(t *testing.T) {
	metrics := "vllm:num_requests_waiting 3\nvllm:num_requests_running 5\nvllm:kv_cache_usage_perc 0.40\n"
	clk := clock.NewFake(time.Unix(0, 0))
	hold := make(chan struct{})
	// control answers the scraper's paths; it reports whether it did.
	control := func(w http.ResponseWriter, r *http.Request, metrics string) bool {
		switch r.URL.Path {
		case "/metrics":
			_, _ = io.WriteString(w, metrics)
		case "/health":
		case "/v1/models":
			http.NotFound(w, r)
		default:
			return false
		}
		return true
	}
	ok := newBackend(t, "ok", func(w http.ResponseWriter, r *http.Request) {
		if control(w, r, metrics) {
			return
		}
		if r.URL.Path == "/slow" {
			<-hold
		}
		clk.Step(250 * time.Millisecond) // every invocation takes 250ms of the fake clock
		_, _ = io.WriteString(w, "ok")
	})
	bad := newBackend(t, "bad", func(w http.ResponseWriter, r *http.Request) {
		if control(w, r, strings.ReplaceAll(metrics, "0.40", "0.80")) {
			return
		}
		clk.Step(time.Second)
		w.WriteHeader(http.StatusInternalServerError)
	})
	g := gateway.New(gateway.Options{Clock: clk, Seed: 1})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{
		{Name: "good", Weight: 1, Backends: []gateway.Backend{{ID: "ok", Addr: ok.addr()}}},
		{Name: "broken", Weight: 1, Backends: []gateway.Backend{{ID: "bad", Addr: bad.addr()}}},
	}})
	invoke := func(variant, path string) {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", TargetVariant: variant, Path: path})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		if variant == "good" {
			g.Observer(gateway.Invocation{Endpoint: "ep"}, res).FirstToken(100 * time.Millisecond)
		}
		res.Response.Body.Close()
	}
	steps := []struct {
		name string
		do   func()
		want gateway.EndpointSnapshot
	}{
		{name: "fresh", do: func() {}, want: gateway.EndpointSnapshot{Replicas: 2, Variants: map[string]gateway.VariantSnapshot{
			"good": {Replicas: 1}, "broken": {Replicas: 1}}}},
		{name: "two good one failed", do: func() { invoke("good", "/"); invoke("good", "/"); invoke("broken", "/") },
			want: gateway.EndpointSnapshot{Replicas: 2, Requests: 3, Errors: 1, LatencySeconds: 1.5, TTFTSeconds: 0.2, TTFTCount: 2,
				Variants: map[string]gateway.VariantSnapshot{
					"good":   {Replicas: 1, Requests: 2, LatencySeconds: 0.5},
					"broken": {Replicas: 1, Requests: 1, Errors: 1, LatencySeconds: 1}}}},
		{name: "engine stats after a scrape", do: func() { g.ScrapeOnce(context.Background()) },
			want: gateway.EndpointSnapshot{Replicas: 2, Requests: 3, Errors: 1, LatencySeconds: 1.5, TTFTSeconds: 0.2, TTFTCount: 2,
				EngineWaiting: 6, EngineRunning: 10, KVUsage: 0.6,
				Variants: map[string]gateway.VariantSnapshot{
					"good":   {Replicas: 1, Requests: 2, LatencySeconds: 0.5},
					"broken": {Replicas: 1, Requests: 1, Errors: 1, LatencySeconds: 1}}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			st.want.Endpoint = "ep"
			if got := g.Snapshot("ep"); !snapshotEqual(got, st.want) {
				t.Fatalf("snapshot\n got %+v\nwant %+v", got, st.want)
			}
		})
	}
	t.Run("in flight", func(t *testing.T) {
		done := make(chan struct{})
		go func() { defer close(done); invoke("good", "/slow") }()
		testutil.Eventually(t, 10*time.Second, "request in flight", func() bool { return g.Snapshot("ep").InFlight == 1 })
		if v := g.Snapshot("ep").Variants["good"]; v.InFlight != 1 {
			t.Fatalf("variant in flight %d", v.InFlight)
		}
		close(hold)
		<-done
		if s := g.Snapshot("ep"); s.InFlight != 0 || s.Requests != 4 {
			t.Fatalf("after: %+v", s)
		}
	})
	t.Run("unknown endpoint", func(t *testing.T) {
		if s := g.Snapshot("nope"); s.Endpoint != "nope" || s.Requests != 0 || s.Replicas != 0 || s.Variants == nil {
			t.Fatalf("%+v", s)
		}
	})
}

func snapshotEqual(a, b gateway.EndpointSnapshot) bool {
	near := func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 }
	if a.Endpoint != b.Endpoint || a.Replicas != b.Replicas || a.InFlight != b.InFlight || a.Queued != b.Queued ||
		a.Held != b.Held || a.Requests != b.Requests || a.Errors != b.Errors || !near(a.LatencySeconds, b.LatencySeconds) ||
		!near(a.TTFTSeconds, b.TTFTSeconds) || a.TTFTCount != b.TTFTCount || a.EngineWaiting != b.EngineWaiting ||
		a.EngineRunning != b.EngineRunning || !near(a.KVUsage, b.KVUsage) || len(a.Variants) != len(b.Variants) {
		return false
	}
	for k, v := range a.Variants {
		w, ok := b.Variants[k]
		if !ok || v.Replicas != w.Replicas || v.InFlight != w.InFlight || v.Requests != w.Requests || v.Errors != w.Errors ||
			!near(v.LatencySeconds, w.LatencySeconds) {
			return false
		}
	}
	return true
}

// counterFor sums every series of a metric family in reg (gauge or counter).
func counterFor(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Error(err)
		}
		v := 0.0
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "sum", nil, nil), prometheus.GaugeValue, v)
	})
}
