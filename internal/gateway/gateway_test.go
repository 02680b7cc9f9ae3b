package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// backend is an httptest server that answers with its own name and counts hits.
type backend struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newBackend(t *testing.T, name string, h http.HandlerFunc) *backend {
	t.Helper()
	b := &backend{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "%s %s %s %s", name, r.URL.Path, r.Header.Get("X-Test"), body)
		}
	}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

// deadAddr is an address that refuses connections.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func readAll(t *testing.T, res *gateway.Result) string {
	t.Helper()
	defer res.Response.Body.Close()
	b, err := io.ReadAll(res.Response.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInvokeErrors(t *testing.T) {
	ok := newBackend(t, "ok", nil)
	tests := []struct {
		name    string
		route   *gateway.Route
		inv     gateway.Invocation
		wantErr error
		check   func(t *testing.T, err error)
	}{
		{name: "unknown endpoint", inv: gateway.Invocation{Endpoint: "nope"}, wantErr: gateway.ErrUnknownEndpoint},
		{name: "unknown variant",
			route:   &gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, Backends: []gateway.Backend{{ID: "a", Addr: ok.addr()}}}}},
			inv:     gateway.Invocation{Endpoint: "ep", TargetVariant: "B"},
			wantErr: gateway.ErrUnknownVariant},
		{name: "no backends",
			route:   &gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1}}},
			inv:     gateway.Invocation{Endpoint: "ep"},
			wantErr: gateway.ErrNoBackend},
		{name: "zero weight everywhere",
			route:   &gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 0, Backends: []gateway.Backend{{ID: "a", Addr: ok.addr()}}}}},
			inv:     gateway.Invocation{Endpoint: "ep"},
			wantErr: gateway.ErrNoBackend},
		{name: "target variant without backends",
			route:   &gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1}}},
			inv:     gateway.Invocation{Endpoint: "ep", TargetVariant: "A"},
			wantErr: gateway.ErrNoBackend},
		{name: "every backend refuses",
			route:   &gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, Backends: []gateway.Backend{{ID: "d1", Addr: deadAddr(t)}, {ID: "d2", Addr: deadAddr(t)}}}}},
			inv:     gateway.Invocation{Endpoint: "ep"},
			wantErr: gateway.ErrNoBackend},
		{name: "unavailable",
			route: &gateway.Route{Endpoint: "ep", Unavailable: gateway.UnavailableExpired,
				Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, Backends: []gateway.Backend{{ID: "a", Addr: ok.addr()}}}}},
			inv: gateway.Invocation{Endpoint: "ep"},
			check: func(t *testing.T, err error) {
				var u *gateway.UnavailableError
				if !errors.As(err, &u) || !strings.HasPrefix(u.Reason, gateway.UnavailableExpired) {
					t.Fatalf("err = %v, want UnavailableError", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gateway.New(gateway.Options{Seed: 1})
			if tt.route != nil {
				g.SetRoute(*tt.route)
			}
			res, err := g.Invoke(context.Background(), tt.inv)
			if err == nil {
				res.Response.Body.Close()
				t.Fatal("want error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, err)
			}
		})
	}
}

func TestInvokeForwards(t *testing.T) {
	b := newBackend(t, "b1", nil)
	g := gateway.New(gateway.Options{Seed: 1})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1, Backends: []gateway.Backend{{ID: "r1", Addr: b.addr()}}}}})
	h := http.Header{}
	h.Set("X-Test", "hdr")
	h.Set("Connection", "close-me") // hop-by-hop: not forwarded, must not break the request
	res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/invocations", Header: h, Body: []byte("payload")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Variant != "AllTraffic" || res.BackendID != "r1" {
		t.Fatalf("result = %+v", res)
	}
	if g.InFlight("r1") != 1 {
		t.Fatalf("in flight before Close = %d, want 1", g.InFlight("r1"))
	}
	if got := readAll(t, res); got != "b1 /invocations hdr payload" {
		t.Fatalf("body = %q", got)
	}
	if g.InFlight("r1") != 0 {
		t.Fatalf("in flight after Close = %d", g.InFlight("r1"))
	}
}

