package deployment

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/testutil"
)

const scaledJSM = `  autoScalingSpec:
    minReplicaCount: 0
    maxReplicaCount: 3
    pollingInterval: 10
    cooldownPeriod: 30
    initialCooldownPeriod: 0
    scaleDownStabilizationTime: 0
`

// TestAutoscaleOutInZeroAndActivation drives one deployment through
// 1 → 3 → 1 → 0 replicas with a fake trigger, then brings it back from
// zero with a request through a real gateway, under Run and a fake clock.
func TestAutoscaleOutInZeroAndActivation(t *testing.T) {
	trig := autoscale.NewFakeTrigger("queue", autoscale.Target{Type: autoscale.AverageValue, Value: 4})
	var gotEnv triggers.Env
	// A JumpStart server takes a whole instance: three nodes for three replicas.
	h := newHarness(t, withTriggers(&gotEnv, trig),
		withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.12xlarge", Count: 3}))
	h.rt.SetDefaultAddr(chatBackend(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	const route = "deepseek-ep"
	h.apply(jsm("deepseek", route, scaledJSM))
	replicas := func(n int) func() bool {
		return func() bool { return len(h.running("jsm.default.deepseek.")) == n && len(h.backends(route)) == n }
	}
	testutil.Eventually(t, 10*time.Second, "the first replica", replicas(1))
	if gotEnv.Endpoint != route || gotEnv.Source == nil || gotEnv.Clock == nil {
		t.Fatalf("trigger env %+v", gotEnv)
	}
	if r, _ := h.gw.Route(route); r.Activator == nil {
		t.Fatal("minReplicaCount 0 but no activator on the route")
	}

	step := func(want int) func() bool {
		return func() bool {
			if replicas(want)() {
				return true
			}
			h.clk.Step(10 * time.Second)
			time.Sleep(20 * time.Millisecond)
			return replicas(want)()
		}
	}
	trig.Set(10) // ceil(10/4) = 3
	testutil.Eventually(t, 10*time.Second, "scale out to 3", step(3))
	trig.Set(4) // ceil(4/4) = 1
	testutil.Eventually(t, 10*time.Second, "scale in to 1", step(1))
	trig.Set(0) // inactive: zero once the cooldown has passed
	testutil.Eventually(t, 10*time.Second, "scale to zero", step(0))
	testutil.Eventually(t, 10*time.Second, "status ScaledToZero", func() bool {
		got := h.get(manifest.KindJumpStartModel, "deepseek")
		return condition(got, manifest.ConditionReady).Reason == manifest.ReasonScaledToZero &&
			got.GetStatus().State == manifest.StateDeploymentComplete && got.GetStatus().Replicas == 0
	})

	// A request at zero is held, activates a replica and is served.
	type result struct {
		status int
		body   string
		err    error
	}
	resc := make(chan result, 1)
	go func() {
		res, err := h.gw.Invoke(ctx, gateway.Invocation{Endpoint: route, Path: "/v1/chat/completions",
			Body: []byte(`{"model":"deepseek-ep","messages":[{"role":"user","content":"hi"}]}`)})
		if err != nil {
			resc <- result{err: err}
			return
		}
		defer res.Response.Body.Close()
		b, _ := io.ReadAll(res.Response.Body)
		resc <- result{status: res.Response.StatusCode, body: string(b)}
	}()
	select {
	case r := <-resc:
		if r.err != nil || r.status != 200 || !strings.Contains(r.body, "chat.completion") {
			t.Fatalf("request at zero: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("request at zero was not served")
	}
	testutil.Eventually(t, 10*time.Second, "the activated replica", replicas(1))

	// A failing trigger never scales to zero, well past the cooldown.
	trig.Fail(errors.New("prometheus down"))
	for i := 0; i < 8; i++ {
		h.clk.Step(10 * time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	if !replicas(1)() {
		t.Fatalf("failing trigger: running %v", h.running("jsm."))
	}

	reasons := h.eventReasons(manifest.KindJumpStartModel, "deepseek")
	for _, want := range []string{"ScaledOut", "ScaledIn", "ScaledToZero", "Activated"} {
		if !slices.Contains(reasons, want) {
			t.Errorf("events %v lack %s", reasons, want)
		}
	}
	if n := promtest.ToFloat64(h.svc.ctrl.m.decisions.WithLabelValues("default", "deepseek", manifest.KindJumpStartModel, "Activated")); n != 1 {
		t.Errorf("Activated decisions %g, want 1", n)
	}
	if n := promtest.CollectAndCount(h.svc.ctrl.m.coldStart); n != 1 {
		t.Errorf("cold start series %d, want 1", n)
	}
	if v := promtest.ToFloat64(h.svc.ctrl.m.replicaSeconds.WithLabelValues("default", "deepseek", manifest.KindJumpStartModel)); v <= 0 {
		t.Errorf("replica seconds %g", v)
	}
	// Past the failure threshold the trigger reports KEDA's fallback value:
	// target × current replicas = 4 × 1.
	if v := promtest.ToFloat64(h.svc.ctrl.m.triggerValue.WithLabelValues("default", "deepseek", manifest.KindJumpStartModel, "queue")); v != 4 {
		t.Errorf("trigger value %g, want the fallback value 4", v)
	}
}
