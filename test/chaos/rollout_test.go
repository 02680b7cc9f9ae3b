//go:build linux

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestRolloutResumesAfterKill: `capstan serve` killed with SIGKILL in the
// middle of a rolling update comes back, finishes the update on the new
// configuration, and runs exactly the endpoint's replicas: none lost, no
// orphan left from either revision.
func TestRolloutResumesAfterKill(t *testing.T) {
	srv := newServer(t, capstanBinary(t), t.TempDir())
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	c := newClients(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for _, m := range [][2]string{{"m1", "meta-llama/Llama-3.1-8B-Instruct"}, {"m2", "Qwen/Qwen2.5-7B-Instruct"}} {
		_, err := c.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(m[0]),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": m[1]}}}, c.at())
		must("CreateModel "+m[0], err)
	}
	const n = 3
	for i, m := range []string{"m1", "m2"} {
		_, err := c.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(fmt.Sprintf("c%d", i+1)),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(m),
				InstanceType: smtypes.ProductionVariantInstanceTypeMlG5Xlarge, InitialInstanceCount: aws.Int32(n)}}}, c.at())
		must("CreateEndpointConfig", err)
	}
	_, err := c.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("roll"), EndpointConfigName: aws.String("c1")}, c.at())
	must("CreateEndpoint", err)
	waitStatus(ctx, t, c, smtypes.EndpointStatusInService, time.Minute)

	_, err = c.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("roll"), EndpointConfigName: aws.String("c2"),
		DeploymentConfig: &smtypes.DeploymentConfig{RollingUpdatePolicy: &smtypes.RollingUpdatePolicy{
			MaximumBatchSize:      &smtypes.CapacitySize{Type: smtypes.CapacitySizeTypeInstanceCount, Value: aws.Int32(1)},
			WaitIntervalInSeconds: aws.Int32(1)}}}, c.at())
	must("UpdateEndpoint", err)
	// Kill once the first new replica serves and the old side is partly gone.
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("roll")}, c.at())
		must("DescribeEndpoint", err)
		if out.EndpointStatus != smtypes.EndpointStatusUpdating {
			t.Fatalf("the update ended (%s) before the kill; slow it down", out.EndpointStatus)
		}
		if p := out.PendingDeploymentSummary; p != nil && len(p.ProductionVariants) == 1 && aws.ToInt32(p.ProductionVariants[0].CurrentInstanceCount) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rolling update made no progress within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv.kill()
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	out := waitStatus(ctx, t, c, smtypes.EndpointStatusInService, 2*time.Minute)
	if aws.ToString(out.EndpointConfigName) != "c2" || out.FailureReason != nil {
		t.Fatalf("after the restart: config %s, failure %q", aws.ToString(out.EndpointConfigName), aws.ToString(out.FailureReason))
	}
	if v := out.ProductionVariants; len(v) != 1 || aws.ToInt32(v[0].CurrentInstanceCount) != n {
		t.Fatalf("variants after the restart: %+v", v)
	}
	if out.LastDeploymentConfig == nil || out.LastDeploymentConfig.RollingUpdatePolicy == nil {
		t.Fatal("DescribeEndpoint has no LastDeploymentConfig after the rolling update")
	}
	must("invoke", c.invoke(ctx, "roll"))
	if left := orphans(ctx, srv.dataDir, srv.pid(), 10*time.Second); len(left) > 0 {
		t.Fatalf("engines not run by the live server: %v", left)
	}
	if got := len(engines(srv.dataDir)); got != n {
		t.Fatalf("%d engine processes run, want the endpoint's %d", got, n)
	}
}

func waitStatus(ctx context.Context, t *testing.T, c *clients, want smtypes.EndpointStatus, bound time.Duration) *sm.DescribeEndpointOutput {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		out, err := c.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("roll")}, c.at())
		if err == nil && out.EndpointStatus == want {
			return out
		}
		if err == nil && out.EndpointStatus == smtypes.EndpointStatusFailed {
			t.Fatalf("endpoint failed: %s", aws.ToString(out.FailureReason))
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint not %s within %v (last: %v, %v)", want, bound, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
