package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// serverNow reads GET /_capstan/clock, as `capstan clock now` does.
func (p *proc) serverNow(t *testing.T) time.Time {
	t.Helper()
	resp, err := http.Get(p.url + "/_capstan/clock")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Now string `json:"now"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /_capstan/clock: %s %v", resp.Status, err)
	}
	now, err := time.Parse(time.RFC3339, out.Now)
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// advance runs `capstan clock advance d` against p.
func (p *proc) advance(t *testing.T, d time.Duration) {
	t.Helper()
	out, err := exec.Command(testutil.CapstanBinary(t), "clock", "advance", d.String(), "--server", p.url).CombinedOutput()
	if err != nil {
		t.Fatalf("capstan clock advance %s: %v\n%s", d, err, out)
	}
}

func (p *proc) planStatus(t *testing.T, name string) smtypes.TrainingPlanStatus {
	t.Helper()
	d, err := p.sm.DescribeTrainingPlan(context.Background(), &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return d.Status
}

func (p *proc) buyPlan(t *testing.T, name string, hours int64, after time.Time) string {
	t.Helper()
	ctx := context.Background()
	s, err := p.sm.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
		TargetResources: []smtypes.SageMakerResourceName{"endpoint"}, InstanceType: "ml.p5.48xlarge",
		InstanceCount: aws.Int32(1), DurationHours: aws.Int64(hours), StartTimeAfter: aws.Time(after),
		EndTimeBefore: aws.Time(after.Add(30 * 24 * time.Hour))})
	if err != nil || len(s.TrainingPlanOfferings) == 0 {
		t.Fatalf("search: %+v %v", s, err)
	}
	out, err := p.sm.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name),
		TrainingPlanOfferingId: s.TrainingPlanOfferings[0].TrainingPlanOfferingId})
	if err != nil {
		t.Fatalf("create plan %s: %v", name, err)
	}
	return aws.ToString(out.TrainingPlanArn)
}

// TestE2EDevClockSurvivesKill9 lives through a plan's expiry on the dev
// clock, kills the server with SIGKILL and restarts it on the same data
// directory: the server's time is not earlier than before the kill, the
// expired plan stays expired, the plan that started stays started, and the
// endpoint that failed with its plan stays failed.
func TestE2EDevClockSurvivesKill9(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--dev-clock")
	ctx := context.Background()
	start := p.serverNow(t)
	planA := p.buyPlan(t, "plan-a", 24, start.Add(time.Hour))
	p.buyPlan(t, "plan-b", 168, start.Add(100*time.Hour))

	if _, err := p.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("m1"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "llama-3.1-8b"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("cfg-a"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m1"),
			InstanceType: "ml.p5.48xlarge", InitialInstanceCount: aws.Int32(1),
			CapacityReservationConfig: &smtypes.ProductionVariantCapacityReservationConfig{
				CapacityReservationPreference: "capacity-reservations-only", MlReservationArn: aws.String(planA)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("ep-a"), EndpointConfigName: aws.String("cfg-a")}); err != nil {
		t.Fatal(err)
	}
	p.advance(t, 2*time.Hour)
	p.wait(t, "ep-a", smtypes.EndpointStatusInService, 60*time.Second)
	if a, b := p.planStatus(t, "plan-a"), p.planStatus(t, "plan-b"); a != smtypes.TrainingPlanStatusActive || b != smtypes.TrainingPlanStatusScheduled {
		t.Fatalf("after 2h: plan-a %s, plan-b %s; want Active, Scheduled", a, b)
	}

	// 121h in all: plan-a (24h from about 1h) is over, plan-b (from about 100h) runs.
	p.advance(t, 119*time.Hour)
	failed := waitEndpointFailed(t, p, "ep-a")
	before := p.serverNow(t)
	if got := before.Sub(start); got < 121*time.Hour {
		t.Fatalf("the clock moved %s, want at least 121h", got)
	}
	_ = p.p.Cmd.Process.Kill()
	_ = p.p.Cmd.Wait()

	p2 := startServe(t, dir, "--dev-clock")
	if after := p2.serverNow(t); after.Before(before) {
		t.Fatalf("after kill -9 and restart the server reads %s, earlier than %s before it", after, before)
	}
	if a, b := p2.planStatus(t, "plan-a"), p2.planStatus(t, "plan-b"); a != smtypes.TrainingPlanStatusExpired || b != smtypes.TrainingPlanStatusActive {
		t.Fatalf("after restart: plan-a %s, plan-b %s; want Expired, Active", a, b)
	}
	// Give the restarted controllers a moment to act on a clock gone back.
	time.Sleep(500 * time.Millisecond)
	d, err := p2.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("ep-a")})
	if err != nil || d.EndpointStatus != smtypes.EndpointStatusFailed || aws.ToString(d.FailureReason) != failed {
		t.Fatalf("after restart ep-a is %s (%q), want Failed (%q): %v", d.EndpointStatus, aws.ToString(d.FailureReason), failed, err)
	}
	_ = p2.p.Cmd.Process.Kill()
	_ = p2.p.Cmd.Wait()

	// On the wall clock this data directory's time would go back: refused.
	out, err := exec.Command(testutil.CapstanBinary(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "start capstan serve with --dev-clock") {
		t.Fatalf("serve without --dev-clock on an advanced data dir: %v\n%s", err, out)
	}
}

// waitEndpointFailed waits for name to fail and returns its FailureReason.
func waitEndpointFailed(t *testing.T, p *proc, name string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := p.sm.DescribeEndpoint(context.Background(), &sm.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err == nil && d.EndpointStatus == smtypes.EndpointStatusFailed {
			return aws.ToString(d.FailureReason)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not fail after its plan expired: %+v %v", name, d, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
