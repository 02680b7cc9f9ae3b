package kubeapi

import (
	"net/http"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/nodeapi"
)

// Labels capstan's replicas carry as core/v1 Pods.
const (
	LabelReplica   = "capstan.dev/replica"
	LabelOwnerKind = "capstan.dev/owner-kind"
	LabelOwnerName = "capstan.dev/owner-name"
)

// podColumns are the columns of `kubectl get pods`.
var podColumns = []column{
	{Name: "Status", Type: "string", JSONPath: ".status.phase"},
	{Name: "Node", Type: "string", JSONPath: ".spec.nodeName"},
	{Name: "Owner", Type: "string", JSONPath: `.metadata.labels.capstan\.dev/owner-name`},
	{Name: "Replica", Type: "string", JSONPath: `.metadata.labels.capstan\.dev/replica`, Priority: 1},
	{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
}

// podFields are the field labels pods select on beside name and namespace:
// what `kubectl describe node` asks for (its non-terminated pods).
var podFields = []string{"spec.nodeName", "status.phase"}

// pods answers /api/v1/pods, /api/v1/namespaces/{ns}/pods and
// …/pods/{name}: what runs on capstan's cluster nodes (manifest replicas
// and spaces) as read-only core/v1 Pods, so `kubectl describe node` shows
// them with what they request.
func (h *Handler) pods(w http.ResponseWriter, r *http.Request, ns, name string) {
	h.serveCore(w, r, "pods", ns, name, h.podList, podFields...)
}

// podList reads every placement on the cluster nodes as a core/v1 PodList.
func (h *Handler) podList(r *http.Request) (map[string]any, error) {
	views, err := h.nodeViews(r)
	if err != nil {
		return nil, err
	}
	l := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{}}
	for _, v := range views {
		for _, p := range v.Placed {
			l.Items = append(l.Items, corePod(v, p))
		}
	}
	return asJSON(&l)
}

// invalidPodName is what a replica id may hold that a pod name may not.
var invalidPodName = regexp.MustCompile(`[^a-z0-9.-]+`)

// corePod is one placement as a Running core/v1 Pod on its node: named
// after the replica, in its owner's namespace, with one container that
// requests (and is limited to) what the replica holds.
func corePod(v nodeapi.NodeView, p cluster.Placement) corev1.Pod {
	kind, ns, owner := ownerOf(p.ReplicaID)
	name := strings.Trim(invalidPodName.ReplaceAllString(strings.ToLower(p.ReplicaID), "-"), "-.")
	if len(name) > 253 {
		name = name[:253]
	}
	req := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(p.Request.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(p.Request.MemoryBytes, resource.BinarySI),
	}
	switch {
	case p.Request.MIGProfile != "":
		req[corev1.ResourceName("nvidia.com/mig-"+p.Request.MIGProfile)] = *resource.NewQuantity(1, resource.DecimalSI)
	case p.Request.GPUs > 0:
		req["nvidia.com/gpu"] = *resource.NewQuantity(int64(p.Request.GPUs), resource.DecimalSI)
	}
	since := metav1.NewTime(v.Launched)
	pod := corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("capstan-replica-" + name), CreationTimestamp: since,
			Labels: map[string]string{LabelReplica: name, LabelOwnerKind: kind, LabelOwnerName: owner}},
		Spec: corev1.PodSpec{NodeName: v.Name, Containers: []corev1.Container{{Name: "replica",
			Resources: corev1.ResourceRequirements{Requests: req, Limits: req.DeepCopy()}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: v.Name,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}
	return pod
}

// ownerOf reads a placement id: a manifest replica
// ("jsm.<namespace>.<name>.r<revision>.<index>") or a space
// ("space:<namespace>/<name>"). Anything else is in "default", owned by
// itself.
func ownerOf(id string) (kind, namespace, name string) {
	if rest, ok := strings.CutPrefix(id, "space:"); ok {
		if ns, n, ok := strings.Cut(rest, "/"); ok {
			return "Workspace", ns, n
		}
	}
	parts := strings.Split(id, ".")
	if len(parts) >= 5 {
		switch parts[0] {
		case "jsm":
			return "JumpStartModel", parts[1], parts[2]
		case "iec":
			return "InferenceEndpointConfig", parts[1], parts[2]
		}
	}
	return "", "default", id
}
