package appautoscaling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	"github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/testutil"
)

const ipi = "InvocationsPerInstance"

// setup registers my-ep/AllTraffic (desired cur, reservation limit) with
// [lo, hi] and one InvocationsPerInstance policy "ipi" targeting 50.
func setup(t *testing.T, cur, limit int, lo, hi int32, mutate ...func(*types.TargetTrackingScalingPolicyConfiguration)) *env {
	t.Helper()
	e := newEnv(t)
	e.vars.add("my-ep", "AllTraffic", cur, limit)
	if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister(resMyEP, lo, hi)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.PutScalingPolicy(e.ctx, ttPolicy(resMyEP, "ipi", 50, mutate...)); err != nil {
		t.Fatal(err)
	}
	return e
}

// tick steps the fake clock one datapoint and evaluates.
func (e *env) tick() {
	e.t.Helper()
	e.clk.Step(time.Minute)
	e.reconcile()
}

func (e *env) desired() int {
	d, _ := e.vars.get("my-ep", "AllTraffic")
	return d
}

func (e *env) activities(includeNotScaled bool) []types.ScalingActivity {
	e.t.Helper()
	out, err := e.client.DescribeScalingActivities(e.ctx, &aas.DescribeScalingActivitiesInput{
		ServiceNamespace: types.ServiceNamespaceSagemaker, ResourceId: aws.String(resMyEP),
		IncludeNotScaledActivities: aws.Bool(includeNotScaled),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.ScalingActivities
}

func TestScaleOutAfterThreeDatapointsAndCooldown(t *testing.T) {
	e := setup(t, 1, 0, 1, 8)
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 120)
	e.tick()
	e.tick()
	if d := e.desired(); d != 1 {
		t.Fatalf("scaled after 2 datapoints: %d", d)
	}
	e.tick()
	if d := e.desired(); d != 3 { // ceil(1 × 120 / 50)
		t.Fatalf("desired %d, want 3", d)
	}
	acts := e.activities(false)
	if len(acts) != 1 {
		t.Fatalf("%d activities", len(acts))
	}
	a := acts[0]
	if a.StatusCode != types.ScalingActivityStatusCodeSuccessful || aws.ToString(a.Description) != "Setting desired instance count to 3." ||
		!strings.Contains(aws.ToString(a.Cause), "-AlarmHigh-") || !strings.HasSuffix(aws.ToString(a.Cause), "triggered policy ipi") ||
		!strings.Contains(aws.ToString(a.Details), "ceil(1 × 120 / 50) = 3") {
		t.Fatalf("activity %+v", a)
	}

	// The metric stays high per instance; the 60 s scale-out cooldown holds.
	e.clk.Step(30 * time.Second)
	e.reconcile()
	if d := e.desired(); d != 3 {
		t.Fatalf("scaled inside the cooldown: %d", d)
	}
	e.clk.Step(31 * time.Second)
	e.reconcile()
	if d := e.desired(); d != 8 { // ceil(3 × 120 / 50) = 8 = MaxCapacity
		t.Fatalf("desired %d, want 8", d)
	}
	// At the maximum: one not-scaled activity, however often the alarm fires.
	e.tick()
	e.tick()
	if d := e.desired(); d != 8 {
		t.Fatalf("beyond max: %d", d)
	}
	if n := len(e.activities(false)); n != 2 {
		t.Fatalf("%d scaling activities, want 2", n)
	}
	all := e.activities(true)
	if len(all) != 3 || len(all[0].NotScaledReasons) != 1 || aws.ToString(all[0].NotScaledReasons[0].Code) != "AlreadyAtMaxCapacity" ||
		aws.ToInt32(all[0].NotScaledReasons[0].MaxCapacity) != 8 {
		t.Fatalf("not-scaled activity: %+v", all)
	}
	if got := e.vars.setCalls(); !slices.Equal(got, []int{3, 8}) {
		t.Fatalf("SetDesired calls %v", got)
	}
}

func TestBreachMustBeConsecutive(t *testing.T) {
	e := setup(t, 2, 0, 1, 8)
	seq := []struct {
		v   float64
		err bool
	}{{100, false}, {100, false}, {50, false}, {100, false}, {100, false}, {0, true}, {100, false}, {100, false}}
	for i, s := range seq {
		if s.err {
			e.src.fail("my-ep", "AllTraffic", ipi, "Sum", errors.New("no data"))
		} else {
			e.src.set("my-ep", "AllTraffic", ipi, "Sum", s.v)
		}
		e.tick()
		if d := e.desired(); d != 2 {
			t.Fatalf("step %d: scaled to %d", i, d)
		}
	}
	e.tick()
	if d := e.desired(); d != 4 { // ceil(2 × 100 / 50)
		t.Fatalf("desired %d, want 4", d)
	}
}

func TestScaleInIsConservative(t *testing.T) {
	tests := []struct {
		name      string
		value     float64
		cur       int
		min       int32
		wantAfter int // datapoints until the scale-in
		wantCount int
	}{
		{"to ceil of the ratio", 20, 5, 1, 15, 2},    // ceil(5 × 20 / 50)
		{"never below min", 1, 5, 3, 15, 3},          // ceil(0.1) = 1 → min 3
		{"idle to min", 0, 4, 1, 15, 1},              // no traffic
		{"just below threshold", 44.9, 10, 1, 15, 9}, // < 45 = 0.9 × 50; ceil(8.98)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, tc.cur, 0, tc.min, 10)
			e.src.set("my-ep", "AllTraffic", ipi, "Sum", tc.value)
			for i := 1; i < tc.wantAfter; i++ {
				e.tick()
				if d := e.desired(); d != tc.cur {
					t.Fatalf("scaled in after %d datapoints: %d", i, d)
				}
			}
			e.tick()
			if d := e.desired(); d != tc.wantCount {
				t.Fatalf("desired %d, want %d", d, tc.wantCount)
			}
			if c := aws.ToString(e.activities(false)[0].Cause); !strings.Contains(c, "-AlarmLow-") {
				t.Fatalf("cause %q", c)
			}
		})
	}
	t.Run("at 90% of target holds", func(t *testing.T) {
		e := setup(t, 5, 0, 1, 10)
		e.src.set("my-ep", "AllTraffic", ipi, "Sum", 45)
		for i := 0; i < 30; i++ {
			e.tick()
		}
		if d := e.desired(); d != 5 {
			t.Fatalf("scaled at 0.9 × target: %d", d)
		}
	})
}

