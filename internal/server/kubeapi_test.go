package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/capstan-dev/capstan/internal/config"
)

var jsmResource = schema.GroupVersionResource{Group: "inference.sagemaker.aws.amazon.com", Version: "v1", Resource: "jumpstartmodels"}

func kubeJSM(name string, replicas int) string {
	return `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: ` + name + `, namespace: default, labels: {team: a}}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
  replicas: ` + strconv.Itoa(replicas) + "\n"
}

// putJSM applies a JumpStartModel through capstan's own PUT, with token
// as the bearer token.
func putJSM(t *testing.T, h *harness, token, name string, replicas int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, h.url+"/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/jumpstartmodels/"+name,
		strings.NewReader(kubeJSM(name, replicas)))
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("PUT %s: %d %s", name, resp.StatusCode, b.String())
	}
}

// client-go's discovery, dynamic and typed clients use capstan serve as
// they use a Kubernetes API server: versions and resources, lists with a
// resourceVersion, label and field selectors, a watch that sees an update
// and a deletion, tables with the CRD's printer columns, the object's
// events as core/v1 Events, create, update (a stale one conflicts), patch
// and the scale subresource. The admin token is the bearer token.
func TestKubernetesClients(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: testSecret}},
		AdminTokens: []string{testAdmin}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := &rest.Config{Host: h.url, BearerToken: testAdmin}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// Without the token, discovery is refused as the API server refuses it.
	if _, err := kubernetes.NewForConfigOrDie(&rest.Config{Host: h.url}).Discovery().ServerVersion(); !apierrors.IsUnauthorized(err) {
		t.Fatalf("version without a token: %v, want Unauthorized", err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil || v.Major != "1" || v.Minor == "" {
		t.Fatalf("server version %+v, %v", v, err)
	}
	_, lists, err := cs.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var jsm *metav1.APIResource
	for _, l := range lists {
		for i, r := range l.APIResources {
			if l.GroupVersion == jsmResource.GroupVersion().String() && r.Name == "jumpstartmodels" {
				jsm = &l.APIResources[i]
			}
		}
	}
	if jsm == nil || !slices.Contains(jsm.ShortNames, "jsm") || !slices.Contains(jsm.Verbs, "watch") || !jsm.Namespaced {
		t.Fatalf("jumpstartmodels in discovery: %+v", jsm)
	}
	// Aggregated discovery, which client-go asks for first: every group in
	// one document, subresources folded into their resources.
	res, err := cs.Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", discovery.AcceptV2).Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(res, &agg); err != nil || agg.Kind != "APIGroupDiscoveryList" {
		t.Fatalf("aggregated discovery: %v %.300s", err, res)
	}
	var subs []string
	groups := map[string]bool{}
	for _, g := range agg.Items {
		groups[g.Name] = true
		for _, r := range g.Versions[0].Resources {
			if r.Resource == "jumpstartmodels" {
				for _, s := range r.Subresources {
					subs = append(subs, s.Subresource)
				}
			}
		}
	}
	if !groups["workspace.jupyter.org"] || !slices.Equal(subs, []string{"status", "scale"}) {
		t.Fatalf("aggregated discovery: groups %v, jumpstartmodels subresources %v", groups, subs)
	}
	// OpenAPI v2, which client-go reads in protobuf: every kind's schema.
	doc, err := cs.Discovery().OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPI v2: %v", err)
	}
	var defs []string
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		defs = append(defs, d.GetName())
	}
	for _, want := range []string{"com.amazon.aws.sagemaker.inference.v1.JumpStartModel", "com.amazon.aws.sagemaker.inference.v1.InferenceEndpointConfig",
		"org.jupyter.workspace.v1alpha1.Workspace", "org.jupyter.workspace.v1alpha1.WorkspaceTemplate"} {
		if !slices.Contains(defs, want) {
			t.Errorf("OpenAPI v2 lacks %s: %v", want, defs)
		}
	}

	putJSM(t, h, testAdmin, "alpha", 1)
	putJSM(t, h, testAdmin, "beta", 1)
	list, err := dyn.Resource(jsmResource).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 || list.GetResourceVersion() == "" || list.GetResourceVersion() == "0" {
		t.Fatalf("list: %d items, resourceVersion %q, %v", len(list.Items), list.GetResourceVersion(), err)
	}
	one, err := dyn.Resource(jsmResource).Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=beta", LabelSelector: "team=a"})
	if err != nil || len(one.Items) != 1 || one.Items[0].GetName() != "beta" {
		t.Fatalf("list by selectors: %+v, %v", one, err)
	}
	if _, err := dyn.Resource(jsmResource).Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.replicas=1"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("unsupported field selector: %v, want BadRequest", err)
	}

	// A watch from the list's version sees alpha change and beta go.
	w, err := dyn.Resource(jsmResource).Namespace("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	putJSM(t, h, testAdmin, "alpha", 2)
	if err := dyn.Resource(jsmResource).Namespace("default").Delete(ctx, "beta", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var sawReplicas2, sawDeleted bool
	for !(sawReplicas2 && sawDeleted) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended early")
			}
			u, _ := ev.Object.(*unstructured.Unstructured)
			if u == nil {
				t.Fatalf("watch event %s carries %T", ev.Type, ev.Object)
			}
			n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			sawReplicas2 = sawReplicas2 || (ev.Type == watch.Modified && u.GetName() == "alpha" && n == 2)
			sawDeleted = sawDeleted || (ev.Type == watch.Deleted && u.GetName() == "beta")
		case <-ctx.Done():
			t.Fatalf("watch: update seen %v, deletion seen %v", sawReplicas2, sawDeleted)
		}
	}

	// The table kubectl get asks for: the name, then the CRD's columns.
	var table metav1.Table
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/jumpstartmodels").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"Name", "State", "Replicas", "Ready", "Age"}) || len(table.Rows) != 1 ||
		table.Rows[0].Cells[0] != "alpha" || table.Rows[0].Cells[2] != float64(2) {
		t.Fatalf("table columns %v, rows %+v", names, table.Rows)
	}

	// describe's events: the object's own, as core/v1 Events about it.
	alpha, err := dyn.Resource(jsmResource).Namespace("default").Get(ctx, "alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=alpha,involvedObject.namespace=default,involvedObject.kind=JumpStartModel,involvedObject.uid=" + string(alpha.GetUID())})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name != "alpha" || e.InvolvedObject.UID != alpha.GetUID() {
			t.Fatalf("event %+v is not about alpha", e)
		}
		reasons = append(reasons, e.Reason)
	}
	if !slices.Contains(reasons, "Applied") {
		t.Fatalf("alpha's events %v lack Applied", reasons)
	}
	// Writes: create, a stale update, a merge patch of the scale.
	jsms := dyn.Resource(jsmResource).Namespace("default")
	gamma := alpha.DeepCopy()
	gamma.SetName("gamma")
	gamma.SetResourceVersion("")
	gamma.SetUID("")
	unstructured.RemoveNestedField(gamma.Object, "status")
	if _, err := jsms.Create(ctx, gamma, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := jsms.Create(ctx, gamma, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	stale, err := jsms.Get(ctx, "gamma", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jsms.Patch(ctx, "gamma", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("scale patch: %v", err)
	}
	if n, _, _ := unstructured.NestedInt64(stale.Object, "spec", "replicas"); n == 3 {
		t.Fatal("the read before the scale already has 3 replicas")
	}
	if _, err := jsms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update of a stale read: %v, want Conflict", err)
	}
	// An update of the latest read goes through; the controller's status
	// writes also move the resourceVersion, so, as every client does, it
	// reads again on a conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := jsms.Get(ctx, "gamma", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(cur.Object, "spec", "replicas"); n != 3 {
			t.Fatalf("after the scale: replicas %d", n)
		}
		unstructured.SetNestedField(cur.Object, int64(1), "spec", "replicas")
		upd, err := jsms.Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil && upd.GetGeneration() != cur.GetGeneration()+1 {
			t.Fatalf("update of the latest read: generation %d after %d", upd.GetGeneration(), cur.GetGeneration())
		}
		return err
	})
	if err != nil {
		t.Fatalf("update of the latest read: %v", err)
	}

	// The cluster nodes as core/v1 Nodes, alpha's GPU allocated on one.
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node.kubernetes.io/instance-type=ml.g5.8xlarge"})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("g5.8xlarge nodes: %+v, %v", nodes, err)
	}
	held := 0
	for _, n := range nodes.Items {
		if g := n.Status.Capacity["nvidia.com/gpu"]; g.Value() != 1 || n.Labels["node.kubernetes.io/instance-type"] != "ml.g5.8xlarge" {
			t.Fatalf("node %s: capacity %v labels %v", n.Name, n.Status.Capacity, n.Labels)
		}
		if strings.HasPrefix(n.Annotations["capstan.dev/allocated"], "nvidia.com/gpu=1,") {
			held++
		}
		if one, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil || one.Name != n.Name {
			t.Fatalf("get node %s: %v", n.Name, err)
		}
	}
	if held == 0 {
		t.Fatal("no g5.8xlarge node holds a replica's GPU")
	}
	// What runs on the nodes, as pods: alpha's replica on its node, with
	// its GPU request, found as kubectl describe node finds it.
	alphaPods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "capstan.dev/owner-name=alpha"})
	if err != nil || len(alphaPods.Items) == 0 {
		t.Fatalf("alpha's pods: %+v, %v", alphaPods, err)
	}
	p := alphaPods.Items[0]
	onNode, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + p.Spec.NodeName + ",status.phase!=Failed,status.phase!=Succeeded"})
	if err != nil || !slices.ContainsFunc(onNode.Items, func(q corev1.Pod) bool { return q.Name == p.Name }) {
		t.Fatalf("pods on %s: %+v, %v", p.Spec.NodeName, onNode, err)
	}
	if g := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; g.Value() != 1 || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("alpha's pod %s: requests %v, phase %s", p.Name, p.Spec.Containers[0].Resources.Requests, p.Status.Phase)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("get pod %s: %v", p.Name, err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get of a missing node: %v", err)
	}

	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil || !slices.ContainsFunc(nss.Items, func(n corev1.Namespace) bool { return n.Name == "default" }) {
		t.Fatalf("namespaces %+v, %v", nss, err)
	}
}