func TestVariantWeights(t *testing.T) {
	a, b, z := newBackend(t, "a", nil), newBackend(t, "b", nil), newBackend(t, "z", nil)
	g := gateway.New(gateway.Options{Seed: 42})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{
		{Name: "A", Weight: 3, Backends: []gateway.Backend{{ID: "a", Addr: a.addr()}}},
		{Name: "B", Weight: 1, Backends: []gateway.Backend{{ID: "b", Addr: b.addr()}}},
		{Name: "Z", Weight: 0, Backends: []gateway.Backend{{ID: "z", Addr: z.addr()}}},
	}})
	const n = 400
	counts := map[string]int{}
	for range n {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/invocations"})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		counts[res.Variant]++
	}
	if counts["Z"] != 0 {
		t.Fatalf("zero-weight variant got %d", counts["Z"])
	}
	// Expect 300/100; binomial sd ≈ 8.7, so ±45 is > 5 sd.
	if counts["A"] < 255 || counts["A"] > 345 {
		t.Fatalf("counts = %v, want about 300/100", counts)
	}
	res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", TargetVariant: "Z"})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.Variant != "Z" {
		t.Fatalf("target variant ignored: %s", res.Variant)
	}
}

func TestRoutingStrategies(t *testing.T) {
	tests := []struct {
		strategy string
		check    func(t *testing.T, picks []string)
	}{
		{strategy: "roundrobin", check: func(t *testing.T, picks []string) {
			for i, p := range picks {
				if want := fmt.Sprintf("r%d", i%3); p != want {
					t.Fatalf("pick %d = %s, want %s (picks %v)", i, p, want, picks)
				}
			}
		}},
		{strategy: "RANDOM", check: func(t *testing.T, picks []string) {
			seen := map[string]int{}
			for _, p := range picks {
				seen[p]++
			}
			if len(seen) != 3 {
				t.Fatalf("random over 30 picks used %v", seen)
			}
		}},
		{strategy: "", check: func(t *testing.T, picks []string) {
			// Sequential requests all finish, so every backend ties at zero in
			// flight; ties break at random, so all backends see traffic.
			seen := map[string]int{}
			for _, p := range picks {
				seen[p]++
			}
			if len(seen) != 3 {
				t.Fatalf("least outstanding ties over 30 picks used %v", seen)
			}
		}},
	}
	for _, tt := range tests {
		t.Run("strategy="+tt.strategy, func(t *testing.T) {
			var bs []gateway.Backend
			for i := range 3 {
				bs = append(bs, gateway.Backend{ID: fmt.Sprintf("r%d", i), Addr: newBackend(t, "x", nil).addr()})
			}
			g := gateway.New(gateway.Options{Seed: 7})
			g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: tt.strategy, Backends: bs}}})
			var picks []string
			for range 30 {
				res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
				if err != nil {
					t.Fatal(err)
				}
				readAll(t, res)
				picks = append(picks, res.BackendID)
			}
			tt.check(t, picks)
		})
	}
}

func TestLeastOutstandingAvoidsBusyBackend(t *testing.T) {
	release := make(chan struct{})
	slow := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-release
	})
	fast := newBackend(t, "fast", nil)
	defer close(release)
	g := gateway.New(gateway.Options{Seed: 3})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "LEAST_OUTSTANDING_REQUESTS",
		Backends: []gateway.Backend{{ID: "slow", Addr: slow.addr()}, {ID: "fast", Addr: fast.addr()}}}}})
	// Occupy "slow": keep invoking until one request lands there and stays open.
	var held *gateway.Result
	for held == nil {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
		if err != nil {
			t.Fatal(err)
		}
		if res.BackendID == "slow" {
			held = res
			continue
		}
		readAll(t, res)
	}
	defer held.Response.Body.Close()
	for i := range 20 {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		if res.BackendID != "fast" {
			t.Fatalf("request %d went to the busy backend", i)
		}
	}
}