func TestScaleInWaitsForCooldownAfterScaleOut(t *testing.T) {
	e := setup(t, 2, 0, 1, 10, func(c *types.TargetTrackingScalingPolicyConfiguration) {
		c.ScaleInCooldown = aws.Int32(1800)
	})
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 100)
	for i := 0; i < 3; i++ {
		e.tick()
	}
	if d := e.desired(); d != 4 {
		t.Fatalf("scale-out: %d", d)
	}
	scaledOut := e.clk.Now()
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 5)
	for e.clk.Now().Add(time.Minute).Sub(scaledOut) < 30*time.Minute {
		e.tick()
		if d := e.desired(); d != 4 {
			t.Fatalf("scaled in %v after the scale-out, inside the 1800 s cooldown: %d", e.clk.Now().Sub(scaledOut), d)
		}
	}
	e.tick() // exactly 30 minutes after the scale-out
	if d := e.desired(); d != 1 {
		t.Fatalf("desired %d after the cooldown, want 1", d)
	}
}

func TestDisableScaleIn(t *testing.T) {
	e := setup(t, 4, 0, 1, 10, func(c *types.TargetTrackingScalingPolicyConfiguration) {
		c.DisableScaleIn = aws.Bool(true)
	})
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 0)
	for i := 0; i < 40; i++ {
		e.tick()
	}
	if d := e.desired(); d != 4 || len(e.vars.setCalls()) != 0 {
		t.Fatalf("scaled in with DisableScaleIn: %d %v", d, e.vars.setCalls())
	}
	// Scale-out still works.
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 75)
	for i := 0; i < 3; i++ {
		e.tick()
	}
	if d := e.desired(); d != 6 {
		t.Fatalf("desired %d, want 6", d)
	}
}

func TestReservationCapsScaling(t *testing.T) {
	e := setup(t, 1, 4, 1, 4)
	// The training plan shrinks to 2 instances after registration.
	e.vars.setLimit("my-ep", "AllTraffic", 2)
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 1000)
	for i := 0; i < 3; i++ {
		e.tick()
	}
	if d := e.desired(); d != 2 {
		t.Fatalf("desired %d, want the reservation's 2", d)
	}
	if det := aws.ToString(e.activities(false)[0].Details); !strings.Contains(det, "reservation limit 2") {
		t.Fatalf("details %q", det)
	}
	// It shrinks again: the controller brings the variant down to it.
	e.vars.setLimit("my-ep", "AllTraffic", 1)
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 50)
	e.tick()
	if d := e.desired(); d != 1 {
		t.Fatalf("desired %d above the reservation 1", d)
	}
	if c := aws.ToString(e.activities(false)[0].Cause); c != "the variant's reservation allows at most 1 instances" {
		t.Fatalf("cause %q", c)
	}
}

