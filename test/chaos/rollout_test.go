//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
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

// TestManifestRolloutResumesAfterKill is the manifest door's half: a
// JumpStartModel rolling out one replica at a time (capstan.dev/rollout-
// batch and -wait) on nodes with no room to spare, killed with SIGKILL
// while its first new replica serves beside an old one and the wait runs,
// comes back and finishes on the new revision with exactly its replicas:
// none lost, no orphan from either revision.
func TestManifestRolloutResumesAfterKill(t *testing.T) {
	srv := newServer(t, capstanBinary(t), t.TempDir())
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	c := newClients(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 2 // the default cluster's two ml.g5.12xlarge nodes, one replica each
	doc := func(revision string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata:
  name: mroll
  namespace: default
  annotations: {capstan.dev/rollout-batch: "1", capstan.dev/rollout-wait: 5s}
spec:
  sageMakerEndpoint: {name: mroll}
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.12xlarge}
  replicas: %d
  environmentVariables: [{name: REVISION, value: %q}]
`, n, revision))
	}
	if _, err := c.do(ctx, http.MethodPut, manifestBase+"mroll", doc("one")); err != nil {
		t.Fatalf("apply: %v", err)
	}
	waitRollout(ctx, t, c, ".r1.", n, time.Minute)
	if _, err := c.do(ctx, http.MethodPut, manifestBase+"mroll", doc("two")); err != nil {
		t.Fatalf("apply the new revision: %v", err)
	}
	// Kill once a new replica serves beside an old one, within the wait.
	deadline := time.Now().Add(time.Minute)
	for {
		reps, ready := manifestReplicas(ctx, t, c)
		revs := map[string]int{}
		for _, id := range reps {
			revs[revisionOf(id)]++
		}
		if revs["r2"] == 1 && revs["r1"] == 1 && ready == n {
			break
		}
		if revs["r1"] == 0 {
			t.Fatalf("the rollout finished before the kill (replicas %v); slow it down", reps)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new replica served beside an old one within a minute: %v, %d ready", reps, ready)
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv.kill()
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	waitRollout(ctx, t, c, ".r2.", n, 2*time.Minute)
	if left := orphans(ctx, srv.dataDir, srv.pid(), 10*time.Second); len(left) > 0 {
		t.Fatalf("engines not run by the live server: %v", left)
	}
	if got := len(engines(srv.dataDir)); got != n {
		t.Fatalf("%d engine processes run, want the deployment's %d", got, n)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.invoke(ctx, "mroll"))
}

// waitRollout waits until mroll is DeploymentComplete with want replicas,
// every one of them of the revision whose ids hold rev (".r2.").
func waitRollout(ctx context.Context, t *testing.T, c *clients, rev string, want int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		o, err := c.getJSM(ctx, "mroll")
		reps, ready := manifestReplicas(ctx, t, c)
		all := len(reps) == want
		for _, id := range reps {
			all = all && strings.Contains(id, rev)
		}
		if err == nil && o != nil && o.Status.State == "DeploymentComplete" && ready == want && all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mroll not complete on %s within %v: %+v %v, replicas %v, %d ready", rev, bound, o, err, reps, ready)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// manifestReplicas reads mroll's replicas from the pods on the cluster's
// nodes, and its ready count from its status.
func manifestReplicas(ctx context.Context, t *testing.T, c *clients) (ids []string, ready int) {
	t.Helper()
	b, err := c.do(ctx, http.MethodGet, "/api/v1/namespaces/default/pods", nil)
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &pods); err != nil {
		t.Fatalf("decode pods: %v", err)
	}
	for _, p := range pods.Items {
		if id := p.Metadata.Labels["capstan.dev/replica"]; strings.HasPrefix(id, "jsm.default.mroll.") {
			ids = append(ids, id)
		}
	}
	b, err = c.do(ctx, http.MethodGet, manifestBase+"mroll", nil)
	if err != nil {
		t.Fatalf("get mroll: %v", err)
	}
	var o struct {
		Status struct {
			ReadyReplicas int `json:"readyReplicas"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("decode mroll: %v", err)
	}
	return ids, o.Status.ReadyReplicas
}

// revisionOf is "r2" of replica id "jsm.default.mroll.r2.0".
func revisionOf(id string) string {
	parts := strings.Split(id, ".")
	if len(parts) < 2 {
		return ""
	}
	return parts[len(parts)-2]
}
