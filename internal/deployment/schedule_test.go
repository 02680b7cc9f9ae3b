package deployment

import (
	"errors"
	"testing"

	"github.com/capstan-dev/capstan/internal/cluster"
)

func TestSchedulingMessage(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&cluster.UnschedulableError{InstanceType: "ml.p5.48xlarge"}, "no instance group of type ml.p5.48xlarge in the cluster"},
		{&cluster.UnschedulableError{InstanceType: "ml.g5.24xlarge", Nodes: 2, Short: []cluster.Shortfall{
			{Resource: cluster.ResourceGPU, Nodes: 2, Want: 8, MostFree: 4}}},
			"0/2 nodes are available: 2 Insufficient nvidia.com/gpu (want 8, most free 4)"},
		{&cluster.UnschedulableError{InstanceType: "ml.g5.24xlarge", Nodes: 2, Short: []cluster.Shortfall{
			{Resource: cluster.ResourceCPU, Nodes: 1, Want: 6500, MostFree: 90000},
			{Resource: cluster.ResourceMemory, Nodes: 1, Want: 30 << 30, MostFree: 374 << 30}}},
			"0/2 nodes are available: 1 Insufficient cpu (want 6500m, most free 90), 1 Insufficient memory (want 30Gi, most free 374Gi)"},
		{&cluster.UnschedulableError{InstanceType: "ml.p4d.24xlarge", Nodes: 1, Short: []cluster.Shortfall{
			{Resource: cluster.MIGResource("1g.5gb"), Nodes: 1, Want: 1, MostFree: 0}}},
			"0/1 nodes are available: 1 Insufficient nvidia.com/mig-1g.5gb (want 1, most free 0)"},
		{errors.New("cluster: negative request"), "cluster: negative request"},
	}
	for _, tc := range tests {
		if got := schedulingMessage(tc.err); got != tc.want {
			t.Errorf("schedulingMessage(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
