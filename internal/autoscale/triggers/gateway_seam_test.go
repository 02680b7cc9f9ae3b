package triggers

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// TestReaderOverRealGateway checks the seam: the reader's SageMaker metrics
// over a real *gateway.Gateway routing to an HTTP backend.
func TestReaderOverRealGateway(t *testing.T) {
	clk := clock.NewFake(t0)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clk.Step(5 * time.Millisecond) // the model's time
		if strings.HasSuffix(r.URL.Path, "/fail") {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	defer backend.Close()
	gw := gateway.New(gateway.Options{Clock: clk, MaxAttempts: 1, MetricStore: metricstore.New(clk, metricstore.Options{})})
	gw.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{
		Name: "AllTraffic", Weight: 1,
		Backends: []gateway.Backend{{ID: "r1", Addr: strings.TrimPrefix(backend.URL, "http://")}},
	}}})

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
	clk.Step(30 * time.Second)
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
	if lat := read("", "ModelLatency", "Average"); lat != 5000 {
		t.Errorf("ModelLatency Average = %v µs, want 5000", lat)
	}
	if p := read("AllTraffic", "ModelLatency", "p99"); math.Abs(p-5000) > 50 {
		t.Errorf("ModelLatency p99 = %v µs, want 5000 within 1 %%", p)
	}
	// The reader reads what the store holds: the CloudWatch API's answer.
	end := clk.Now().Add(time.Second)
	aggs, err := gw.MetricStore().Statistics(metricstore.Query{Namespace: "AWS/SageMaker", Metric: "Invocation5XXErrors",
		Dimensions: []metricstore.Dimension{{Name: "EndpointName", Value: "ep"}, {Name: "VariantName", Value: "AllTraffic"}},
		Start:      end.Add(-time.Minute), End: end, Period: time.Minute})
	if err != nil || len(aggs) != 1 || aggs[0].Sum != read("", "Invocation5XXErrors", "Sum") {
		t.Errorf("store %+v, %v", aggs, err)
	}
}
