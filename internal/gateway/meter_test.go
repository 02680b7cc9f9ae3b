package gateway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// TestMeterOncePerAnsweredRequest: a variant's Meter hears of each answered
// request once, when its body is closed; a refused one is not metered.
func TestMeterOncePerAnsweredRequest(t *testing.T) {
	b := newBackend(t, "b1", nil)
	g := gateway.New(gateway.Options{Seed: 1})
	var mu sync.Mutex
	var got []time.Duration
	meter := func(d time.Duration) { mu.Lock(); got = append(got, d); mu.Unlock() }
	g.SetRoute(gateway.Route{Endpoint: "ep", MaxConcurrency: 1, Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1, Meter: meter,
		Backends: []gateway.Backend{{ID: "r1", Addr: b.addr()}}}}})
	res, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/invocations", Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: "/invocations"}); !gateway.IsQueueFull(err) {
		t.Fatalf("second request past MaxConcurrency 1: %v", err)
	}
	mu.Lock()
	if len(got) != 0 {
		t.Fatalf("metered before the body was closed: %v", got)
	}
	mu.Unlock()
	readAll(t, res)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] < 0 {
		t.Fatalf("meter calls %v, want one", got)
	}
}
