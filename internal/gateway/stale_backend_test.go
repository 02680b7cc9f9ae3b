package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/internal/clock"
)

// A request that picked a backend from a route that has since been replaced
// must not reach it: the controller may already have drained it (seeing zero
// in flight) and be stopping it. forward steps back and Invoke re-picks from
// the current route.
func TestBackendLeftRouteBetweenPickAndSend(t *testing.T) {
	var oldHits, newHits atomic.Int64
	oldSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		oldHits.Add(1)
		io.WriteString(w, "old")
	}))
	defer oldSrv.Close()
	newSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		newHits.Add(1)
		io.WriteString(w, "new")
	}))
	defer newSrv.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

	g := New(Options{Clock: clock.Real{}, Seed: 1})
	oldB := Backend{ID: "old", Addr: addr(oldSrv)}
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "v", Weight: 1, Backends: []Backend{oldB}}}})
	// The blue/green switch happens after the request read the old route...
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "v", Weight: 1, Backends: []Backend{{ID: "new", Addr: addr(newSrv)}}}}})
	if err := g.Drain(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
	// ...and only now does the request try to send to the backend it picked.
	_, err := g.forward(context.Background(), Invocation{Endpoint: "ep", Path: "/invocations"}, oldB, g.endpointStats("ep"), &variantState{route: VariantRoute{Name: "v"}, stats: &counters{}})
	if !errors.Is(err, errStaleBackend) {
		t.Fatalf("forward to a backend no longer in the route: err = %v, want errStaleBackend", err)
	}
	if oldHits.Load() != 0 || g.InFlight("old") != 0 {
		t.Fatalf("stale backend got %d requests, in flight %d", oldHits.Load(), g.InFlight("old"))
	}
	res, err := g.Invoke(context.Background(), Invocation{Endpoint: "ep", Path: "/invocations"})
	if err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	if res.BackendID != "new" || newHits.Load() != 1 {
		t.Fatalf("invoke went to %s (new hits %d)", res.BackendID, newHits.Load())
	}
}

// When the route turns Unavailable (a reservation ended) while a request is
// being routed and every try then fails, the request gets the Unavailable
// answer that new requests get, not a generic "no backend".
func TestRouteTurnsUnavailableMidRequest(t *testing.T) {
	var g *Gateway
	cut := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.SetRoute(Route{Endpoint: "ep", Unavailable: "plan ended"})
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the replica is gone mid-request
		}
	})
	a, b := httptest.NewServer(cut), httptest.NewServer(cut)
	defer a.Close()
	defer b.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	g = New(Options{Clock: clock.Real{}, Seed: 1})
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "v", Weight: 1,
		Backends: []Backend{{ID: "a", Addr: addr(a)}, {ID: "b", Addr: addr(b)}}}}})
	_, err := g.Invoke(context.Background(), Invocation{Endpoint: "ep", Path: "/invocations"})
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Reason != "plan ended" {
		t.Fatalf("err = %v, want the route's Unavailable message", err)
	}
}
