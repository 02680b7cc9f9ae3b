package deployment

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/modelsource"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/testutil"
)

var (
	kIEC = func(name string) string { return Key(manifest.KindInferenceEndpointConfig, "default", name) }
	kJSM = func(name string) string { return Key(manifest.KindJumpStartModel, "default", name) }
)

func TestApplyIsIdempotent(t *testing.T) {
	h := newHarness(t)
	doc := jsm("deepseek", "deepseek", "")
	res := h.apply(doc)
	if res.Action != manifest.ActionCreated || res.Generation != 1 {
		t.Fatalf("first apply: %+v", res)
	}
	h.reconcile(kJSM("deepseek"))
	starts := len(h.rt.Starts())
	if starts != 1 {
		t.Fatalf("%d replicas started, want 1", starts)
	}
	before := h.get(manifest.KindJumpStartModel, "deepseek")
	if before.GetStatus().State != manifest.StateDeploymentComplete {
		t.Fatalf("state %s, want DeploymentComplete; conditions %+v", before.GetStatus().State, before.GetStatus().Conditions)
	}

	res = h.apply(doc)
	if res.Action != manifest.ActionUnchanged || res.Generation != 1 {
		t.Fatalf("re-apply: %+v, want unchanged at generation 1", res)
	}
	h.reconcile(kJSM("deepseek"))
	after := h.get(manifest.KindJumpStartModel, "deepseek")
	if n := len(h.rt.Starts()); n != starts {
		t.Fatalf("re-apply started %d more replicas", n-starts)
	}
	if before.GetMeta().ResourceVersion != after.GetMeta().ResourceVersion || before.GetMeta().UID != after.GetMeta().UID {
		t.Fatalf("re-apply changed the object: %+v → %+v", before.GetMeta(), after.GetMeta())
	}

	// Status on input is ignored: a manifest carrying a made-up status
	// changes nothing.
	objs, _ := manifest.Load([]byte(doc))
	objs[0].GetStatus().State = manifest.StateDeploymentFailed
	if res, err := h.svc.Apply(context.Background(), objs[0]); err != nil || res.Action != manifest.ActionUnchanged {
		t.Fatalf("apply with status: %+v %v", res, err)
	}
	if got := h.get(manifest.KindJumpStartModel, "deepseek").GetStatus().State; got != manifest.StateDeploymentComplete {
		t.Fatalf("input status leaked: %s", got)
	}
}

