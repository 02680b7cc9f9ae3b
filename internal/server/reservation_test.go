package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	smrtypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/testutil"
)

const expiredMsg = "Endpoint capacity reservation has expired. Please update endpoint configuration."

// buyPlan searches count × ml.p5.48xlarge for hours starting after `after`
// and buys the first offering as name; it returns the plan ARN.
func (h *harness) buyPlan(t *testing.T, name string, count int32, hours int64, after time.Time) string {
	t.Helper()
	ctx := context.Background()
	s, err := h.sm.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
		TargetResources: []smtypes.SageMakerResourceName{"endpoint"}, InstanceType: "ml.p5.48xlarge",
		InstanceCount: aws.Int32(count), DurationHours: aws.Int64(hours), StartTimeAfter: aws.Time(after),
		EndTimeBefore: aws.Time(after.Add(60 * 24 * time.Hour))})
	if err != nil || len(s.TrainingPlanOfferings) == 0 {
		t.Fatalf("search: %+v %v", s, err)
	}
	out, err := h.sm.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name),
		TrainingPlanOfferingId: s.TrainingPlanOfferings[0].TrainingPlanOfferingId})
	if err != nil {
		t.Fatalf("create plan %s: %v", name, err)
	}
	return aws.ToString(out.TrainingPlanArn)
}

// reservedConfig creates config name with one variant of count instances,
// on plan arn (or on-demand when arn is "").
func (h *harness) reservedConfig(t *testing.T, name, arn string, count int32) error {
	t.Helper()
	v := smtypes.ProductionVariant{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m1"),
		InstanceType: "ml.p5.48xlarge", InitialInstanceCount: aws.Int32(count), InitialVariantWeight: aws.Float32(1)}
	if arn != "" {
		v.CapacityReservationConfig = &smtypes.ProductionVariantCapacityReservationConfig{
			CapacityReservationPreference: "capacity-reservations-only", MlReservationArn: aws.String(arn)}
	}
	_, err := h.sm.CreateEndpointConfig(context.Background(), &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
		ProductionVariants: []smtypes.ProductionVariant{v}})
	return err
}

func (h *harness) createEP(t *testing.T, name, cfg string) {
	t.Helper()
	if _, err := h.sm.CreateEndpoint(context.Background(), &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(cfg)}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) invoke(name string) error {
	_, err := h.smr.InvokeEndpoint(context.Background(), &smr.InvokeEndpointInput{EndpointName: aws.String(name),
		ContentType: aws.String("application/json"), Body: []byte(`{"inputs":"hi"}`)})
	return err
}

func isExpired(err error) bool {
	var me *smrtypes.ModelError
	return errors.As(err, &me) && aws.ToString(me.Message) == expiredMsg
}

