package deployment

import (
	"testing"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// TestCPUInstanceGroup: an IEC on a CPU-only instance type, placed on a
// cluster group of that type, asks no GPU and starts its engine on the
// type's CPU device (the instance type's own name) with tensor parallel 1.
func TestCPUInstanceGroup(t *testing.T) {
	h := newHarness(t, withGroups(cluster.InstanceGroup{Name: "c5-2xlarge", InstanceType: "ml.c5.2xlarge", Count: 1}))
	h.apply(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: tiny}
spec:
  modelName: qwen2.5-0.5b
  instanceType: ml.c5.2xlarge
  replicas: 2
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: qwen2.5-0.5b}
  worker:
    image: capstan/sim
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: model-weights}
    resources: {requests: {cpu: "3", memory: 6Gi}}
`)
	h.reconcile(Key(manifest.KindInferenceEndpointConfig, "default", "tiny"))
	starts := h.rt.Starts()
	if len(starts) != 2 {
		t.Fatalf("started %d replicas, want 2 (3 of 8 vCPUs each): %+v", len(starts), starts)
	}
	for _, s := range starts {
		if s.GPU != "ml.c5.2xlarge" || s.TensorParallel != 1 || s.MIGProfile != "" {
			t.Errorf("replica spec %+v: want GPU ml.c5.2xlarge (the CPU device), TP 1", s)
		}
	}
	if st := h.get(manifest.KindInferenceEndpointConfig, "tiny").GetStatus(); st.ReadyReplicas != 2 {
		t.Errorf("status %+v", st)
	}
}