func TestStatusAndReplicaSpec(t *testing.T) {
	h := newHarness(t)
	h.apply(strings.Replace(iec("demo", 2, 1, `  endpointName: demo-ep
  kvCacheSpec: {enableL1Cache: true, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: "redis://127.0.0.1:6379"}}
  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}`), "v1/chat/completions", "v1/completions", 1))
	h.reconcile(kIEC("demo"))
	o := h.get(manifest.KindInferenceEndpointConfig, "demo")
	st := o.GetStatus()
	if st.State != manifest.StateDeploymentComplete || st.Replicas != 2 || st.ReadyReplicas != 2 || st.ObservedGeneration != 1 {
		t.Fatalf("status %+v", st)
	}
	if c := condition(o, manifest.ConditionReady); c.Status != manifest.ConditionTrue || c.Reason != manifest.ReasonDeployed {
		t.Fatalf("Ready %+v", c)
	}
	if st.Endpoints == nil || st.Endpoints.URL != "http://127.0.0.1:8080/v1/completions" {
		t.Fatalf("endpoints %+v", st.Endpoints)
	}
	if sm := st.Endpoints.SageMaker; sm == nil || sm.State != smCreationCompleted || sm.EndpointArn != "arn:aws:sagemaker:us-east-1:000000000000:endpoint/demo-ep" {
		t.Fatalf("sagemaker status %+v", st.Endpoints.SageMaker)
	}
	ep, ok := h.reg.get(t, "demo-ep")
	if !ok || ep.Status != endpoint.StatusInService || ep.ManagedBy != "InferenceEndpointConfig/default/demo" || ep.Current == nil || len(ep.Current.Variants) != 1 {
		t.Fatalf("registration %+v (found %v)", ep, ok)
	}
	if v := ep.Current.Variants[0]; len(v.Replicas) != 2 || v.DesiredCount != 2 || v.InstanceType != "ml.g5.24xlarge" {
		t.Fatalf("registered variant %+v", v)
	}
	// Both replicas share one node: 1 GPU each, most-allocated first.
	starts := h.rt.Starts()
	if len(starts) != 2 {
		t.Fatalf("%d starts", len(starts))
	}
	node0, _ := h.cl.NodeOf(starts[0].ID)
	node1, _ := h.cl.NodeOf(starts[1].ID)
	if node0.Name != node1.Name {
		t.Fatalf("replicas on %s and %s; want one node", node0.Name, node1.Name)
	}
	s := starts[0]
	if s.Model != "llama-3.1-8b" || s.GPU != "a10g" || s.TensorParallel != 1 || s.Endpoint != "demo-ep" ||
		s.Controller != runtime.ControllerDeployment || s.ServedModelName != "demo-ep" || s.Variant != VariantName ||
		s.ModelDir != "/models/s3/models/llama-3.1-8b-instruct" {
		t.Fatalf("spec %+v", s)
	}
	args := strings.Join(engineArgs(s), " ")
	for _, want := range []string{"--time-scale=0",
		"--cpu-cache-bytes=32212254720", "--shared-cache=redis://127.0.0.1:6379", "--kv-events=tcp://*:"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	r, ok := h.gw.Route("demo-ep")
	if !ok || len(r.Variants) != 1 || r.Variants[0].RoutingStrategy != "kvaware" || r.Variants[0].Model != "llama-3.1-8b" || len(r.Variants[0].Backends) != 2 {
		t.Fatalf("route %+v", r)
	}
	for _, b := range r.Variants[0].Backends {
		if !strings.HasPrefix(b.KVEventsEndpoint, "tcp://127.0.0.1:") {
			t.Fatalf("backend %+v has no KV events endpoint", b)
		}
	}
	if r.Activator != nil {
		t.Fatal("activator set without scale to zero")
	}
}

func TestChangedSpecRollsOut(t *testing.T) {
	h := newHarness(t, manualRuntime())
	h.apply(iec("demo", 2, 1, ""))
	k := kIEC("demo")
	h.reconcile(k)
	old := h.running("iec.default.demo.")
	if len(old) != 2 {
		t.Fatalf("running %v", old)
	}
	for _, id := range old {
		h.rt.SetState(id, runtime.StateHealthy, "")
	}
	h.reconcile(k)
	if got := h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus().State; got != manifest.StateDeploymentComplete {
		t.Fatalf("state %s", got)
	}

	// A new model location is a new replica template.
	res := h.apply(strings.Replace(iec("demo", 2, 1, ""), "modelLocation: llama-3.1-8b-instruct", "modelLocation: llama-3.1-8b-instruct-v2", 1))
	if res.Action != manifest.ActionConfigured || res.Generation != 2 {
		t.Fatalf("apply: %+v", res)
	}
	h.reconcile(k)
	o := h.get(manifest.KindInferenceEndpointConfig, "demo")
	if o.GetStatus().State != manifest.StateDeploymentInProgress || o.GetStatus().ObservedGeneration != 2 {
		t.Fatalf("mid-rollout status %+v", o.GetStatus())
	}
	all := h.running("iec.default.demo.")
	var fresh []string
	for _, id := range all {
		if !slices.Contains(old, id) {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) != 2 || len(all) != 4 {
		t.Fatalf("running %v; want the 2 old and 2 new replicas", all)
	}
	// Old replicas keep serving until new ones are healthy.
	if b := h.backends("demo"); !slices.Equal(b, old) {
		t.Fatalf("route %v, want the old replicas %v", b, old)
	}
	if len(h.rt.Stops()) != 0 {
		t.Fatalf("stopped %v before any new replica was healthy", h.rt.Stops())
	}
	h.rt.SetState(fresh[0], runtime.StateHealthy, "")
	h.reconcile(k)
	if n := len(h.rt.Stops()); n != 1 {
		t.Fatalf("one new replica healthy: %d stops (%v), want 1", n, h.rt.Stops())
	}
	if b := h.backends("demo"); len(b) != 2 || !slices.Contains(b, fresh[0]) {
		t.Fatalf("route %v", b)
	}
	h.rt.SetState(fresh[1], runtime.StateHealthy, "")
	h.reconcile(k)
	if b := h.backends("demo"); !slices.Equal(b, fresh) {
		t.Fatalf("route %v, want %v", b, fresh)
	}
	if stops := h.rt.Stops(); len(stops) != 2 || !slices.Contains(stops, old[0]) || !slices.Contains(stops, old[1]) {
		t.Fatalf("stops %v, want the old replicas", stops)
	}
	o = h.get(manifest.KindInferenceEndpointConfig, "demo")
	if o.GetStatus().State != manifest.StateDeploymentComplete {
		t.Fatalf("after rollout: %+v", o.GetStatus())
	}
	if !slices.Contains(h.eventReasons(manifest.KindInferenceEndpointConfig, "demo"), "RolloutStarted") {
		t.Fatalf("events %v", h.eventReasons(manifest.KindInferenceEndpointConfig, "demo"))
	}
	// Changing only the replica count is no rollout.
	starts := len(h.rt.Starts())
	h.apply(strings.Replace(iec("demo", 3, 1, ""), "modelLocation: llama-3.1-8b-instruct", "modelLocation: llama-3.1-8b-instruct-v2", 1))
	h.reconcile(k)
	if n := len(h.rt.Starts()) - starts; n != 1 {
		t.Fatalf("scale 2 → 3 started %d replicas", n)
	}
}

func TestRolloutSurgesWhenCapacityIsShort(t *testing.T) {
	// One node with 4 GPUs, held entirely by two 2-GPU replicas.
	h := newHarness(t, withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.24xlarge", Count: 1}))
	h.apply(iec("demo", 2, 2, ""))
	k := kIEC("demo")
	h.reconcile(k)
	old := h.running("iec.default.demo.")
	h.apply(strings.Replace(iec("demo", 2, 2, ""), "modelLocation: llama-3.1-8b-instruct", "modelLocation: llama-3.1-8b-instruct-v2", 1))
	for i := 0; i < 6; i++ {
		h.reconcile(k)
	}
	now := h.running("iec.default.demo.")
	if len(now) != 2 || slices.Contains(now, old[0]) || slices.Contains(now, old[1]) {
		t.Fatalf("running %v (old %v)", now, old)
	}
	if got := h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus().State; got != manifest.StateDeploymentComplete {
		t.Fatalf("state %s", got)
	}
	if !slices.Contains(h.eventReasons(manifest.KindInferenceEndpointConfig, "demo"), "RolloutSurge") {
		t.Fatal("no RolloutSurge event")
	}
}

func TestPendingUntilCapacityFrees(t *testing.T) {
	h := newHarness(t, withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.24xlarge", Count: 1}))
	h.apply(iec("big", 1, 4, ""))
	h.reconcile(kIEC("big"))
	h.apply(iec("small", 1, 2, ""))
	h.reconcile(kIEC("small"))
	o := h.get(manifest.KindInferenceEndpointConfig, "small")
	if o.GetStatus().State != manifest.StateDeploymentPending {
		t.Fatalf("state %s", o.GetStatus().State)
	}
	c := condition(o, manifest.ConditionReady)
	want := "0/1 nodes are available: 1 Insufficient nvidia.com/gpu (want 2, most free 0)"
	if c.Status != manifest.ConditionFalse || c.Reason != manifest.ReasonInsufficientCapacity || !strings.Contains(c.Message, want) {
		t.Fatalf("Ready %+v, want InsufficientCapacity with %q", c, want)
	}
	if d := condition(o, manifest.ConditionDegraded); d.Status != manifest.ConditionTrue || d.Reason != manifest.ReasonInsufficientCapacity {
		t.Fatalf("Degraded %+v", d)
	}
	if len(h.running("iec.default.small.")) != 0 {
		t.Fatal("pending replica started")
	}
	if !slices.Contains(h.eventReasons(manifest.KindInferenceEndpointConfig, "small"), "FailedScheduling") {
		t.Fatal("no FailedScheduling event")
	}

	if err := h.svc.Delete(context.Background(), manifest.KindInferenceEndpointConfig, "default", "big"); err != nil {
		t.Fatal(err)
	}
	h.reconcile(kIEC("big"))
	h.reconcile(kIEC("small"))
	o = h.get(manifest.KindInferenceEndpointConfig, "small")
	if o.GetStatus().State != manifest.StateDeploymentComplete || len(h.running("iec.default.small.")) != 1 {
		t.Fatalf("after the big deployment left: %+v, running %v", o.GetStatus(), h.rt.Running())
	}
	if c := condition(o, manifest.ConditionDegraded); c.Status != manifest.ConditionFalse {
		t.Fatalf("Degraded %+v", c)
	}
}

func TestDelete(t *testing.T) {
	h := newHarness(t)
	h.apply(jsm("deepseek", "deepseek-ep", ""))
	k := kJSM("deepseek")
	h.reconcile(k)
	ids := h.running("jsm.default.deepseek.")
	if len(ids) != 1 || len(h.backends("deepseek-ep")) != 1 {
		t.Fatalf("running %v, route %v", ids, h.backends("deepseek-ep"))
	}
	if err := h.svc.Delete(context.Background(), manifest.KindJumpStartModel, "default", "deepseek"); err != nil {
		t.Fatal(err)
	}
	if got := h.get(manifest.KindJumpStartModel, "deepseek").GetStatus().State; got != manifest.StateDeletionPending {
		t.Fatalf("state after Delete: %s", got)
	}
	// Applying while deleting is refused.
	objs, _ := manifest.Load([]byte(jsm("deepseek", "deepseek-ep", "")))
	if _, err := h.svc.Apply(context.Background(), objs[0]); !errors.Is(err, ErrBeingDeleted) {
		t.Fatalf("apply during delete: %v", err)
	}
	if err := h.svc.Controller().Reconcile(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Get(context.Background(), manifest.KindJumpStartModel, "default", "deepseek"); !errors.Is(err, manifest.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if len(h.running("jsm.")) != 0 {
		t.Fatalf("still running %v", h.rt.Running())
	}
	if _, ok := h.gw.Route("deepseek-ep"); ok {
		t.Fatal("route survives")
	}
	if _, ok := h.reg.get(t, "deepseek-ep"); ok {
		t.Fatal("SageMaker registration survives")
	}
	for _, n := range h.cl.Nodes() {
		if n.Allocated != (cluster.Resources{}) {
			t.Fatalf("node %s still allocated %+v", n.Name, n.Allocated)
		}
	}
	if err := h.svc.Delete(context.Background(), manifest.KindJumpStartModel, "default", "deepseek"); !errors.Is(err, manifest.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := h.svc.Events(context.Background(), manifest.KindJumpStartModel, "default", "deepseek"); !errors.Is(err, manifest.ErrNotFound) {
		t.Fatalf("events after delete: %v", err)
	}
}

func TestModelSourceFailure(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantReason string
	}{
		{"source error", &modelsource.SourceError{Reason: modelsource.ReasonNotFound, Message: "s3://models/llama-3.1-8b-instruct/ has no config.json"}, "ModelSourceNotFound"},
		{"other error", errNotThere, manifest.ReasonModelSourceFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.models.fail(tc.err)
			h.apply(iec("demo", 1, 1, ""))
			h.reconcile(kIEC("demo"))
			o := h.get(manifest.KindInferenceEndpointConfig, "demo")
			c := condition(o, manifest.ConditionReady)
			if o.GetStatus().State != manifest.StateDeploymentFailed || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.err.Error()) {
				t.Fatalf("state %s, Ready %+v", o.GetStatus().State, c)
			}
			if len(h.rt.Starts()) != 0 {
				t.Fatal("started a replica without a model")
			}
			// Fixed at the source: the next try (after the retry delay) deploys.
			h.models.fail(nil)
			h.clk.Step(modelRetry + time.Second)
			h.reconcile(kIEC("demo"))
			if got := h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus().State; got != manifest.StateDeploymentComplete {
				t.Fatalf("after the source was fixed: %s", got)
			}
		})
	}
}

// TestModelTooLarge: a fetched model whose weight files are larger than
// the instance type's GPU memory fails the deployment before any replica
// starts, with the sizes; smaller files at the source deploy on the next
// try.
func TestModelTooLarge(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	weights := filepath.Join(dir, "model.safetensors")
	f, err := os.Create(weights)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(weights, 100e9); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	h.models.mu.Lock()
	h.models.dir = dir
	h.models.mu.Unlock()
	h.apply(iec("demo", 1, 1, ""))
	h.reconcile(kIEC("demo"))
	o := h.get(manifest.KindInferenceEndpointConfig, "demo")
	c := condition(o, manifest.ConditionReady)
	want := "the model does not fit: its weight files take 100.0 GB; ml.g5.24xlarge has 96.0 GB of GPU memory"
	if o.GetStatus().State != manifest.StateDeploymentFailed || c.Reason != ReasonModelTooLarge || !strings.Contains(c.Message, want) {
		t.Fatalf("state %s, Ready %+v; want %s with %q", o.GetStatus().State, c, ReasonModelTooLarge, want)
	}
	if len(h.rt.Starts()) != 0 {
		t.Fatal("started a replica of a model that does not fit")
	}
	if err := os.Truncate(weights, 16e9); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(modelRetry + time.Second)
	h.reconcile(kIEC("demo"))
	if got := h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus().State; got != manifest.StateDeploymentComplete {
		t.Fatalf("with 16 GB of weights: %s", got)
	}
}

func TestEndpointNameInUse(t *testing.T) {
	h := newHarness(t)
	// An endpoint created through the SageMaker API holds the name.
	if err := h.store.Update(func(tx *store.Tx) error {
		return tx.Put(endpoint.KindEndpoint, "shared", endpoint.Endpoint{Name: "shared", Status: endpoint.StatusInService})
	}); err != nil {
		t.Fatal(err)
	}
	h.apply(jsm("deepseek", "shared", ""))
	h.reconcile(kJSM("deepseek"))
	o := h.get(manifest.KindJumpStartModel, "deepseek")
	c := condition(o, manifest.ConditionReady)
	if o.GetStatus().State != manifest.StateDeploymentFailed || c.Reason != manifest.ReasonEndpointNameInUse {
		t.Fatalf("state %s, Ready %+v", o.GetStatus().State, c)
	}
	if _, ok := h.gw.Route("shared"); ok {
		t.Fatal("took the route of an endpoint it does not own")
	}
	if len(h.rt.Starts()) != 0 {
		t.Fatal("started replicas")
	}
}

// Two objects whose routes have the same name (a SageMaker name held by one,
// or the same metadata.name in both kinds): the second fails with
// EndpointNameInUse, and deleting it leaves the holder's route serving.
func TestRouteHeldByOneObject(t *testing.T) {
	tests := []struct {
		name           string
		holder, second string // manifests
		kHolder        string
		kind2, name2   string // the second object
		route          string
	}{
		{"same sageMakerEndpoint.name", jsm("a", "shared", ""), jsm("b", "shared", ""), kJSM("a"), manifest.KindJumpStartModel, "b", "shared"},
		{"same name, no endpoint name", iec("c", 1, 1, ""), jsm("c", "", ""), kIEC("c"), manifest.KindJumpStartModel, "c", "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(tt.holder)
			h.reconcile(tt.kHolder)
			h.reconcile(tt.kHolder)
			want := h.backends(tt.route)
			if len(want) == 0 {
				t.Fatalf("holder has no backends on route %s", tt.route)
			}
			h.apply(tt.second)
			k2 := Key(tt.kind2, "default", tt.name2)
			h.reconcile(k2)
			o := h.get(tt.kind2, tt.name2)
			if c := condition(o, manifest.ConditionReady); o.GetStatus().State != manifest.StateDeploymentFailed || c.Reason != manifest.ReasonEndpointNameInUse {
				t.Fatalf("second object: state %s, Ready %+v; want DeploymentFailed/EndpointNameInUse", o.GetStatus().State, c)
			}
			if got := h.backends(tt.route); !slices.Equal(got, want) {
				t.Fatalf("route %s backends %v after the second apply, want the holder's %v", tt.route, got, want)
			}
			if err := h.svc.Delete(context.Background(), tt.kind2, "default", tt.name2); err != nil {
				t.Fatal(err)
			}
			h.reconcile(k2)
			h.reconcile(tt.kHolder)
			if got := h.backends(tt.route); !slices.Equal(got, want) {
				t.Fatalf("route %s backends %v after deleting the second object, want the holder's %v", tt.route, got, want)
			}
		})
	}
}

func TestUpdateRules(t *testing.T) {
	h := newHarness(t)
	h.apply(iec("demo", 1, 1, ""))
	objs, err := manifest.Load([]byte(iec("demo", 1, 1, "  intelligentRoutingSpec: {enabled: true}")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.svc.Apply(context.Background(), objs[0])
	if fe := manifest.FieldErrors(err); len(fe) == 0 {
		t.Fatalf("adding intelligentRoutingSpec: %v", err)
	}
	// Labels alone: configured, same generation.
	res := h.apply(strings.Replace(iec("demo", 1, 1, ""), "namespace: default}", "namespace: default, labels: {team: a}}", 1))
	if res.Action != manifest.ActionConfigured || res.Generation != 1 {
		t.Fatalf("label change: %+v", res)
	}
	if _, err := h.svc.Get(context.Background(), "Deployment", "default", "demo"); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestListSortsAndFilters(t *testing.T) {
	h := newHarness(t)
	h.apply(iec("b", 1, 1, ""))
	h.apply(iec("a", 1, 1, ""))
	h.apply(strings.Replace(iec("c", 1, 1, ""), "namespace: default", "namespace: team", 1))
	h.apply(jsm("j", "", ""))
	all, err := h.svc.List(context.Background(), manifest.KindInferenceEndpointConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range all {
		names = append(names, o.GetMeta().Namespace+"/"+o.GetMeta().Name)
	}
	if strings.Join(names, ",") != "default/a,default/b,team/c" {
		t.Fatalf("list %v", names)
	}
	def, _ := h.svc.List(context.Background(), manifest.KindInferenceEndpointConfig, "default")
	if len(def) != 2 {
		t.Fatalf("namespace filter: %d", len(def))
	}
}

func TestEndpointRename(t *testing.T) {
	h := newHarness(t)
	k := kJSM("deepseek")
	h.apply(jsm("deepseek", "first", ""))
	h.reconcile(k)
	h.apply(jsm("deepseek", "second", ""))
	h.reconcile(k)
	if _, ok := h.reg.get(t, "first"); ok {
		t.Fatal("old registration survives the rename")
	}
	if m, ok := h.reg.get(t, "second"); !ok || m.Status != endpoint.StatusInService {
		t.Fatalf("new registration %+v %v", m, ok)
	}
	if _, ok := h.gw.Route("first"); ok {
		t.Fatal("old route survives the rename")
	}
	if b := h.backends("second"); len(b) != 1 {
		t.Fatalf("new route backends %v", b)
	}
}

func TestRestartResumes(t *testing.T) {
	h := newHarness(t)
	k := kIEC("demo")
	h.apply(iec("demo", 2, 1, "  endpointName: demo-ep\n"))
	h.reconcile(k)
	ids := h.running("iec.default.demo.")
	// A new controller over the same store, with a fresh runtime (the old
	// processes died with the old server) and an empty cluster.
	h2 := newHarness(t)
	h2.store = h.store
	h2.reg = &registry{Service: endpoint.NewService(h.store, nil, nil, h2.clk, testLogger(t))}
	svc, err := New(Options{Store: h.store, Clock: h2.clk, Engine: serving.New(serving.Options{Runtime: h2.rt, Router: h2.gw}), Cluster: h2.cl, Gateway: h2.gw,
		Models: h2.models, Endpoints: h2.reg, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h2.svc = svc
	h2.reconcile(k)
	if got := h2.running("iec.default.demo."); !slices.Equal(got, ids) {
		t.Fatalf("after restart running %v, want %v", got, ids)
	}
	if b := h2.backends("demo-ep"); len(b) != 2 {
		t.Fatalf("route %v", b)
	}
	// The registration never went back to Creating.
	for _, p := range h2.reg.puts {
		if p.Status == endpoint.StatusCreating {
			t.Fatalf("registration after restart: %+v", h2.reg.puts)
		}
	}
	if ep, ok := h2.reg.get(t, "demo-ep"); !ok || ep.Status != endpoint.StatusInService {
		t.Fatalf("registration after restart: %+v (found %v)", ep, ok)
	}
	if o := h2.get(manifest.KindInferenceEndpointConfig, "demo"); o.GetStatus().State != manifest.StateDeploymentComplete {
		t.Fatalf("status %+v", o.GetStatus())
	}
}

// BenchmarkReconcileSteady measures one reconcile of a deployment that is
// already where it should be (the resync cost per object).
func BenchmarkReconcileSteady(b *testing.B) {
	h := newHarness(b)
	h.apply(iec("demo", 4, 1, "  endpointName: demo-ep\n"))
	k := kIEC("demo")
	h.reconcile(k)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := h.svc.Controller().Reconcile(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReplicaMetrics(t *testing.T) {
	h := newHarness(t, withGroups(cluster.InstanceGroup{Name: "g5", InstanceType: "ml.g5.24xlarge", Count: 1}))
	h.apply(iec("demo", 3, 2, ""))
	h.reconcile(kIEC("demo"))
	want := `
# HELP capstan_deployment_replicas Replicas of a manifest deployment by state: desired, current (placed and started), ready (serving), pending (waiting for room on a node).
# TYPE capstan_deployment_replicas gauge
capstan_deployment_replicas{kind="InferenceEndpointConfig",name="demo",namespace="default",state="current"} 2
capstan_deployment_replicas{kind="InferenceEndpointConfig",name="demo",namespace="default",state="desired"} 3
capstan_deployment_replicas{kind="InferenceEndpointConfig",name="demo",namespace="default",state="pending"} 1
capstan_deployment_replicas{kind="InferenceEndpointConfig",name="demo",namespace="default",state="ready"} 2
`
	if err := promtestutil.GatherAndCompare(h.prom, strings.NewReader(want), "capstan_deployment_replicas"); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Minute)
	h.reconcile(kIEC("demo"))
	// Two replicas ran for a minute (the pending one costs nothing).
	if v := promtestutil.ToFloat64(h.svc.ctrl.m.replicaSeconds.WithLabelValues("default", "demo", manifest.KindInferenceEndpointConfig)); v != 120 {
		t.Fatalf("replica seconds %g, want 120", v)
	}
	if err := h.svc.Delete(context.Background(), manifest.KindInferenceEndpointConfig, "default", "demo"); err != nil {
		t.Fatal(err)
	}
	h.reconcile(kIEC("demo"))
	// The series are gone with the object.
	if n, err := promtestutil.GatherAndCount(h.prom, "capstan_deployment_replicas", "capstan_deployment_replica_seconds_total"); err != nil || n != 0 {
		t.Fatalf("series left after delete: %d %v", n, err)
	}
}

// TestExampleManifest applies the kv-cache and routing example of
// examples.md (shared with the manifest package's tests) with the real
// trigger builder.
func TestExampleManifest(t *testing.T) {
	doc, err := os.ReadFile("../manifest/testdata/examples-iec-kv-routing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	res := h.apply(string(doc))
	k := Key(res.Kind, res.Namespace, res.Name)
	h.reconcile(k)
	o := h.get(res.Kind, res.Name)
	if o.GetStatus().State != manifest.StateDeploymentComplete || o.GetStatus().ReadyReplicas != 2 {
		t.Fatalf("status %+v", o.GetStatus())
	}
	r, ok := h.gw.Route(res.Name)
	if !ok || r.Activator == nil || r.Variants[0].RoutingStrategy != manifest.RoutingPrefixAware || len(r.Variants[0].Backends) != 2 {
		t.Fatalf("route %+v", r)
	}
	if args := strings.Join(engineArgs(h.rt.Starts()[0]), " "); !strings.Contains(args, "--shared-cache=redis://127.0.0.1:6379") {
		t.Fatalf("args %s", args)
	}
}

// TestScaleInDrains checks that a replica leaving is drained: the request
// it serves finishes before the replica is stopped.
func TestScaleInDrains(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	h := newHarness(t)
	h.rt.SetDefaultAddr(strings.TrimPrefix(srv.URL, "http://"))
	k := kIEC("demo")
	h.apply(iec("demo", 2, 1, ""))
	h.reconcile(k)
	ids := h.running("iec.default.demo.")
	if len(ids) != 2 {
		t.Fatalf("running %v", ids)
	}
	// One request in flight on each replica (least outstanding requests).
	results := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() {
			res, err := h.gw.Invoke(context.Background(), gateway.Invocation{Endpoint: "demo", Path: "/invocations", Body: []byte(`{}`)})
			if err != nil {
				results <- -1
				return
			}
			_, _ = io.ReadAll(res.Response.Body)
			res.Response.Body.Close()
			results <- res.Response.StatusCode
		}()
	}
	testutil.Eventually(t, 10*time.Second, "a request on each replica", func() bool { return h.gw.InFlight(ids[0]) == 1 && h.gw.InFlight(ids[1]) == 1 })

	h.apply(iec("demo", 1, 1, ""))
	done := make(chan error, 1)
	go func() { done <- h.svc.Controller().Reconcile(context.Background(), k) }()
	// The victim (the newest) leaves the route at once but is not stopped
	// while its request runs.
	testutil.Eventually(t, 10*time.Second, "the victim out of the route", func() bool { b := h.backends("demo"); return len(b) == 1 && b[0] == ids[0] })
	testutil.Eventually(t, 10*time.Second, "the reconcile draining the victim", func() bool { return h.gw.Draining(ids[1]) })
	// Its request holds the drain until release below.
	select {
	case err := <-done:
		t.Fatalf("reconcile returned (%v) with a request in flight on the victim", err)
	default:
	}
	if len(h.rt.Stops()) != 0 {
		t.Fatalf("stopped %v with a request in flight", h.rt.Stops())
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if code := <-results; code != 200 {
			t.Fatalf("request answered %d", code)
		}
	}
	if stops := h.rt.Stops(); !slices.Equal(stops, []string{ids[1]}) {
		t.Fatalf("stops %v, want [%s]", stops, ids[1])
	}
}

func TestRequestLimitsBoundTheRoute(t *testing.T) {
	h := newHarness(t)
	doc := strings.Replace(iec("demo", 2, 1, ""), "    modelVolumeMount:", "    requestLimits: {maxConcurrentRequests: 8, maxQueueSize: 4}\n    modelVolumeMount:", 1)
	h.apply(doc)
	h.reconcile(kIEC("demo"))
	r, ok := h.gw.Route("demo")
	if !ok || r.MaxConcurrency != 16 || r.MaxQueue != 8 {
		t.Fatalf("route limits %d/%d, want 16/8", r.MaxConcurrency, r.MaxQueue)
	}
}

// TestRolloutInBatches: with capstan.dev/rollout-batch and -wait, a new
// replica template starts one replica at a time, each healthy batch
// serving for the wait (by the injected clock) before the next starts, the
// old replicas retiring as new ones serve; scaling after the rollout is
// not held back by the batches.
func TestRolloutInBatches(t *testing.T) {
	h := newHarness(t)
	annotated := func(model string, replicas int) string {
		doc := strings.Replace(iec("demo", replicas, 1, ""), "metadata: {name: demo, namespace: default}",
			`metadata: {name: demo, namespace: default, annotations: {capstan.dev/rollout-batch: "1", capstan.dev/rollout-wait: 30s}}`, 1)
		return strings.Replace(doc, "modelLocation: llama-3.1-8b-instruct", "modelLocation: "+model, 1)
	}
	k := kIEC("demo")
	healthy := func() {
		for _, id := range h.running("iec.default.demo.") {
			h.rt.SetState(id, runtime.StateHealthy, "")
		}
		h.reconcile(k)
	}
	h.apply(annotated("llama-3.1-8b-instruct", 3))
	h.reconcile(k)
	if n := len(h.running("iec.default.demo.")); n != 3 {
		t.Fatalf("first deploy started %d replicas, want all 3 at once", n)
	}
	healthy()
	old := h.running("iec.default.demo.")

	h.apply(annotated("llama-3.1-8b-instruct-v2", 3))
	fresh := func() []string {
		var out []string
		for _, id := range h.running("iec.default.demo.") {
			if !slices.Contains(old, id) {
				out = append(out, id)
			}
		}
		return out
	}
	for batch := 1; batch <= 3; batch++ {
		h.reconcile(k)
		if n := len(fresh()); n != batch {
			t.Fatalf("batch %d: %d new replicas running (%v)", batch, n, h.running("iec.default.demo."))
		}
		healthy()
		if n := len(h.running("iec.default.demo.")); n != 3 {
			t.Fatalf("batch %d healthy: %d replicas running, want 3 (an old one retired)", batch, n)
		}
		if batch == 3 {
			break
		}
		h.clk.Step(29 * time.Second)
		h.reconcile(k)
		if n := len(fresh()); n != batch {
			t.Fatalf("batch %d started %v before its 30s wait", batch+1, fresh())
		}
		h.clk.Step(time.Second)
	}
	if got := h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus().State; got != manifest.StateDeploymentComplete {
		t.Fatalf("state %s after the last batch", got)
	}
	if b := h.backends("demo"); len(b) != 3 || slices.ContainsFunc(b, func(id string) bool { return slices.Contains(old, id) }) {
		t.Fatalf("route %v, want the 3 new replicas", b)
	}
	// Scaling out is not a rollout: both new replicas start at once.
	h.apply(annotated("llama-3.1-8b-instruct-v2", 5))
	h.reconcile(k)
	if n := len(h.running("iec.default.demo.")); n != 5 {
		t.Fatalf("scale 3 → 5 runs %d replicas, want 5 at once", n)
	}
}
