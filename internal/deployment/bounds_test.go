package deployment

import (
	"math"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// TestDesiredIsCapped: whatever a stored record says (one written before
// the manifest caps, or a damaged one), the controller never aims for more
// than manifest.MaxReplicas replicas, nor fewer than zero.
func TestDesiredIsCapped(t *testing.T) {
	huge, neg := math.MaxInt, -5
	tests := []struct {
		name string
		rec  record
		p    plan
		want int
	}{
		{"spec replicas", record{}, plan{replicas: 3}, 3},
		{"spec replicas past the cap", record{}, plan{replicas: math.MaxInt32}, manifest.MaxReplicas},
		{"autoscaler count past the cap", record{Desired: &huge}, plan{autoscale: &manifest.AutoScalingSpec{}}, manifest.MaxReplicas},
		{"negative autoscaler count", record{Desired: &neg}, plan{autoscale: &manifest.AutoScalingSpec{}}, 0},
	}
	var c Controller
	for _, tt := range tests {
		if got := c.desired(&tt.rec, &tt.p); got != tt.want {
			t.Errorf("%s: desired = %d, want %d", tt.name, got, tt.want)
		}
	}
}
