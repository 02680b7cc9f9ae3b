package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/nodeapi"
)

// Labels and annotations capstan's nodes carry as core/v1 Nodes.
const (
	LabelInstanceGroup = "sagemaker.amazonaws.com/instance-group-name"
	LabelCluster       = "capstan.dev/cluster"
	LabelMIGConfig     = "nvidia.com/mig.config"
	// AnnotationAllocated is what the node's replicas hold: whole GPUs, MIG
	// slices by profile, CPU and memory (a Kubernetes node reports
	// capacity; its pods say what is used).
	AnnotationAllocated = "capstan.dev/allocated"
	// AnnotationStatus is the HyperPod node status (Running, Pending,
	// ShuttingDown, …).
	AnnotationStatus = "capstan.dev/status"
)

// nodeColumns are the columns of `kubectl get nodes`: what placement
// looks at.
var nodeColumns = []column{
	{Name: "Status", Type: "string", JSONPath: `.metadata.annotations.capstan\.dev/status`, Description: "HyperPod node status"},
	{Name: "Instance Type", Type: "string", JSONPath: `.metadata.labels.node\.kubernetes\.io/instance-type`},
	{Name: "Capacity Type", Type: "string", JSONPath: `.metadata.labels.karpenter\.sh/capacity-type`},
	{Name: "GPUs", Type: "string", JSONPath: `.status.capacity.nvidia\.com/gpu`, Description: "whole GPUs (not cut into MIG slices)"},
	{Name: "Allocated", Type: "string", JSONPath: `.metadata.annotations.capstan\.dev/allocated`, Priority: 1},
	{Name: "Cluster", Type: "string", JSONPath: `.metadata.labels.capstan\.dev/cluster`, Priority: 1},
	{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
}

// nodeList reads capstan's cluster nodes (Options.NodesPath) as a core/v1
// NodeList, as generic JSON.
func (h *Handler) nodeList(r *http.Request) (map[string]any, error) {
	views, err := h.nodeViews(r)
	if err != nil {
		return nil, err
	}
	l := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: []corev1.Node{}}
	for _, v := range views {
		l.Items = append(l.Items, coreNode(v))
	}
	return asJSON(&l)
}

// nodeViews reads capstan's cluster nodes (Options.NodesPath; none when it
// is unset).
func (h *Handler) nodeViews(r *http.Request) ([]nodeapi.NodeView, error) {
	if h.o.NodesPath == "" {
		return nil, nil
	}
	code, body, _ := h.call(r, h.o.NodesPath)
	if code != http.StatusOK {
		return nil, apierrors.NewInternalError(fmt.Errorf("read the cluster nodes: HTTP %d", code))
	}
	var views struct {
		Items []nodeapi.NodeView `json:"items"`
	}
	if err := json.Unmarshal(body, &views); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("read the cluster nodes: %w", err))
	}
	return views.Items, nil
}

// asJSON is a typed list as generic JSON.
func asJSON(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decode(raw)
}