func TestReservedEndpointScheduleScaleExpiry(t *testing.T) {
	h := startHarness(t, config.Config{DevClock: true})
	dev := h.srv.Clock.(*clock.Dev)
	ctx := context.Background()
	h.setup(t, "m1", "unused", 1)
	now := dev.Now()
	planA := h.buyPlan(t, "plan-a", 1, 168, now.Add(time.Hour))
	planB := h.buyPlan(t, "plan-b", 2, 336, now.Add(time.Hour))

	t.Run("config validation", func(t *testing.T) {
		tests := []struct {
			name, arn, want string
			count           int32
		}{
			{"more than the plan", planA, "Training plan plan-a has 1 instances (1 available to this endpoint); 2 were requested", 2},
			{"missing plan", "arn:aws:sagemaker:us-east-1:000000000000:training-plan/nope", "does not exist", 1},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				err := h.reservedConfig(t, "bad", tc.arn, tc.count)
				if code, msg := apiCode(err); code != "ValidationException" || !strings.Contains(msg, tc.want) {
					t.Fatalf("got %s %q, want ValidationException with %q", code, msg, tc.want)
				}
			})
		}
	})

	if err := h.reservedConfig(t, "cfg-a", planA, 1); err != nil {
		t.Fatal(err)
	}
	h.createEP(t, "ep-a", "cfg-a")
	// Scheduled: the endpoint waits in Creating and says until when.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := h.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("ep-a")})
		if err != nil {
			t.Fatal(err)
		}
		if d.EndpointStatus != smtypes.EndpointStatusCreating {
			t.Fatalf("status %s before the plan starts", d.EndpointStatus)
		}
		if vs := d.ProductionVariants[0].VariantStatus; len(vs) > 0 && strings.Contains(aws.ToString(vs[0].StatusMessage), "Waiting for training plan plan-a to start at") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no waiting message: %+v", d.ProductionVariants)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(h.rt.List()); n != 0 {
		t.Fatalf("%d replicas started before the plan", n)
	}
	dev.Advance(2 * time.Hour)
	d := h.waitStatus(t, "ep-a", smtypes.EndpointStatusInService)
	crc := d.ProductionVariants[0].CapacityReservationConfig
	if crc == nil || aws.ToString(crc.MlReservationArn) != planA || aws.ToInt32(crc.UsedByCurrentEndpoint) != 1 ||
		aws.ToInt32(crc.TotalInstanceCount) != 1 || aws.ToInt32(crc.AvailableInstanceCount) != 0 {
		t.Fatalf("CapacityReservationConfig %+v", crc)
	}
	if err := h.invoke("ep-a"); err != nil {
		t.Fatal(err)
	}
	p, err := h.sm.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("plan-a")})
	if err != nil || p.Status != smtypes.TrainingPlanStatusActive || aws.ToInt32(p.InUseInstanceCount) != 1 || aws.ToInt32(p.AvailableInstanceCount) != 0 {
		t.Fatalf("plan-a %+v %v", p, err)
	}
	planEndpoints(t, h.url, "plan-a", `[{"EndpointName":"ep-a","EndpointStatus":"InService","VariantNames":["AllTraffic"],"InstanceCount":1}]`)
	planEndpoints(t, h.url, "plan-b", `[]`)

	t.Run("scale", func(t *testing.T) {
		two := aws.Int32(2)
		_, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("ep-a"),
			DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: two}}})
		if code, msg := apiCode(err); code != "ValidationException" || !strings.Contains(msg, "plan-a has 1 instances") || !strings.Contains(msg, "2 were requested") {
			t.Fatalf("beyond the plan: %s %q", code, msg)
		}
		if err := h.reservedConfig(t, "cfg-b", planB, 1); err != nil {
			t.Fatal(err)
		}
		h.createEP(t, "ep-b", "cfg-b")
		h.waitStatus(t, "ep-b", smtypes.EndpointStatusInService)
		if _, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("ep-b"),
			DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: two}}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		d := h.waitStatus(t, "ep-b", smtypes.EndpointStatusInService)
		if n := aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount); n != 2 {
			t.Fatalf("ep-b has %d instances, want 2", n)
		}
		// UpdateEndpoint to configs on the same plan that differ only in
		// count: the plan cannot hold both sides, so it scales in place.
		if err := h.reservedConfig(t, "cfg-b2", planB, 2); err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			cfg  string
			want int32
		}{{"cfg-b", 1}, {"cfg-b2", 2}} {
			if _, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("ep-b"), EndpointConfigName: aws.String(step.cfg)}); err != nil {
				t.Fatalf("update to %s: %v", step.cfg, err)
			}
			time.Sleep(100 * time.Millisecond)
			d := h.waitStatus(t, "ep-b", smtypes.EndpointStatusInService)
			if n := aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount); n != step.want || aws.ToString(d.EndpointConfigName) != step.cfg {
				t.Fatalf("after update to %s: %d instances, config %s", step.cfg, n, aws.ToString(d.EndpointConfigName))
			}
		}
		if err := h.reservedConfig(t, "cfg-b3", planB, 3); err == nil {
			t.Fatal("a config for 3 instances of a 2-instance plan was accepted")
		}
	})

	t.Run("expiry mid-stream", func(t *testing.T) {
		// The hammer keeps only the first errors: every failure is checked here.
		var other atomic.Pointer[error] // the first that is not the expiry ModelError
		stop := testutil.Hammer(4, func() error {
			err := h.invoke("ep-a")
			if err != nil && !isExpired(err) {
				other.CompareAndSwap(nil, &err)
			}
			return err
		})
		time.Sleep(100 * time.Millisecond)
		dev.Advance(167 * time.Hour)
		deadline := time.Now().Add(10 * time.Second)
		for !isExpired(h.invoke("ep-a")) {
			if time.Now().After(deadline) {
				t.Fatal("invocations did not start failing with the expiry message")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if r := stop(); r.OK == 0 {
			t.Fatal("no invocation succeeded before expiry")
		}
		if err := other.Load(); err != nil {
			t.Fatalf("an invocation failed with something other than the expiry ModelError: %v", *err)
		}
		for i := 0; i < 3; i++ {
			if err := h.invoke("ep-a"); !isExpired(err) {
				t.Fatalf("after expiry: %v", err)
			}
		}
		d := h.waitStatus(t, "ep-a", smtypes.EndpointStatusFailed)
		if !strings.Contains(aws.ToString(d.FailureReason), "Training plan plan-a ended") {
			t.Fatalf("FailureReason %q", aws.ToString(d.FailureReason))
		}
		if n := len(h.rt.Running()); n != 2 { // ep-b's two replicas only
			t.Fatalf("%d replicas running after expiry, want 2 (ep-b)", n)
		}
		p, _ := h.sm.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("plan-a")})
		if p.Status != smtypes.TrainingPlanStatusExpired {
			t.Fatalf("plan-a %s", p.Status)
		}
		// The failed endpoint is still listed on its plan, with its reason.
		_, raw := rawCall(t, h.url, "DescribeTrainingPlan", `{"TrainingPlanName":"plan-a"}`)
		eps, _ := raw["CapstanEndpoints"].([]any)
		if len(eps) != 1 || eps[0].(map[string]any)["EndpointStatus"] != "Failed" ||
			!strings.Contains(fmt.Sprint(eps[0].(map[string]any)["FailureReason"]), "Training plan plan-a ended") {
			t.Fatalf("CapstanEndpoints after expiry: %v", raw["CapstanEndpoints"])
		}
		l, err := h.sm.ListTrainingPlans(ctx, &sm.ListTrainingPlansInput{Filters: []smtypes.TrainingPlanFilter{{Name: "Status", Value: aws.String("Expired")}}})
		if err != nil || len(l.TrainingPlanSummaries) != 1 || aws.ToString(l.TrainingPlanSummaries[0].TrainingPlanName) != "plan-a" {
			t.Fatalf("list expired: %+v %v", l, err)
		}
	})

	t.Run("update a failed, expired endpoint to on-demand", func(t *testing.T) {
		if err := h.reservedConfig(t, "cfg-od", "", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("ep-a"), EndpointConfigName: aws.String("cfg-od")}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(t, "ep-a", smtypes.EndpointStatusInService)
		if err := h.invoke("ep-a"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestReservedEndpointMigrationHasNoFailedRequest(t *testing.T) {
	h := startHarness(t, config.Config{DevClock: true})
	dev := h.srv.Clock.(*clock.Dev)
	ctx := context.Background()
	h.setup(t, "m1", "unused", 1)
	planA := h.buyPlan(t, "plan-a", 1, 168, dev.Now())
	planC := h.buyPlan(t, "plan-c", 1, 168, dev.Now())
	for _, c := range []struct{ name, arn string }{{"cfg-a", planA}, {"cfg-c", planC}, {"cfg-od", ""}} {
		if err := h.reservedConfig(t, c.name, c.arn, 1); err != nil {
			t.Fatal(err)
		}
	}
	dev.Advance(time.Minute)
	h.createEP(t, "ep", "cfg-a")
	h.waitStatus(t, "ep", smtypes.EndpointStatusInService)
	for _, next := range []string{"cfg-c", "cfg-od"} {
		t.Run("to "+next, func(t *testing.T) {
			stop := testutil.Hammer(4, func() error { return h.invoke("ep") })
			time.Sleep(50 * time.Millisecond)
			if _, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String(next)}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			d := h.waitStatus(t, "ep", smtypes.EndpointStatusInService)
			time.Sleep(50 * time.Millisecond)
			if r := stop(); r.Failed > 0 || r.OK == 0 {
				t.Fatalf("%d ok, %d failed during migration, first: %v", r.OK, r.Failed, r.Errors)
			}
			if aws.ToString(d.EndpointConfigName) != next {
				t.Fatalf("config %s", aws.ToString(d.EndpointConfigName))
			}
		})
	}
	for _, plan := range []string{"plan-a", "plan-c"} {
		p, _ := h.sm.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String(plan)})
		if aws.ToInt32(p.InUseInstanceCount) != 0 || aws.ToInt32(p.AvailableInstanceCount) != 1 {
			t.Fatalf("%s not released: %+v", plan, p)
		}
	}
}

func TestRestartWithActivePlanAndEndpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	h := startHarness(t, config.Config{DataDir: dir})
	h.setup(t, "m1", "unused", 1)
	arn := h.buyPlan(t, "plan-a", 1, 24, h.srv.Clock.Now())
	if err := h.reservedConfig(t, "cfg-a", arn, 1); err != nil {
		t.Fatal(err)
	}
	h.createEP(t, "ep", "cfg-a")
	h.waitStatus(t, "ep", smtypes.EndpointStatusInService)
	h.srv.Stop(context.Background())

	h2 := startHarness(t, config.Config{DataDir: dir})
	d := h2.waitStatus(t, "ep", smtypes.EndpointStatusInService)
	if crc := d.ProductionVariants[0].CapacityReservationConfig; crc == nil || aws.ToInt32(crc.UsedByCurrentEndpoint) != 1 {
		t.Fatalf("after restart: %+v", crc)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h2.invoke("ep") != nil {
		if time.Now().After(deadline) {
			t.Fatal("endpoint does not serve after restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p, err := h2.sm.DescribeTrainingPlan(context.Background(), &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("plan-a")})
	if err != nil || p.Status != smtypes.TrainingPlanStatusActive || aws.ToInt32(p.InUseInstanceCount) != 1 {
		t.Fatalf("plan after restart: %+v %v", p, err)
	}
	// The restarted calendar still refuses a second user of the full plan.
	if err := h2.reservedConfig(t, "cfg-a2", arn, 1); err != nil {
		t.Fatal(err)
	}
	_, err = h2.sm.CreateEndpoint(context.Background(), &sm.CreateEndpointInput{EndpointName: aws.String("ep2"), EndpointConfigName: aws.String("cfg-a2")})
	if code, msg := apiCode(err); code != "ValidationException" || !strings.Contains(msg, "0 available") {
		t.Fatalf("second user after restart: %s %q", code, msg)
	}
}

// TestExpiryLetsInFlightRequestsFinish: a request already at the engine when
// the plan ends completes normally; requests after that get the expiry
// ModelError at once, even while the old replica is still draining.
func TestExpiryLetsInFlightRequestsFinish(t *testing.T) {
	h := startHarness(t, config.Config{DevClock: true})
	dev := h.srv.Clock.(*clock.Dev)
	arrived, release := make(chan struct{}, 16), make(chan struct{})
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(eng.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	h.rt.SetDefaultAddr(strings.TrimPrefix(eng.URL, "http://"))
	h.setup(t, "m1", "unused", 1)
	arn := h.buyPlan(t, "plan-a", 1, 24, dev.Now())
	if err := h.reservedConfig(t, "cfg-a", arn, 1); err != nil {
		t.Fatal(err)
	}
	dev.Advance(time.Minute)
	h.createEP(t, "ep", "cfg-a")
	h.waitStatus(t, "ep", smtypes.EndpointStatusInService)

	inflight := make(chan error, 1)
	go func() { inflight <- h.invoke("ep") }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("request never reached the engine")
	}
	dev.Advance(24 * time.Hour)
	// Once the endpoint says Failed, the route already answers the expiry.
	h.waitStatus(t, "ep", smtypes.EndpointStatusFailed)
	for i := 0; i < 3; i++ {
		if err := h.invoke("ep"); !isExpired(err) {
			t.Fatalf("after expiry: %v", err)
		}
	}
	select {
	case err := <-inflight:
		t.Fatalf("in-flight request ended before the engine answered: %v", err)
	default:
	}
	close(release)
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight request failed: %v", err)
	}
}

// planEndpoints checks DescribeTrainingPlan's CapstanEndpoints (capstan's
// extension: the endpoints with a variant on the plan) against want (JSON).
func planEndpoints(t *testing.T, url, plan, want string) {
	t.Helper()
	status, raw := rawCall(t, url, "DescribeTrainingPlan", fmt.Sprintf(`{"TrainingPlanName":%q}`, plan))
	got, _ := json.Marshal(raw["CapstanEndpoints"])
	var w any
	_ = json.Unmarshal([]byte(want), &w)
	wantJSON, _ := json.Marshal(w)
	if status != 200 || string(got) != string(wantJSON) {
		t.Fatalf("%s CapstanEndpoints: %d %s, want %s", plan, status, got, wantJSON)
	}
}

// TestAnotherAccountsPlanIsRefused: a training plan ARN of another account
// or region, even one ending in the name of a plan the caller owns, is
// refused as SageMaker refuses a plan the caller does not own (a
// ValidationException naming the member) and nothing is created; the
// caller's own ARN still works.
func TestAnotherAccountsPlanIsRefused(t *testing.T) {
	h := startHarness(t, clusterConfig())
	ctx := context.Background()
	now := h.srv.Clock.Now()
	h.setup(t, "m1", "unused", 1)
	epPlan := h.buyPlan(t, "ep-plan", 1, 168, now.Add(time.Hour))
	hpPlan := h.buyClusterPlan(t, "hp-plan", "hyperpod-cluster", 1, now)
	others := func(arn string) map[string]string {
		return map[string]string{
			"another account": strings.Replace(arn, ":000000000000:", ":111111111111:", 1),
			"another region":  strings.Replace(arn, ":us-east-1:", ":us-west-2:", 1),
		}
	}
	refused := func(t *testing.T, err error, member, arn string) {
		t.Helper()
		code, msg := apiCode(err)
		if code != "ValidationException" || !strings.Contains(msg, member) || !strings.Contains(msg, arn) {
			t.Fatalf("got %s %q, want a ValidationException naming %s and %s", code, msg, member, arn)
		}
	}
	for name, arn := range others(epPlan) {
		t.Run("CreateEndpointConfig, "+name, func(t *testing.T) {
			refused(t, h.reservedConfig(t, "foreign", arn, 1), "MlReservationArn", arn)
			_, err := h.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String("foreign")})
			if _, msg := apiCode(err); err == nil || !strings.Contains(msg, "Could not find") {
				t.Fatalf("the refused config was stored: %v", err)
			}
		})
	}
	for name, arn := range others(hpPlan) {
		t.Run("CreateCluster, "+name, func(t *testing.T) {
			refused(t, h.createCluster("foreign", "", hpGroup("reserved", "ml.p5.48xlarge", 1, arn)), "InstanceGroups[0].TrainingPlanArn", arn)
			_, err := h.sm.DescribeCluster(ctx, &sm.DescribeClusterInput{ClusterName: aws.String("foreign")})
			if code, _ := apiCode(err); code != "ResourceNotFound" {
				t.Fatalf("the refused cluster was created: %v", err)
			}
		})
		t.Run("UpdateCluster, "+name, func(t *testing.T) {
			_, err := h.sm.UpdateCluster(ctx, &sm.UpdateClusterInput{ClusterName: aws.String("ml-cluster"),
				InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{hpGroup("reserved", "ml.p5.48xlarge", 1, arn)}})
			refused(t, err, "InstanceGroups[0].TrainingPlanArn", arn)
			for _, g := range h.describeCluster(t, "ml-cluster").InstanceGroups {
				if aws.ToString(g.InstanceGroupName) == "reserved" {
					t.Fatalf("the refused group was added: %+v", g)
				}
			}
		})
	}
	t.Run("the caller's own plans", func(t *testing.T) {
		if err := h.reservedConfig(t, "own", epPlan, 1); err != nil {
			t.Fatal(err)
		}
		if err := h.createCluster("own", "", hpGroup("reserved", "ml.p5.48xlarge", 1, hpPlan)); err != nil {
			t.Fatal(err)
		}
		// ListClusters' filter: the plan's own ARN finds the cluster, another
		// account's ARN with its name none.
		if got := h.clusterNames(t, &sm.ListClustersInput{TrainingPlanArn: aws.String(hpPlan)}); !slices.Equal(got, []string{"own"}) {
			t.Fatalf("clusters on %s: %v", hpPlan, got)
		}
		foreign := others(hpPlan)["another account"]
		if got := h.clusterNames(t, &sm.ListClustersInput{TrainingPlanArn: aws.String(foreign)}); len(got) != 0 {
			t.Fatalf("clusters on %s: %v, want none", foreign, got)
		}
	})
}
