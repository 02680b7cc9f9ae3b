package operator

import (
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"

	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestBuildKVEventsPort: a kvaware manifest's pods expose the KV events
// port (named, so the gateway in the cluster finds it in the EndpointSlices)
// and a JumpStartModel's engine is told to publish there; other strategies
// get neither.
func TestBuildKVEventsPort(t *testing.T) {
	const jsm = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: j}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.12xlarge}
`
	tests := []struct {
		name     string
		yaml     string
		wantPort bool
		wantArg  bool
	}{
		{"IEC kvaware", iecBase + "  invocationEndpoint: v1/completions\n  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n", true, false},
		{"JSM kvaware", jsm + "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n", true, true},
		{"IEC prefixaware", iecBase + "  intelligentRoutingSpec: {enabled: true, routingStrategy: prefixaware}\n", false, false},
		{"JSM kvaware but disabled", jsm + "  intelligentRoutingSpec: {enabled: false, routingStrategy: kvaware}\n", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Build(load(t, tc.yaml), BuildOptions{ModelImage: "capstan:test"})
			if err != nil {
				t.Fatal(err)
			}
			c := d.Deployment.Spec.Template.Spec.Containers[0]
			cp := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
				return p.Name == apiv1.KVEventsPortName && p.ContainerPort == KVEventsPort
			})
			sp := slices.ContainsFunc(d.Service.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.Name == apiv1.KVEventsPortName && p.Port == KVEventsPort && p.TargetPort.StrVal == apiv1.KVEventsPortName
			})
			arg := slices.Contains(c.Args, "--kv-events=tcp://*:5557")
			if cp != tc.wantPort || sp != tc.wantPort || arg != tc.wantArg {
				t.Fatalf("container port %v, service port %v, --kv-events arg %v; want port %v arg %v (ports %+v args %v)",
					cp, sp, arg, tc.wantPort, tc.wantArg, c.Ports, c.Args)
			}
		})
	}
}