func TestRangeEnforcedOnRegister(t *testing.T) {
	e := setup(t, 1, 0, 1, 8)
	if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister(resMyEP, 3, 8)); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if d := e.desired(); d != 3 {
		t.Fatalf("desired %d, want min 3", d)
	}
	if c := aws.ToString(e.activities(false)[0].Cause); c != "minimum capacity was set to 3" {
		t.Fatalf("cause %q", c)
	}
	if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister(resMyEP, 1, 2)); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if d := e.desired(); d != 2 {
		t.Fatalf("desired %d, want max 2", d)
	}
}

func TestSeveralPolicies(t *testing.T) {
	e := setup(t, 4, 0, 1, 20)
	// A second policy on the whole endpoint's average model latency.
	if _, err := e.client.PutScalingPolicy(e.ctx, ttPolicy(resMyEP, "latency", 100000, func(c *types.TargetTrackingScalingPolicyConfiguration) {
		c.PredefinedMetricSpecification = nil
		c.CustomizedMetricSpecification = &types.CustomizedMetricSpecification{
			MetricName: aws.String("ModelLatency"), Namespace: aws.String("AWS/SageMaker"), Statistic: types.MetricStatisticAverage,
			Dimensions: []types.MetricDimension{{Name: aws.String("EndpointName"), Value: aws.String("my-ep")}},
		}
		c.ScaleOutCooldown = aws.Int32(0)
	})); err != nil {
		t.Fatal(err)
	}
	// Invocations are low but latency is at its target: no scale-in.
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 10)
	e.src.set("my-ep", "", "ModelLatency", "Average", 100000)
	for i := 0; i < 20; i++ {
		e.tick()
	}
	if d := e.desired(); d != 4 {
		t.Fatalf("scaled in while a policy vetoes: %d", d)
	}
	if n := e.src.readCount("my-ep", "", "ModelLatency", "Average"); n != 20 {
		t.Fatalf("latency read %d times, want once per evaluation (20)", n)
	}
	// Both high: the larger proposal wins.
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 75)          // ceil(4 × 1.5) = 6
	e.src.set("my-ep", "", "ModelLatency", "Average", 250000) // ceil(4 × 2.5) = 10
	for i := 0; i < 3; i++ {
		e.tick()
	}
	if d := e.desired(); d != 10 {
		t.Fatalf("desired %d, want 10", d)
	}
	// Both low: scale in to the larger of the two proposals.
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 10)         // ceil(10 × 0.2) = 2
	e.src.set("my-ep", "", "ModelLatency", "Average", 30000) // ceil(10 × 0.3) = 3
	for i := 0; i < 15; i++ {
		e.tick()
	}
	if d := e.desired(); d != 3 {
		t.Fatalf("desired %d, want 3", d)
	}
}

func TestSuspendedScaleOut(t *testing.T) {
	e := setup(t, 1, 0, 1, 8)
	in := sdkRegister(resMyEP, 1, 8)
	in.SuspendedState = &types.SuspendedState{DynamicScalingOutSuspended: aws.Bool(true)}
	if _, err := e.client.RegisterScalableTarget(e.ctx, in); err != nil {
		t.Fatal(err)
	}
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 500)
	for i := 0; i < 5; i++ {
		e.tick()
	}
	if d := e.desired(); d != 1 {
		t.Fatalf("scaled out while suspended: %d", d)
	}
}

