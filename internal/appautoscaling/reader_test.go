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
)

// fakeGateway is a hand-fed triggers.Source: cumulative request counters of
// one endpoint with one variant.
type fakeGateway struct {
	mu       sync.Mutex
	requests uint64
	replicas int
}

var _ triggers.Source = (*fakeGateway)(nil)

func (g *fakeGateway) Snapshot(ep string) gateway.EndpointSnapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ep != "my-ep" {
		return gateway.EndpointSnapshot{Endpoint: ep}
	}
	return gateway.EndpointSnapshot{
		Endpoint: ep, Replicas: g.replicas, Requests: g.requests,
		Variants: map[string]gateway.VariantSnapshot{"AllTraffic": {Replicas: g.replicas, Requests: g.requests}},
	}
}

func (g *fakeGateway) serve(n uint64, replicas int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.requests += n
	g.replicas = replicas
}

// TestWithCloudWatchReader runs target tracking on the real
// triggers.CloudWatchReader over hand-fed gateway snapshots: invocations per
// instance per minute drive a scale-out, and a minute without invocations is
// a datapoint of 0, so an idle endpoint scales back in to MinCapacity.
func TestWithCloudWatchReader(t *testing.T) {
	gw := &fakeGateway{replicas: 1}
	e := newEnv(t, func(o *Options) { o.NewReader = nil; o.Source = gw })
	e.vars.add("my-ep", "AllTraffic", 1, 0)
	if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister(resMyEP, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.PutScalingPolicy(e.ctx, ttPolicy(resMyEP, "ipi", 50)); err != nil {
		t.Fatal(err)
	}
	// The reader is made at the first evaluation, with that snapshot as its
	// baseline: the first datapoint is 0 invocations.
	e.reconcile()
	for i := 1; i <= 3; i++ {
		gw.serve(120, e.desired())
		e.tick()
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