func TestRetries(t *testing.T) {
	fail := newBackend(t, "fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "engine exploded", 500) })
	bad := newBackend(t, "bad", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad input", 400) })
	good := newBackend(t, "good", nil)
	// limited refuses a body over 1 MiB as net/http servers with a body
	// limit do: it answers before reading the rest and closes the connection.
	limited := newBackend(t, "limited", func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20+1)); len(b) > 1<<20 {
			http.Error(w, "request body exceeds the limit", 400)
		}
	})
	tests := []struct {
		name       string
		backends   []gateway.Backend
		body       []byte
		wantStatus int
		wantID     string
	}{
		{name: "connect failure then good", backends: []gateway.Backend{{ID: "dead", Addr: deadAddr(t)}, {ID: "good", Addr: good.addr()}}, wantStatus: 200, wantID: "good"},
		{name: "5xx then good", backends: []gateway.Backend{{ID: "fail", Addr: fail.addr()}, {ID: "good", Addr: good.addr()}}, wantStatus: 200, wantID: "good"},
		{name: "only 5xx returns the 5xx", backends: []gateway.Backend{{ID: "fail", Addr: fail.addr()}}, wantStatus: 500, wantID: "fail"},
		{name: "4xx is not retried", backends: []gateway.Backend{{ID: "bad", Addr: bad.addr()}, {ID: "good", Addr: good.addr()}}, wantStatus: 400, wantID: "bad"},
		{name: "4xx sent before the body was read is not retried", backends: []gateway.Backend{{ID: "limited", Addr: limited.addr()}, {ID: "good", Addr: good.addr()}},
			body: make([]byte, 32<<20), wantStatus: 400, wantID: "limited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gateway.New(gateway.Options{Seed: 1})
			// roundrobin starts at the first backend, so the failing one is tried first.
			g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin", Backends: tt.backends}}})
			res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Body: tt.body})
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, res)
			if res.Response.StatusCode != tt.wantStatus || res.BackendID != tt.wantID {
				t.Fatalf("got %d from %s, want %d from %s", res.Response.StatusCode, res.BackendID, tt.wantStatus, tt.wantID)
			}
			for _, b := range tt.backends {
				if n := g.InFlight(b.ID); n != 0 {
					t.Fatalf("in flight to %s = %d after the response closed", b.ID, n)
				}
			}
		})
	}
}

func TestDrainAndRouteSwap(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	slow := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "done")
	})
	other := newBackend(t, "other", nil)
	g := gateway.New(gateway.Options{Seed: 1})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, Backends: []gateway.Backend{{ID: "slow", Addr: slow.addr()}}}}})

	type out struct {
		body string
		err  error
	}
	done := make(chan out, 1)
	go func() {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
		if err != nil {
			done <- out{err: err}
			return
		}
		defer res.Response.Body.Close()
		b, err := io.ReadAll(res.Response.Body)
		done <- out{string(b), err}
	}()
	<-started
	if n := g.InFlight("slow"); n != 1 {
		t.Fatalf("in flight = %d, want 1", n)
	}
	// Swap the route: "slow" leaves it; new requests go to "other".
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, Backends: []gateway.Backend{{ID: "other", Addr: other.addr()}}}}})
	res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.BackendID != "other" {
		t.Fatalf("new request went to %s", res.BackendID)
	}

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.Drain(short, "slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with a request in flight = %v, want deadline exceeded", err)
	}
	drained := make(chan error, 1)
	go func() { drained <- g.Drain(context.Background(), "slow") }()
	close(release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.err != nil || o.body != "done" {
		t.Fatalf("in-flight request across the swap: %+v", o)
	}
	if err := g.Drain(context.Background(), "never-used"); err != nil {
		t.Fatalf("Drain of an idle backend: %v", err)
	}
}