func TestEndpointBusyAndFailures(t *testing.T) {
	e := setup(t, 1, 0, 1, 8)
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 100)
	e.vars.setErr = fmt.Errorf("update: %w", &endpoint.Error{Kind: endpoint.ErrInProgress, Resource: endpoint.ResEndpoint, Name: "my-ep"})
	for i := 0; i < 3; i++ {
		e.tick()
	}
	if n := len(e.activities(true)); n != 0 {
		t.Fatalf("%d activities while the endpoint was busy", n)
	}
	// The alarm is still in ALARM: the next evaluation retries.
	e.vars.setErr = nil
	e.tick()
	if d := e.desired(); d != 2 {
		t.Fatalf("desired %d after retry, want 2", d)
	}
	// A hard failure is recorded as a Failed activity and reported.
	e.clk.Step(10 * time.Minute)
	e.vars.setErr = errors.New("boom")
	if err := e.api.Controller().Reconcile(e.ctx); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("reconcile error %v", err)
	}
	a := e.activities(false)[0]
	if a.StatusCode != types.ScalingActivityStatusCodeFailed || !strings.Contains(aws.ToString(a.StatusMessage), "boom") {
		t.Fatalf("activity %+v", a)
	}
}

func TestUnknownMetricNeverScales(t *testing.T) {
	e := setup(t, 3, 0, 1, 8) // the source has no value: every read fails
	for i := 0; i < 30; i++ {
		e.tick()
	}
	if d := e.desired(); d != 3 || len(e.activities(true)) != 0 {
		t.Fatalf("scaled without data: %d", d)
	}
}

func TestGauges(t *testing.T) {
	e := setup(t, 1, 0, 1, 8)
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 120)
	for i := 0; i < 3; i++ {
		e.tick()
	}
	want := `
# HELP capstan_appautoscaling_desired Desired instance count of a SageMaker variant under Application Auto Scaling, as last read or set.
# TYPE capstan_appautoscaling_desired gauge
capstan_appautoscaling_desired{endpoint="my-ep",variant="AllTraffic"} 3
# HELP capstan_appautoscaling_metric_value Last value of a target-tracking policy's metric.
# TYPE capstan_appautoscaling_metric_value gauge
capstan_appautoscaling_metric_value{endpoint="my-ep",policy="ipi",variant="AllTraffic"} 120
`
	if err := promtest.GatherAndCompare(e.reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.DeregisterScalableTarget(e.ctx, &aas.DeregisterScalableTargetInput{ServiceNamespace: types.ServiceNamespaceSagemaker,
		ResourceId: aws.String(resMyEP), ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredInstanceCount}); err != nil {
		t.Fatal(err)
	}
	e.tick()
	if n, err := promtest.GatherAndCount(e.reg); err != nil || n != 0 {
		t.Fatalf("%d series after deregister (%v)", n, err)
	}
	// History outlives the target.
	if n := len(e.activities(false)); n != 1 {
		t.Fatalf("%d activities after deregister", n)
	}
}

func TestActivityRetention(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxActivitiesRetained = 3 })
	e.vars.add("my-ep", "AllTraffic", 1, 0)
	if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister(resMyEP, 1, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.PutScalingPolicy(e.ctx, ttPolicy(resMyEP, "ipi", 50, func(c *types.TargetTrackingScalingPolicyConfiguration) {
		c.ScaleOutCooldown = aws.Int32(0)
	})); err != nil {
		t.Fatal(err)
	}
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 100) // doubles every datapoint after the third
	for i := 0; i < 7; i++ {
		e.tick()
	}
	acts := e.activities(false)
	var got []string
	for _, a := range acts {
		got = append(got, aws.ToString(a.Description))
	}
	want := []string{"Setting desired instance count to 32.", "Setting desired instance count to 16.", "Setting desired instance count to 8."}
	if !slices.Equal(got, want) {
		t.Fatalf("activities %v, want newest first %v", got, want)
	}
}

// TestRun drives the loop on the fake clock: a registration is enforced at
// once (no datapoint needed), and ticks evaluate the policies.
func TestRun(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Interval = 10 * time.Second; o.ScaleOutDatapoints = 2 })
	e.vars.add("my-ep", "AllTraffic", 1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.api.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	e.clk.BlockUntil(1) // the ticker

	if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister(resMyEP, 2, 8)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "min capacity enforced", func() bool { return e.desired() == 2 })

	if _, err := e.client.PutScalingPolicy(e.ctx, ttPolicy(resMyEP, "ipi", 50)); err != nil {
		t.Fatal(err)
	}
	e.src.set("my-ep", "AllTraffic", ipi, "Sum", 100)
	for i := 1; i <= 2; i++ {
		e.clk.Step(10 * time.Second)
		testutil.Eventually(t, 10*time.Second, "an evaluation", func() bool { return e.src.readCount("my-ep", "AllTraffic", ipi, "Sum") >= i })
	}
	testutil.Eventually(t, 10*time.Second, "scale-out", func() bool { return e.desired() == 4 })
}
