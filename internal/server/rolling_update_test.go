package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// startingReplica waits for a replica of endpoint ep in StateStarting (the
// fake runtime is manual) and returns it.
func (h *harness) startingReplica(t *testing.T, ep string) runtime.Replica {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, r := range h.rt.List() {
			if r.Spec.Endpoint == ep && r.State == runtime.StateStarting {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica of %s is starting: %+v", ep, h.rt.List())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRollingUpdateOnExactPlan: an endpoint that fills its 1-instance
// training plan cannot be updated blue/green (the error says what is free
// and what to do), and is updated with a rolling policy instead: the old
// instance stops first, requests wait for the new one, none fails.
func TestRollingUpdateOnExactPlan(t *testing.T) {
	h := startHarness(t, config.Config{DevClock: true}, fake.Manual())
	dev := h.srv.Clock.(*clock.Dev)
	ctx := context.Background()
	h.setup(t, "m1", "unused", 1)
	if _, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("m2"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "Qwen/Qwen2.5-7B-Instruct"}}}); err != nil {
		t.Fatal(err)
	}
	plan := h.buyPlan(t, "p", 1, 168, dev.Now())
	dev.Advance(time.Minute)
	for _, c := range []struct{ name, model string }{{"cfg1", "m1"}, {"cfg2", "m2"}} {
		if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(c.name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(c.model),
				InstanceType: "ml.p5.48xlarge", InitialInstanceCount: aws.Int32(1), InitialVariantWeight: aws.Float32(1),
				CapacityReservationConfig: &smtypes.ProductionVariantCapacityReservationConfig{
					CapacityReservationPreference: "capacity-reservations-only", MlReservationArn: aws.String(plan)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	h.createEP(t, "ep", "cfg1")
	old := h.startingReplica(t, "ep")
	if err := h.rt.SetState(old.Spec.ID, runtime.StateHealthy, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(t, "ep", smtypes.EndpointStatusInService)

	update := func(dc *smtypes.DeploymentConfig) error {
		_, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("cfg2"), DeploymentConfig: dc})
		return err
	}
	t.Run("blue/green does not fit", func(t *testing.T) {
		want := `Cannot update endpoint arn:aws:sagemaker:us-east-1:000000000000:endpoint/ep with a blue/green deployment: ` +
			`the new configuration needs 1 instance(s) of training plan p beside the 1 serving, and the plan has 0 free (1 in total). ` +
			`Update with --deployment-config '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0}}' ` +
			`to replace instances in place, or use a configuration that fits.`
		if code, msg := apiCode(update(nil)); code != "ValidationException" || msg != want {
			t.Fatalf("got %s %q\nwant ValidationException %q", code, msg, want)
		}
	})
	t.Run("unknown alarm", func(t *testing.T) {
		err := update(&smtypes.DeploymentConfig{AutoRollbackConfiguration: &smtypes.AutoRollbackConfig{Alarms: []smtypes.Alarm{{AlarmName: aws.String("nope")}}}})
		if code, msg := apiCode(err); code != "ValidationException" || !strings.Contains(msg, "'deploymentConfig.autoRollbackConfiguration.alarms'") ||
			!strings.Contains(msg, "not defined: nope") {
			t.Fatalf("got %s %q", code, msg)
		}
	})

	// The new replica answers with its own engine, so that an answer says
	// which side served it.
	eng2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"served_by":"m2"}`)
	}))
	t.Cleanup(eng2.Close)

	stop := testutil.Hammer(4, func() error { return h.invoke("ep") })
	time.Sleep(50 * time.Millisecond)
	err := update(&smtypes.DeploymentConfig{RollingUpdatePolicy: &smtypes.RollingUpdatePolicy{
		MaximumBatchSize: &smtypes.CapacitySize{Type: smtypes.CapacitySizeTypeInstanceCount, Value: aws.Int32(1)}, WaitIntervalInSeconds: aws.Int32(0)}})
	if err != nil {
		t.Fatal(err)
	}
	// The plan has no room for a second instance: the old one retires and
	// the new one starts (and stays Starting until this test says so).
	next := h.startingReplica(t, "ep")
	if next.Spec.ID == old.Spec.ID || next.Spec.Model == old.Spec.Model {
		t.Fatalf("new replica %s runs %q, old %s ran %q", next.Spec.ID, next.Spec.Model, old.Spec.ID, old.Spec.Model)
	}
	if !strings.Contains(strings.Join(h.rt.Running(), ","), next.Spec.ID) || strings.Contains(strings.Join(h.rt.Running(), ","), old.Spec.ID) {
		t.Fatalf("running %v: the old replica should have stopped before the new one started", h.rt.Running())
	}
	d, err := h.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("ep")})
	if err != nil {
		t.Fatal(err)
	}
	ps := d.PendingDeploymentSummary
	if d.EndpointStatus != smtypes.EndpointStatusUpdating || ps == nil || aws.ToString(ps.EndpointConfigName) != "cfg2" || ps.StartTime == nil ||
		len(ps.ProductionVariants) != 1 {
		t.Fatalf("during the update: %s %+v", d.EndpointStatus, ps)
	}
	pv := ps.ProductionVariants[0]
	if aws.ToString(pv.VariantName) != "AllTraffic" || pv.InstanceType != "ml.p5.48xlarge" || aws.ToInt32(pv.DesiredInstanceCount) != 1 ||
		aws.ToInt32(pv.CurrentInstanceCount) != 1 || len(pv.VariantStatus) != 1 || pv.VariantStatus[0].Status != smtypes.VariantStatusUpdating {
		t.Fatalf("pending variant %+v", pv)
	}
	if n := aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount); aws.ToString(d.EndpointConfigName) != "cfg1" || n != 0 {
		t.Fatalf("serving side during the update: config %s, %d instances", aws.ToString(d.EndpointConfigName), n)
	}
	time.Sleep(100 * time.Millisecond) // requests arrive while no replica serves; they wait
	h.rt.SetAddr(next.Spec.ID, strings.TrimPrefix(eng2.URL, "http://"))
	if err := h.rt.SetState(next.Spec.ID, runtime.StateHealthy, ""); err != nil {
		t.Fatal(err)
	}
	d = h.waitStatus(t, "ep", smtypes.EndpointStatusInService)
	time.Sleep(50 * time.Millisecond)
	if r := stop(); r.Failed > 0 || r.OK == 0 {
		t.Fatalf("%d ok, %d failed during the rolling update; first: %v", r.OK, r.Failed, r.Errors)
	}
	out, err := h.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("ep"), ContentType: aws.String("application/json"),
		Body: []byte(`{"inputs":"hi"}`)})
	if err != nil || string(out.Body) != `{"served_by":"m2"}` {
		t.Fatalf("after the update: %s %v", out.Body, err)
	}
	if aws.ToString(d.EndpointConfigName) != "cfg2" || d.PendingDeploymentSummary != nil || aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount) != 1 {
		t.Fatalf("after the update: config %s, pending %+v, variants %+v", aws.ToString(d.EndpointConfigName), d.PendingDeploymentSummary, d.ProductionVariants)
	}
	ldc := d.LastDeploymentConfig
	if ldc == nil || ldc.RollingUpdatePolicy == nil || ldc.BlueGreenUpdatePolicy != nil || ldc.RollingUpdatePolicy.MaximumBatchSize.Type != smtypes.CapacitySizeTypeInstanceCount ||
		aws.ToInt32(ldc.RollingUpdatePolicy.MaximumBatchSize.Value) != 1 || aws.ToInt32(ldc.RollingUpdatePolicy.WaitIntervalInSeconds) != 0 {
		t.Fatalf("LastDeploymentConfig %+v", ldc)
	}
	p, err := h.sm.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("p")})
	if err != nil || aws.ToInt32(p.InUseInstanceCount) != 1 || aws.ToInt32(p.AvailableInstanceCount) != 0 {
		t.Fatalf("plan after the update: %+v %v", p, err)
	}
}