func TestDrainingBackendGetsNoNewRequests(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, "a")
	})
	b := newBackend(t, "b", nil)
	g := gateway.New(gateway.Options{Seed: 1})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin",
		Backends: []gateway.Backend{{ID: "a", Addr: a.addr()}, {ID: "b", Addr: b.addr()}}}}})
	hold := http.Header{"X-Hold": {"1"}}
	resc := make(chan *gateway.Result, 1)
	go func() {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Header: hold})
		if err != nil {
			t.Error(err)
		}
		resc <- res
	}()
	<-started
	drained := make(chan error, 1)
	go func() { drained <- g.Drain(context.Background(), "a") }()
	// Wait until the Drain call is registered: a's in-flight stays 1, and
	// round robin would otherwise alternate a/b.
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		if res.BackendID == "b" {
			// confirm several in a row go to b
			allB := true
			for range 4 {
				res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
				if err != nil {
					t.Fatal(err)
				}
				readAll(t, res)
				allB = allB && res.BackendID == "b"
			}
			if allB {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("draining backend kept getting requests")
		}
	}
	close(release)
	if res := <-resc; res != nil {
		readAll(t, res)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ok := newBackend(t, "ok", nil)
	bad := newBackend(t, "bad", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 400) })
	g := gateway.New(gateway.Options{Seed: 1, Registerer: reg})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{
		{Name: "A", Weight: 1, Backends: []gateway.Backend{{ID: "ok", Addr: ok.addr()}}},
		{Name: "B", Weight: 0, Backends: []gateway.Backend{{ID: "bad", Addr: bad.addr()}}},
	}})
	for _, target := range []string{"", "", "B"} {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", TargetVariant: target})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
	}
	want := `
# HELP capstan_gateway_requests_total Invocations by endpoint, variant and final upstream status code ("error" when no response arrived); retried attempts are in retries_total.
# TYPE capstan_gateway_requests_total counter
capstan_gateway_requests_total{endpoint="ep",status="200",variant="A"} 2
capstan_gateway_requests_total{endpoint="ep",status="400",variant="B"} 1
# HELP capstan_gateway_in_flight_requests Requests forwarded to a backend whose response body is not closed yet.
# TYPE capstan_gateway_in_flight_requests gauge
capstan_gateway_in_flight_requests{endpoint="ep",variant="A"} 0
capstan_gateway_in_flight_requests{endpoint="ep",variant="B"} 0
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "capstan_gateway_requests_total", "capstan_gateway_in_flight_requests"); err != nil {
		t.Fatal(err)
	}
	if n := promtest.CollectAndCount(reg, "capstan_gateway_request_duration_seconds"); n != 2 {
		t.Fatalf("latency series = %d, want 2", n)
	}
}

func TestRetryMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	fail := newBackend(t, "fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 503) })
	good := newBackend(t, "good", nil)
	g := gateway.New(gateway.Options{Seed: 1, Registerer: reg})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin",
		Backends: []gateway.Backend{{ID: "dead", Addr: deadAddr(t)}, {ID: "good", Addr: good.addr()}, {ID: "fail", Addr: fail.addr()}}}}})
	// Round robin over what the exclude-tried filter leaves: try 1 takes
	// index 0 of [dead good fail], try 2 index 1 of [good fail], try 3 [good].
	res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.BackendID != "good" {
		t.Fatalf("served by %s", res.BackendID)
	}
	want := `
# HELP capstan_gateway_requests_total Invocations by endpoint, variant and final upstream status code ("error" when no response arrived); retried attempts are in retries_total.
# TYPE capstan_gateway_requests_total counter
capstan_gateway_requests_total{endpoint="ep",status="200",variant="A"} 1
# HELP capstan_gateway_retries_total Attempts retried on another backend, by reason (connect, 5xx).
# TYPE capstan_gateway_retries_total counter
capstan_gateway_retries_total{endpoint="ep",reason="5xx",variant="A"} 1
capstan_gateway_retries_total{endpoint="ep",reason="connect",variant="A"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "capstan_gateway_requests_total", "capstan_gateway_retries_total"); err != nil {
		t.Fatal(err)
	}
}
