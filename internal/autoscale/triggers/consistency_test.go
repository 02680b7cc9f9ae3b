package triggers

import (
	"fmt"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// TestValidationAgreesWithBuild: every namespace/metric/statistic that
// manifest validation accepts, Build accepts, and vice versa — so a manifest
// that applies never fails later in the deployment controller.
func TestValidationAgreesWithBuild(t *testing.T) {
	names := []string{
		// SageMaker names capstan does not record, and nonsense.
		"ModelSetupTime", "CPUUtilization", "GPUUtilization", "queuedepth", "Bogus",
	}
	for m := range metrics {
		names = append(names, string(m))
	}
	stats := []string{"Sum", "SampleCount", "Average", "Minimum", "Maximum", "p50", "p99.9"}
	for _, ns := range []string{NamespaceSageMaker, NamespaceCapstan, "AWS/SQS"} {
		for _, name := range names {
			for _, stat := range stats {
				doc := fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: ep}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.xlarge}
  autoScalingSpec:
    cloudWatchTrigger: {namespace: %q, metricName: %q, metricStat: %q, targetValue: 1}
`, ns, name, stat)
				objs, loadErr := manifest.Load([]byte(doc))
				src, clk := newFakes()
				spec := &manifest.AutoScalingSpec{CloudWatchTrigger: &manifest.CloudWatchTrigger{Namespace: ns, MetricName: name, MetricStat: stat, TargetValue: ptr(1.0)}}
				_, _, buildErr := Build(spec, Env{Endpoint: "ep", Source: src, Clock: clk})
				if (loadErr == nil) != (buildErr == nil) {
					t.Errorf("%s %s %s: validation error %v, Build error %v", ns, name, stat, loadErr, buildErr)
				}
				if loadErr == nil {
					spec := objs[0].(*manifest.JumpStartModel).Spec.AutoScalingSpec
					if _, _, err := Build(spec, Env{Endpoint: "ep", Source: src, Clock: clk}); err != nil {
						t.Errorf("%s %s %s: Build of the loaded spec: %v", ns, name, stat, err)
					}
				}
			}
		}
	}
}
