package appautoscaling

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// fakeGateway is a hand-fed triggers.MetricSource: one endpoint with one
// variant whose invocations are recorded into a real metric store, as the
// gateway records them.
type fakeGateway struct {
	mu       sync.Mutex
	replicas int
	store    *metricstore.Store
}

var _ triggers.MetricSource = (*fakeGateway)(nil)

func (g *fakeGateway) Snapshot(ep string) gateway.EndpointSnapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ep != "my-ep" {
		return gateway.EndpointSnapshot{Endpoint: ep}
	}
	return gateway.EndpointSnapshot{Endpoint: ep, Replicas: g.replicas,
		Variants: map[string]gateway.VariantSnapshot{"AllTraffic": {Replicas: g.replicas}}}
}

func (g *fakeGateway) MetricStore() *metricstore.Store { return g.store }
func (g *fakeGateway) SampleGauges(string)             {}

// serve records n invocations at the clock's now with replicas serving.
func (g *fakeGateway) serve(n int, replicas int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.replicas = replicas
	d := []metricstore.Dimension{{Name: "EndpointName", Value: "my-ep"}, {Name: "VariantName", Value: "AllTraffic"}}
	for range n {
		_ = g.store.Record("AWS/SageMaker", "Invocations", d, 1)
		_ = g.store.Record("AWS/SageMaker", "InvocationsPerInstance", d, 1/float64(replicas))
	}
}

// TestWithCloudWatchReader runs target tracking on the real
// triggers.CloudWatchReader over a hand-fed metric store: invocations per
// instance per minute drive a scale-out, and a minute without invocations is
// a datapoint of 0, so an idle endpoint scales back in to MinCapacity.
func TestWithCloudWatchReader(t *testing.T) {
	gw := &fakeGateway{replicas: 1}
	e := newEnv(t, func(o *Options) {
		o.NewReader = nil
		o.Source = gw
		gw.store = metricstore.New(o.Clock, metricstore.Options{})
	})
	e.vars.add("my-ep", "AllTraffic", 1, 0)
	if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister(resMyEP, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.PutScalingPolicy(e.ctx, ttPolicy(resMyEP, "ipi", 50)); err != nil {
		t.Fatal(err)
	}
	// The first datapoint is 0 invocations.
	e.reconcile()
	for i := 1; i <= 3; i++ {
		e.clk.Step(30 * time.Second)
		gw.serve(120, e.desired())
		e.clk.Step(30 * time.Second)
		e.reconcile()
		want := 1
		if i == 3 {
			want = 3 // ceil(1 × 120 / 50)
		}
		if d := e.desired(); d != want {
			t.Fatalf("minute %d: desired %d, want %d", i, d, want)
		}
	}
	// 3 instances share 360 invocations a minute: 120 each, still above 50.
	e.clk.Step(time.Minute) // past the 60 s scale-out cooldown
	gw.serve(360, 3)
	e.reconcile()
	if d := e.desired(); d != 8 { // ceil(3 × 120 / 50)
		t.Fatalf("desired %d, want 8", d)
	}
	// Idle: no invocations at all.
	for i := 1; i <= 15; i++ {
		gw.serve(0, e.desired())
		e.tick()
		if i < 15 && e.desired() != 8 {
			t.Fatalf("scaled in after %d idle minutes: %d", i, e.desired())
		}
	}
	if d := e.desired(); d != 1 {
		t.Fatalf("desired %d after 15 idle minutes, want MinCapacity 1", d)
	}
	details := aws.ToString(e.activities(false)[0].Details)
	if want := fmt.Sprintf("%s = 0 (target 50; 0 consecutive datapoints above target, 15 below", PredefinedInvocationsPerInstance); !strings.Contains(details, want) {
		t.Fatalf("details %q", details)
	}
}
