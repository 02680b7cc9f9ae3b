package kubeapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/nodeapi"
)

func TestCorePod(t *testing.T) {
	node := nodeapi.NodeView{Node: hyperpod.Node{ID: "i-0abc"}, Name: "hyperpod-i-0abc"}
	for _, tt := range []struct {
		id                    string
		req                   cluster.Resources
		kind, ns, owner, name string
		resource              string
		count                 int64
	}{
		{"jsm.team-a.chat.r2.1", cluster.Resources{GPUs: 2, MilliCPU: 4000}, "JumpStartModel", "team-a", "chat", "jsm.team-a.chat.r2.1", "nvidia.com/gpu", 2},
		{"iec.default.qwen.r1.0", cluster.Resources{MIGProfile: "3g.40gb"}, "InferenceEndpointConfig", "default", "qwen", "iec.default.qwen.r1.0", "nvidia.com/mig-3g.40gb", 1},
		{"space:lab/My_Notebook", cluster.Resources{MilliCPU: 1000}, "Workspace", "lab", "My_Notebook", "space-lab-my-notebook", "cpu", 1},
		{"other", cluster.Resources{}, "", "default", "other", "other", "", 0},
	} {
		p := corePod(node, cluster.Placement{ReplicaID: tt.id, Request: tt.req})
		if p.Name != tt.name || p.Namespace != tt.ns || p.Labels[LabelOwnerKind] != tt.kind || p.Labels[LabelOwnerName] != tt.owner ||
			p.Spec.NodeName != "hyperpod-i-0abc" || p.Status.Phase != "Running" {
			t.Errorf("%s: pod %s/%s labels %v node %s phase %s", tt.id, p.Namespace, p.Name, p.Labels, p.Spec.NodeName, p.Status.Phase)
		}
		if tt.resource == "" {
			continue
		}
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(tt.resource)]
		if got.Value() != tt.count {
			t.Errorf("%s: %s request %s, want %d", tt.id, tt.resource, got.String(), tt.count)
		}
	}
}