// coreNode is a cluster node as a core/v1 Node: labels for its instance
// type, capacity type, zone, group and MIG layout; capacity in whole GPUs,
// MIG slices by profile, CPU and memory; Ready while it runs; cordoned as
// unschedulable.
func coreNode(v nodeapi.NodeView) corev1.Node {
	n := corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: v.Name, UID: types.UID("capstan-node-" + strings.TrimPrefix(v.ID, "i-")), CreationTimestamp: metav1.NewTime(v.Launched),
			Labels: map[string]string{
				corev1.LabelInstanceTypeStable: v.InstanceType,
				corev1.LabelTopologyZone:       v.Zone,
				corev1.LabelHostname:           v.Name,
				"karpenter.sh/capacity-type":   string(v.CapacityType),
				LabelInstanceGroup:             v.Group,
				LabelCluster:                   v.Cluster,
			},
			Annotations: map[string]string{AnnotationStatus: string(v.Status)}},
		Spec: corev1.NodeSpec{Unschedulable: v.Cordoned, ProviderID: "aws:///" + v.Zone + "/" + v.ID}}
	if v.MIGLayout != "" {
		n.Labels[LabelMIGConfig] = v.MIGLayout
	}
	whole := v.Capacity.GPUs
	slices, held := map[string]int64{}, map[string]int64{}
	for _, p := range v.Partitions {
		if len(p) > 0 {
			whole--
		}
	}
	for _, s := range v.Slices {
		slices[s.Profile]++
		if s.ReplicaID != "" {
			held[s.Profile]++
		}
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(v.Capacity.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(v.Capacity.MemoryBytes, resource.BinarySI),
	}
	if v.Capacity.GPUs > 0 {
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(max(whole, 0)), resource.DecimalSI)
	}
	alloc := []string{fmt.Sprintf("nvidia.com/gpu=%d", v.Allocated.GPUs)}
	profiles := make([]string, 0, len(slices))
	for p := range slices {
		profiles = append(profiles, p)
	}
	sort.Strings(profiles)
	for _, p := range profiles {
		capacity[corev1.ResourceName("nvidia.com/mig-"+p)] = *resource.NewQuantity(slices[p], resource.DecimalSI)
		alloc = append(alloc, fmt.Sprintf("nvidia.com/mig-%s=%d", p, held[p]))
	}
	alloc = append(alloc, "cpu="+resource.NewMilliQuantity(v.Allocated.MilliCPU, resource.DecimalSI).String(),
		"memory="+resource.NewQuantity(v.Allocated.MemoryBytes, resource.BinarySI).String())
	n.Annotations[AnnotationAllocated] = strings.Join(alloc, ",")
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: string(v.Status), Message: v.Message}
	if v.Status == hyperpod.NodeRunning {
		ready.Status, ready.Reason = corev1.ConditionTrue, "Running"
	}
	if !v.Ready.IsZero() {
		ready.LastTransitionTime = metav1.NewTime(v.Ready)
	}
	n.Status.Conditions = []corev1.NodeCondition{ready}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: v.Name}}
	return n
}

// nodes answers /api/v1/nodes and /api/v1/nodes/{name}: a list (filtered,
// as a table when asked), a watch, or one node.
func (h *Handler) nodes(w http.ResponseWriter, r *http.Request, name string) {
	h.serveCore(w, r, "nodes", "", name, h.nodeList)
}

// serveCore answers a read-only core/v1 collection that list reads: the
// list (in namespace ns when set; filtered, paged, as a table when asked),
// a watch, or the object name. extraFields are the field labels it selects
// on beside name and namespace.
func (h *Handler) serveCore(w http.ResponseWriter, r *http.Request, resource, ns, name string, list func(*http.Request) (map[string]any, error), extraFields ...string) {
	q, err := readQuery(r, extraFields...)
	if err != nil {
		writeStatus(w, err)
		return
	}
	read := func() ([]any, map[string]any, error) {
		l, err := list(r)
		if err != nil {
			return nil, nil, err
		}
		items, _ := listItems(l)
		var kept []any
		for _, it := range items {
			md := metadataOf(it)
			if n, _ := md["name"].(string); name != "" && n != name {
				continue
			}
			if n, _ := md["namespace"].(string); ns != "" && n != ns {
				continue
			}
			kept = append(kept, it)
		}
		return q.filter(kept), l, nil
	}
	if q.watch {
		h.watchWith(w, r, q, read)
		return
	}
	items, l, err := read()
	if err != nil {
		writeStatus(w, err)
		return
	}
	var v map[string]any
	if name != "" {
		if len(items) == 0 {
			writeStatus(w, apierrors.NewNotFound(corev1.Resource(resource), name))
			return
		}
		v = items[0].(map[string]any)
	} else {
		q.pageList(l, items)
		v = l
	}
	if q.table != "" {
		writeJSON(w, http.StatusOK, h.table(v, q))
		return
	}
	writeJSON(w, http.StatusOK, v)
}