var workspaceResource = schema.GroupVersionResource{Group: "workspace.jupyter.org", Version: "v1alpha1", Resource: "workspaces"}

// TestKubernetesWorkspaceWrites drives the spaces' kinds with client-go's
// dynamic client, as kubectl writes them: create (AlreadyExists the second
// time), a merge patch, an update of a stale read (Conflict), server-side
// apply with its field manager, the read-only status subresource, and a
// list in pages.
func TestKubernetesWorkspaceWrites(t *testing.T) {
	h := startHarness(t, config.Config{AdminTokens: []string{testAdmin}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: h.url, BearerToken: testAdmin})
	if err != nil {
		t.Fatal(err)
	}
	spaces := dyn.Resource(workspaceResource).Namespace("default")
	space := func(name, desired string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "workspace.jupyter.org/v1alpha1", "kind": "Workspace",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"displayName": name, "desiredStatus": desired}}}
	}
	created, err := spaces.Create(ctx, space("my-space", "Stopped"), metav1.CreateOptions{FieldManager: "tests"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.GetUID() == "" || created.GetGeneration() != 1 || len(created.GetManagedFields()) != 1 || created.GetManagedFields()[0].Manager != "tests" {
		t.Fatalf("created %+v", created.Object["metadata"])
	}
	if _, err := spaces.Create(ctx, space("my-space", "Stopped"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	bad := space("bad", "Stopped")
	unstructured.SetNestedField(bad.Object, int64(1), "spec", "gpu")
	if _, err := spaces.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.gpu") {
		t.Fatalf("create with an unknown field: %v, want Invalid naming spec.gpu", err)
	}
	stale, err := spaces.Get(ctx, "my-space", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched, err := spaces.Patch(ctx, "my-space", types.MergePatchType, []byte(`{"spec":{"displayName":"Mine"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if n, _, _ := unstructured.NestedString(patched.Object, "spec", "displayName"); n != "Mine" || patched.GetGeneration() != 2 {
		t.Fatalf("after the patch: displayName %q, generation %d", n, patched.GetGeneration())
	}
	if _, err := spaces.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update of a stale read: %v, want Conflict", err)
	}

	// Server-side apply: the applier owns displayName; a second manager
	// setting it otherwise conflicts until it forces.
	if _, err := spaces.Apply(ctx, "my-space", space("my-space", "Stopped"), metav1.ApplyOptions{FieldManager: "ops"}); !apierrors.IsConflict(err) {
		t.Fatalf("apply over another manager's displayName: %v, want Conflict", err)
	}
	applied, err := spaces.Apply(ctx, "my-space", space("my-space", "Stopped"), metav1.ApplyOptions{FieldManager: "ops", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if n, _, _ := unstructured.NestedString(applied.Object, "spec", "displayName"); n != "my-space" ||
		!slices.ContainsFunc(applied.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == "ops" && e.Operation == metav1.ManagedFieldsOperationApply
		}) {
		t.Fatalf("after the forced apply: displayName %q, managedFields %+v", n, applied.GetManagedFields())
	}
	// A repeated apply writes nothing: the same generation and field
	// managers, their times included (the controller's status writes may
	// move the resourceVersion meanwhile).
	again, err := spaces.Apply(ctx, "my-space", space("my-space", "Stopped"), metav1.ApplyOptions{FieldManager: "ops"})
	if err != nil || again.GetGeneration() != applied.GetGeneration() || !reflect.DeepEqual(again.GetManagedFields(), applied.GetManagedFields()) {
		t.Fatalf("repeated apply: generation %d then %d, managedFields %+v then %+v, %v", applied.GetGeneration(), again.GetGeneration(),
			applied.GetManagedFields(), again.GetManagedFields(), err)
	}

	// status is read-only: capstan's controllers write it.
	st, err := spaces.Get(ctx, "my-space", metav1.GetOptions{}, "status")
	if phase, _, _ := unstructured.NestedString(st.Object, "status", "phase"); err != nil || phase == "" {
		t.Fatalf("status subresource: phase %q, %v", phase, err)
	}
	if _, err := spaces.UpdateStatus(ctx, st, metav1.UpdateOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Fatalf("status write: %v, want MethodNotSupported", err)
	}

	// A list in pages of one: every space once, then no continue token.
	for _, n := range []string{"b-space", "c-space"} {
		if _, err := spaces.Create(ctx, space(n, "Stopped"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	opts := metav1.ListOptions{Limit: 1}
	for page := 0; ; page++ {
		l, err := spaces.List(ctx, opts)
		if err != nil || len(l.Items) != 1 || page > 3 {
			t.Fatalf("page %d: %d items, %v", page, len(l.Items), err)
		}
		names = append(names, l.Items[0].GetName())
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			break
		}
	}
	if !slices.Equal(names, []string{"b-space", "c-space", "my-space"}) {
		t.Fatalf("pages listed %v", names)
	}
	if err := spaces.Delete(ctx, "my-space", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

var (
	nodePoolResource  = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClassResource = schema.GroupVersionResource{Group: "karpenter.sagemaker.amazonaws.com", Version: "v1", Resource: "hyperpodnodeclasses"}
)

// TestKubernetesNodePools drives the node kinds, which are cluster-scoped,
// with client-go's dynamic client: create, a stale update (Conflict), a
// merge patch, server-side apply, the status a pool's missing class makes
// not ready, a delete's preconditions, and capstan's own apply of the same
// object staying unchanged.
func TestKubernetesNodePools(t *testing.T) {
	h := startHarness(t, config.Config{AdminTokens: []string{testAdmin}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: h.url, BearerToken: testAdmin})
	if err != nil {
		t.Fatal(err)
	}
	pools, classes := dyn.Resource(nodePoolResource), dyn.Resource(nodeClassResource)
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "inference"},
		"spec": map[string]any{"weight": int64(10), "template": map[string]any{"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass", "name": "groups"}}}}}}
	created, err := pools.Create(ctx, pool, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the pool: %v", err)
	}
	ready := func(u *unstructured.Unstructured) string {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" {
				return m["status"].(string)
			}
		}
		return ""
	}
	if created.GetUID() == "" || created.GetGeneration() != 1 || ready(created) != "False" {
		t.Fatalf("a pool without its class: %+v", created.Object)
	}
	if _, err := pools.Create(ctx, pool, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sagemaker.amazonaws.com/v1", "kind": "HyperpodNodeClass", "metadata": map[string]any{"name": "groups"},
		"spec": map[string]any{"instanceGroups": []any{"workers"}}}}
	if _, err := classes.Apply(ctx, "groups", class, metav1.ApplyOptions{FieldManager: "tests"}); err != nil {
		t.Fatalf("server-side apply of the class: %v", err)
	}
	got, err := pools.Get(ctx, "inference", metav1.GetOptions{})
	if err != nil || ready(got) != "True" {
		t.Fatalf("the pool with its class: ready %q, %v", ready(got), err)
	}
	patched, err := pools.Patch(ctx, "inference", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}},"spec":{"weight":20}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if w, _, _ := unstructured.NestedInt64(patched.Object, "spec", "weight"); w != 20 || patched.GetGeneration() != 2 || patched.GetLabels()["team"] != "a" {
		t.Fatalf("after the patch: weight %d, generation %d, labels %v", w, patched.GetGeneration(), patched.GetLabels())
	}
	if _, err := pools.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update of a stale read: %v, want Conflict", err)
	}
	if _, err := pools.Patch(ctx, "inference", types.MergePatchType, []byte(`{"spec":{"weight":500}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.weight") {
		t.Fatalf("a weight past 100: %v, want Invalid naming spec.weight", err)
	}
	if _, err := pools.UpdateStatus(ctx, patched, metav1.UpdateOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Fatalf("status write: %v, want MethodNotSupported", err)
	}

	// capstan's own apply of a change records its field manager for what it
	// changed (as kubectl's client-side apply does); again, it changes
	// nothing.
	doc := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: inference, labels: {team: a}}\nspec:\n  weight: 30\n  template: {spec: {nodeClassRef: {group: karpenter.sagemaker.amazonaws.com, kind: HyperpodNodeClass, name: groups}}}\n"
	capstanApply := func() string {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/apis/karpenter.sh/v1/apply", strings.NewReader(doc))
		req.Header.Set("Authorization", "Bearer "+testAdmin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var applied struct{ Items []struct{ Action string } }
		if err := json.NewDecoder(resp.Body).Decode(&applied); err != nil || len(applied.Items) != 1 {
			t.Fatalf("capstan apply: %d %+v %v", resp.StatusCode, applied, err)
		}
		return applied.Items[0].Action
	}
	if a, b := capstanApply(), capstanApply(); a != "configured" || b != "unchanged" {
		t.Fatalf("capstan apply of the stored pool, twice: %s, %s; want configured, unchanged", a, b)
	}
	got, err = pools.Get(ctx, "inference", metav1.GetOptions{})
	if err != nil || got.GetGeneration() != 3 ||
		!slices.ContainsFunc(got.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "capstan-apply" }) {
		t.Fatalf("after capstan apply: generation %d, managedFields %+v, %v", got.GetGeneration(), got.GetManagedFields(), err)
	}

	stale := "1"
	if err := pools.Delete(ctx, "inference", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stale}}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a stale precondition: %v, want Conflict", err)
	}
	if err := pools.Delete(ctx, "inference", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := pools.Get(ctx, "inference", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
}
