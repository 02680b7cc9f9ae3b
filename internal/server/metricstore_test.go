package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/metricstore"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
)

// TestDoorsRecordCloudWatchMetrics: invocations through every door land in
// the server's one metric store under SageMaker's names and dimensions, and
// a cloudWatchTrigger's reader reads exactly what the store holds.
func TestDoorsRecordCloudWatchMetrics(t *testing.T) {
	frt := fake.New()
	h := startHarnessOn(t, config.Config{}, frt, simRuntime{Runtime: frt, t: t})
	const ep = "cw-ep"
	h.serving(t, ep)
	ctx := context.Background()
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`

	if _, err := h.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String(ep),
		ContentType: aws.String("application/json"), Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	out, err := h.smr.InvokeEndpointWithResponseStream(ctx, &smr.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String(ep),
		ContentType: aws.String("application/json"), Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	for range out.GetStream().Events() {
	}
	out.GetStream().Close()
	for _, stream := range []string{"false", "true"} {
		resp, err := http.Post(h.url+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+ep+`","stream":`+stream+`,`+body[1:]))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("chat stream=%s: %d", stream, resp.StatusCode)
		}
	}

	st := h.srv.MetricStore
	dims := []metricstore.Dimension{{Name: "EndpointName", Value: ep}, {Name: "VariantName", Value: "AllTraffic"}}
	sum := func(ns, metric string, dims []metricstore.Dimension) metricstore.Aggregate {
		now := h.srv.Clock.Now()
		aggs, err := st.Statistics(metricstore.Query{Namespace: ns, Metric: metric, Dimensions: dims,
			Start: now.Add(-time.Hour), End: now.Add(time.Second), Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		var a metricstore.Aggregate
		for _, x := range aggs {
			a.Merge(x)
		}
		return a
	}
	// The last response body may close just after the client has it.
	for deadline := time.Now().Add(5 * time.Second); sum("AWS/SageMaker", "Invocations", dims).Sum < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Invocations %+v, want 4", sum("AWS/SageMaker", "Invocations", dims))
		}
	}
	for _, c := range []struct {
		metric   string
		n, total float64 // sample count, sum (< 0: only > 0)
	}{
		{"Invocations", 4, 4},
		{"InvocationsPerInstance", 4, 4},
		{"Invocation4XXErrors", 4, 0},
		{"Invocation5XXErrors", 4, 0},
		{"InvocationModelErrors", 4, 0},
		{"ModelLatency", 4, -1},
		{"OverheadLatency", 4, -1},
	} {
		a := sum("AWS/SageMaker", c.metric, dims)
		if a.SampleCount != c.n || (c.total >= 0 && a.Sum != c.total) || (c.total < 0 && !(a.Sum > 0)) {
			t.Errorf("%s: %+v, want %v samples summing to %v", c.metric, a, c.n, c.total)
		}
	}
	if a := sum("capstan", "TimeToFirstToken", dims[:1]); a.SampleCount != 2 {
		t.Errorf("TimeToFirstToken: %v samples, want 2 (the two streams)", a.SampleCount)
	}

	r := triggers.NewCloudWatchReader(h.srv.Gateway, h.srv.Clock, ep)
	for _, metric := range []string{"Invocations", "ModelLatency"} {
		got, err := r.Read(ctx, "AllTraffic", metric, "Sum", time.Hour)
		if want := sum("AWS/SageMaker", metric, dims).Sum; err != nil || got != want {
			t.Errorf("trigger reads %s Sum = %v, %v; the store has %v", metric, got, err, want)
		}
	}
	// The sampler runs with the server's other loops.
	for deadline := time.Now().Add(5 * time.Second); sum("capstan", "QueueDepth", dims[:1]).SampleCount == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no QueueDepth sample from the sampler")
		}
	}
}
