package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// TestLoadGuardOverridesAffinity: with prefixaware, requests sharing a
// prompt stick to one backend until it is loadGuardMaxImbalance (16) ahead
// of the idle one; the next request goes to the idle one. Both backends are
// slow (they hold every request until released), as a stuck replica would.
func TestLoadGuardOverridesAffinity(t *testing.T) {
	release := make(chan struct{})
	hold := func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = io.WriteString(w, "{}")
	}
	a, b := newBackend(t, "a", hold), newBackend(t, "b", hold)
	g := gateway.New(gateway.Options{Seed: 7})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "prefixaware",
		Backends: []gateway.Backend{{ID: "a", Addr: a.addr()}, {ID: "b", Addr: b.addr()}}}}})
	body := []byte(`{"prompt":"` + strings.Repeat("the same long shared system prompt ", 40) + `"}`)
	type out struct {
		res *gateway.Result
		err error
	}
	const maxImbalance = 16 // loadGuardMaxImbalance
	const n = maxImbalance + 2
	results := make(chan out, n)
	served := map[string]int{}
	order := []string{}
	for i := 0; i < n; i++ {
		go func() {
			res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/v1/completions", Body: body})
			results <- out{res, err}
		}()
		// Wait until this request is in flight before sending the next,
		// so each decision sees the previous ones' load.
		deadline := time.Now().Add(10 * time.Second)
		for g.InFlight("a")+g.InFlight("b") != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("request %d never reached a backend", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
		cur := fmt.Sprint(g.InFlight("a"), g.InFlight("b"))
		order = append(order, cur)
	}
	close(release)
	for i := 0; i < n; i++ {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		readAll(t, o.res)
		served[o.res.BackendID]++
	}
	hot, cold := "a", "b"
	if served["b"] > served["a"] {
		hot, cold = "b", "a"
	}
	if served[hot] != n-1 || served[cold] != 1 {
		t.Fatalf("served %v (in-flight after each send: %v): want %d on the warm backend, then 1 elsewhere", served, order, n-1)
	}
}

// TestPassiveEjectionSkipsBackend: after EjectAfter consecutive 5xx a
// backend gets no requests until its ejection ends.
func TestPassiveEjectionSkipsBackend(t *testing.T) {
	bad := newBackend(t, "bad", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	good := newBackend(t, "good", nil)
	g := gateway.New(gateway.Options{Seed: 1, MaxAttempts: 1, EjectAfter: 2, EjectFor: time.Hour})
	g.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin",
		Backends: []gateway.Backend{{ID: "bad", Addr: bad.addr()}, {ID: "good", Addr: good.addr()}}}}})
	for i := 0; i < 10; i++ {
		res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep"})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
	}
	if bad.hits.Load() != 2 || good.hits.Load() != 8 {
		t.Fatalf("bad got %d, good %d: want 2 then ejection", bad.hits.Load(), good.hits.Load())
	}
	if _, ejected := g.BackendStats("bad"); !ejected {
		t.Fatal("bad not reported ejected")
	}
}
