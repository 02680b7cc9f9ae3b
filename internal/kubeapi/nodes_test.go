package kubeapi

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/nodeapi"
)

// A cluster node as a core/v1 Node: whole GPUs apart from MIG slices, the
// slices by profile, what the replicas hold, Ready only while Running,
// unschedulable when cordoned.
func TestCoreNode(t *testing.T) {
	launched := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	v := nodeapi.NodeView{Node: hyperpod.Node{ID: "i-0123456789abcdef0", Cluster: "ml", Group: "p4d", InstanceType: "ml.p4d.24xlarge",
		CapacityType: "spot", Zone: "us-east-1a", Status: hyperpod.NodeRunning, Launched: launched, MIGLayout: "mixed"},
		Name:       "hyperpod-i-0123456789abcdef0",
		Capacity:   cluster.Resources{GPUs: 8, MilliCPU: 96000, MemoryBytes: 1152 << 30},
		Allocated:  cluster.Resources{GPUs: 2, MilliCPU: 12000, MemoryBytes: 60 << 30},
		Partitions: [][]string{{"3g.20gb", "3g.20gb"}, {"7g.40gb"}},
		Slices: []cluster.Slice{{GPU: 0, Profile: "3g.20gb", ReplicaID: "r1"}, {GPU: 0, Profile: "3g.20gb"},
			{GPU: 1, Profile: "7g.40gb", ReplicaID: "r2"}}}
	n := coreNode(v)
	q := func(name corev1.ResourceName) int64 { v := n.Status.Capacity[name]; return v.Value() }
	if q("nvidia.com/gpu") != 6 || q("nvidia.com/mig-3g.20gb") != 2 || q("nvidia.com/mig-7g.40gb") != 1 || q(corev1.ResourceCPU) != 96 {
		t.Fatalf("capacity %v", n.Status.Capacity)
	}
	if got, want := n.Annotations[AnnotationAllocated], "nvidia.com/gpu=2,nvidia.com/mig-3g.20gb=1,nvidia.com/mig-7g.40gb=1,cpu=12,memory=60Gi"; got != want {
		t.Fatalf("allocated %q, want %q", got, want)
	}
	if n.Labels[corev1.LabelInstanceTypeStable] != "ml.p4d.24xlarge" || n.Labels["karpenter.sh/capacity-type"] != "spot" ||
		n.Labels[LabelMIGConfig] != "mixed" || n.Labels[LabelInstanceGroup] != "p4d" || !n.CreationTimestamp.Time.Equal(launched) {
		t.Fatalf("labels %v, created %v", n.Labels, n.CreationTimestamp)
	}
	if c := n.Status.Conditions[0]; c.Type != corev1.NodeReady || c.Status != corev1.ConditionTrue || n.Spec.Unschedulable {
		t.Fatalf("a running node: %+v, unschedulable %v", c, n.Spec.Unschedulable)
	}
	v.Status, v.Cordoned = hyperpod.NodeShuttingDown, true
	n = coreNode(v)
	if c := n.Status.Conditions[0]; c.Status != corev1.ConditionFalse || c.Reason != string(hyperpod.NodeShuttingDown) || !n.Spec.Unschedulable {
		t.Fatalf("a node shutting down: %+v, unschedulable %v", c, n.Spec.Unschedulable)
	}
}
