package kube

import (
	"fmt"
	"testing"

	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// TestScaleTarget: activation scales the object holding the route, of its
// kind, to its autoscaling minimum, at least 1.
func TestScaleTarget(t *testing.T) {
	for _, tt := range []struct {
		name     string
		obj      apiv1.Object
		kind     string
		replicas int32
	}{
		{"no autoscaling: 1", decodeIEC(t, iecYAML("a", "  replicas: 0\n")), "*v1.InferenceEndpointConfig", 1},
		{"scale to zero (minimum 0): 1", decodeIEC(t, iecYAML("b", "  autoScalingSpec: {minReplicaCount: 0, maxReplicaCount: 4}\n")), "*v1.InferenceEndpointConfig", 1},
		{"minimum 3: 3", decodeIEC(t, iecYAML("c", "  autoScalingSpec: {minReplicaCount: 3, maxReplicaCount: 4}\n")), "*v1.InferenceEndpointConfig", 3},
		{"JumpStartModel", decodeJSM(t, "d", ""), "*v1.JumpStartModel", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := targetOf(tt.obj)
			if k := fmt.Sprintf("%T", got.obj); k != tt.kind || got.obj.GetNamespace() != "default" || got.obj.GetName() != tt.obj.GetName() || got.replicas != tt.replicas {
				t.Fatalf("target %s %s/%s ×%d, want %s default/%s ×%d", k, got.obj.GetNamespace(), got.obj.GetName(), got.replicas, tt.kind, tt.obj.GetName(), tt.replicas)
			}
		})
	}
}
