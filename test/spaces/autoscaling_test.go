package spaces_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestNodeAutoscaling: a space is a workload like a replica for the
// Karpenter-style autoscaler. On a cluster scaled to zero, a space that
// asks for a GPU is pending, a node is launched for it, the space runs
// there; the node stays while the space runs; deleted, the space leaves
// an empty node, which is consolidated away.
func TestNodeAutoscaling(t *testing.T) {
	s := startServer(t, `cluster:
  launchTime: 2s
  spot: {meanTimeToInterruption: -1s}
  instanceGroups:
    - {name: g5, instanceType: ml.g5.xlarge, count: 0}
`)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), Retryer: testutil.AWSRetryer}
	client := sm.NewFromConfig(cfg, func(o *sm.Options) { o.BaseEndpoint = aws.String(s.URL) })
	if _, err := client.UpdateCluster(context.Background(), &sm.UpdateClusterInput{ClusterName: aws.String("ml-cluster"),
		AutoScaling: &smtypes.ClusterAutoScalingConfig{Mode: smtypes.ClusterAutoScalingModeEnable, AutoScalerType: smtypes.ClusterAutoScalerTypeKarpenter},
		ClusterRole: aws.String("arn:aws:iam::000000000000:role/capstan")}); err != nil {
		t.Fatalf("update-cluster --auto-scaling: %v", err)
	}
	s.apply(`apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: gpu}
spec:
  displayName: gpu
  resources: {requests: {nvidia.com/gpu: 1}}
`)
	w := s.waitPhase("gpu", "Running", 120*time.Second)
	if w.Status.InstanceType != "ml.g5.xlarge" || w.Status.GPUs != 1 {
		t.Fatalf("running on %q with %d GPUs", w.Status.InstanceType, w.Status.GPUs)
	}
	out := s.mustCapstan("describe", "ws", "gpu")
	if !strings.Contains(out, "FailedScheduling") {
		t.Errorf("the space was never pending before its node came:\n%s", out)
	}
	if got := s.execute("gpu", `import os; print("gpus", os.environ["CAPSTAN_GPUS"], os.environ["CAPSTAN_GPU_MODEL"])`); !strings.Contains(got, "gpus 1") {
		t.Errorf("the cell printed %q", got)
	}
	// The node is in use: time passing does not consolidate it.
	s.mustCapstan("clock", "advance", "30m")
	time.Sleep(3 * time.Second)
	if after, _ := s.workspaceOf("gpu"); after.Status.Phase != "Running" || after.Status.Node != w.Status.Node {
		t.Fatalf("after 30 minutes: phase %s on node %q, was on %q", after.Status.Phase, after.Status.Node, w.Status.Node)
	}
	if out := s.mustCapstan("get", "nodes"); strings.Count(out, "ml.g5.xlarge") != 1 {
		t.Fatalf("want the one node the space runs on:\n%s", out)
	}
	s.mustCapstan("delete", "ws", "gpu")
	testutil.Poller{Timeout: 60 * time.Second, MaxInterval: slowPoll}.Eventually(t, "the empty node to be consolidated", func() bool {
		out, _ := s.capstan("get", "nodes")
		return !strings.Contains(out, "Running")
	})
}
