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

// TestNoNodeMessage: a replica no node of its type takes is told what is
// true of the groups of that type, and "no instance group" only when there
// is none.
func TestNoNodeMessage(t *testing.T) {
	const p5 = "ml.p5.48xlarge"
	whole := cluster.Resources{GPUs: 8}
	mig := cluster.Resources{MIGProfile: "1g.18gb"}
	// takes: whole GPUs on an uncut node, 1g.18gb on all-1g.18gb only.
	takes := func(req cluster.Resources) func(string) bool {
		return func(layout string) bool {
			if req.MIGProfile == "" {
				return layout == "" || layout == "all-disabled"
			}
			return layout == "all-1g.18gb"
		}
	}
	zero := []GroupInfo{{Name: "p5"}}
	tests := []struct {
		name       string
		req        cluster.Resources
		groups     []GroupInfo
		autoscaled bool
		want       string
	}{
		{"no group of the type", whole, nil, false, "no instance group of type ml.p5.48xlarge in the cluster"},
		{"scaled to zero, autoscaling on", whole, zero, true,
			"instance group p5 (ml.p5.48xlarge) has 0 nodes: waiting for the node autoscaler to launch one"},
		{"scaled to zero, autoscaling off", whole, zero, false,
			"instance group p5 (ml.p5.48xlarge) has 0 nodes, and cluster c1 does not autoscale, so nothing will add one: " +
				"raise InstanceCount (aws sagemaker update-cluster) or enable autoscaling (update-cluster --auto-scaling)"},
		{"two groups scaled to zero", whole, []GroupInfo{{Name: "a"}, {Name: "b", MIGLayout: "all-disabled"}}, true,
			"instance groups a, b (ml.p5.48xlarge) have 0 nodes: waiting for the node autoscaler to launch one"},
		{"a MIG slice on a group scaled to zero: the autoscaler launches none", mig, []GroupInfo{{Name: "p5", MIGLayout: "all-1g.18gb"}}, true,
			"instance group p5 (ml.p5.48xlarge) has 0 nodes, and the node autoscaler launches no node for a MIG slice: " +
				"raise InstanceCount (aws sagemaker update-cluster)"},
		{"the layout lacks the profile", mig, []GroupInfo{{Name: "p5", MIGLayout: "all-7g.141gb"}, {Name: "p5w"}}, true,
			`no instance group of type ml.p5.48xlarge has MIG 1g.18gb slices (p5: MIG all-7g.141gb, p5w: whole GPUs): ` +
				`set a MIG layout with them (aws sagemaker update-cluster, InstanceGroups[].KubernetesConfig.Labels "nvidia.com/mig.config")`},
		{"whole GPUs on a cut group", whole, []GroupInfo{{Name: "p5", MIGLayout: "all-1g.18gb"}}, true,
			`no instance group of type ml.p5.48xlarge has whole GPUs (p5: MIG all-1g.18gb): set its MIG layout to all-disabled ` +
				`(aws sagemaker update-cluster, InstanceGroups[].KubernetesConfig.Labels "nvidia.com/mig.config")`},
		{"only the group that fits counts", mig, []GroupInfo{{Name: "other", MIGLayout: "all-7g.141gb"},
			{Name: "p5", MIGLayout: "all-1g.18gb", Target: 2}}, false,
			"instance group p5 (ml.p5.48xlarge) has 0 of 2 nodes running: waiting for them to launch"},
		{"cordoned while others launch", whole, []GroupInfo{{Name: "p5", Target: 3, Running: 1}}, false,
			"instance group p5 (ml.p5.48xlarge) has 1 of 3 nodes running (cordoned): waiting for the rest to launch"},
		{"every node cordoned", whole, []GroupInfo{{Name: "p5", Target: 1, Running: 1}}, true,
			"instance group p5 (ml.p5.48xlarge) has only cordoned nodes (1, leaving): waiting for the node autoscaler to launch one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := noNodeMessage(noNode{cluster: "c1", instanceType: p5, req: tc.req, groups: tc.groups, takes: takes(tc.req), autoscaled: tc.autoscaled})
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
