package triggers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
)

// TestReaderOverRealGateway checks the seam: the reader's SageMaker metrics
// over a real *gateway.Gateway routing to an HTTP backend.
func TestReaderOverRealGateway(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	defer backend.Close()
	gw := gateway.New(gateway.Options{Clock: clock.Real{}, MaxAttempts: 1})
	gw.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{
		Name: "AllTraffic", Weight: 1,
		Backends: []gateway.Backend{{ID: "r1", Addr: strings.TrimPrefix(backend.URL, "http://")}},
	}}})

	clk := clock.NewFake(t0)
	r := NewCloudWatchReader(gw, clk, "ep")
	invoke := func(path string) {
		res, err := gw.Invoke(context.Background(), gateway.Invocation{Endpoint: "ep", Path: path, Body: []byte(`{}`)})
		if err != nil {
			return // a failed invocation is still counted by the gateway
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
	for range 5 {
		invoke("/invocations")
	}
	for range 2 {
		invoke("/fail")
	}
	clk.Step(time.Minute)
	ctx := context.Background()
	read := func(variant, metric, stat string) float64 {
		t.Helper()
		v, err := r.Read(ctx, variant, metric, stat, time.Minute)
		if err != nil {
			t.Fatalf("%s %s: %v", metric, stat, err)
		}
		return v
	}
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"Invocations Sum", read("", "Invocations", "Sum"), 7},
		{"Invocations Sum of the variant", read("AllTraffic", "Invocations", "Sum"), 7},
		{"InvocationsPerInstance Sum (1 replica)", read("", "InvocationsPerInstance", "Sum"), 7},
		{"Invocation5XXErrors Sum", read("", "Invocation5XXErrors", "Sum"), 2},
		{"ConcurrentRequestsPerModel idle", read("", "ConcurrentRequestsPerModel", "Maximum"), 0},
		{"InFlightPerReplica idle", read("", "InFlightPerReplica", "Average"), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if lat := read("", "ModelLatency", "Average"); !(lat > 0) {
		t.Errorf("ModelLatency Average = %v µs, want > 0", lat)
	}
}
