package manifestapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json golden files")

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func exampleFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "manifest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const iecDemo = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: small}
spec:
  modelName: Llama-3.1-8B-Instruct
  instanceType: ml.g5.24xlarge
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: llama}
  worker:
    image: vllm/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: model-weights}
    resources: {requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
`

const jsmDemo = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: deepseek, namespace: team-a}
spec:
  sageMakerEndpoint: {name: deepseek}
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
`

// harness serves the handler over the real Store, deployment.Service, as
// capstan serve wires it: a bbolt store in a temp dir, a fake clock, the
// fake runtime (replicas are healthy as soon as they start) and the default
// cluster. Nothing runs the controller; tests that want the status it
// writes call reconcile, so every status they see is the controller's.
type harness struct {
	svc *deployment.Service
	db  *store.Store
	clk *clock.Fake
	rt  *fake.Runtime
	srv *httptest.Server
}

// newService starts deployment.Service over fresh state. endpoints may be
// nil (names then route only, as without a SageMaker API).
func newService(t testing.TB, clk *clock.Fake, db *store.Store, rt *fake.Runtime, endpoints deployment.EndpointRegistry) *deployment.Service {
	t.Helper()
	cl, err := cluster.New(catalog.Default(), cluster.DefaultInstanceGroups())
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry()})
	svc, err := deployment.New(deployment.Options{
		Store: db, Clock: clk, Registerer: prometheus.NewRegistry(),
		Engine:  serving.New(serving.Options{Runtime: rt, Router: gw, EngineArgs: []string{"--time-scale=0"}}),
		Cluster: cl, Endpoints: endpoints, Gateway: gw, GatewayURL: "http://127.0.0.1:8080",
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// openStore opens a bbolt store in a temp dir, closed when the test ends.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "capstan.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newHarness(t testing.TB, o Options) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	db := openStore(t)
	rt := fake.New(fake.WithClock(clk))
	return serveHarness(t, o, &harness{svc: newService(t, clk, db, rt, nil), db: db, clk: clk, rt: rt})
}

// serveHarness mounts the handler over h.svc as capstan serve mounts it.
func serveHarness(t testing.TB, o Options, h *harness) *harness {
	t.Helper()
	o.Store, o.Clock = h.svc, h.clk
	api, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/apis/", api)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

// reconcile runs the controller for one object until it settles (status
// writes, placement and starts take a few passes).
func (h *harness) reconcile(t testing.TB, kind, ns, name string) {
	t.Helper()
	for range 4 {
		if err := h.svc.Controller().Reconcile(context.Background(), deployment.Key(kind, ns, name)); err != nil {
			t.Fatalf("reconcile %s %s/%s: %v", kind, ns, name, err)
		}
	}
}

// stored lists "Kind/namespace/name" of every object the service holds,
// IECs first, each kind in namespace then name order.
func (h *harness) stored(t testing.TB) []string {
	t.Helper()
	out := []string{}
	for _, r := range Resources {
		objs, err := h.svc.List(context.Background(), r.Kind, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			out = append(out, o.GetKind()+"/"+o.GetMeta().Namespace+"/"+o.GetMeta().Name)
		}
	}
	return out
}

// meta returns the stored object's metadata.
func (h *harness) meta(t testing.TB, kind, ns, name string) manifest.ObjectMeta {
	t.Helper()
	o, err := h.svc.Get(context.Background(), kind, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return *o.GetMeta()
}

func (h *harness) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	code, b, ct := h.request(t, method, path, "application/yaml", body)
	if ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return code, b
}

// request sends body as contentType and returns the answer's code, body
// and Content-Type.
func (h *harness) request(t *testing.T, method, path, contentType, body string) (int, []byte, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header.Get("Content-Type")
}

func (h *harness) mustApply(t *testing.T, body string) {
	t.Helper()
	if code, b := h.do(t, http.MethodPost, ApplyPath, body); code != http.StatusOK {
		t.Fatalf("setup apply: %d %s", code, b)
	}
}

func decodeStatus(t *testing.T, b []byte) *Status {
	t.Helper()
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("not a Status: %v\n%s", err, b)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" {
		t.Fatalf("kind/apiVersion = %s/%s", st.Kind, st.APIVersion)
	}
	return &st
}

func fields(st *Status) []string {
	var out []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			out = append(out, c.Field)
		}
	}
	return out
}

func hasFieldPrefix(st *Status, prefix string) bool {
	for _, f := range fields(st) {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}

// reUIDField finds metadata.uid values in a JSON body.
var reUIDField = regexp.MustCompile(`"uid": "([^"]*)"`)

// reUUIDv4 is the shape of the uids deployment.Service gives out.
var reUUIDv4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// normalizeUIDs replaces every uid with a placeholder, after checking that
// each is a random (version 4) UUID and that no two objects share one: the
// store draws them from crypto/rand, so golden files cannot hold them.
func normalizeUIDs(t *testing.T, b []byte) []byte {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range reUIDField.FindAllSubmatch(b, -1) {
		uid := string(m[1])
		if !reUUIDv4.MatchString(uid) {
			t.Errorf("uid %q is not a version 4 UUID", uid)
		}
		if seen[uid] {
			t.Errorf("uid %q given to two objects", uid)
		}
		seen[uid] = true
	}
	return reUIDField.ReplaceAll(b, []byte(`"uid": "<random uuid>"`))
}

// golden compares a response body, uids normalized, with testdata/NAME.json.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = normalizeUIDs(t, got)
	p := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from golden (run with -update to accept):\n got: %s\nwant: %s", p, got, want)
	}
}

func TestHandler(t *testing.T) {
	iecPath := ObjectPath(Resources[0], "default", "small")
	tests := []struct {
		name       string
		opts       Options
		setup      string                         // applied first
		prepare    func(t *testing.T, h *harness) // runs after setup (e.g. the controller)
		method     string
		path       string
		body       string
		bodyFrom   func(t *testing.T, h *harness) string // computes the body after setup
		wantCode   int
		wantReason string // for a Status answer
		golden     string
		check      func(t *testing.T, h *harness, b []byte)
	}{
		{name: "put creates", method: http.MethodPut, path: iecPath, body: iecDemo, wantCode: http.StatusCreated, golden: "put-created",
			check: func(t *testing.T, h *harness, b []byte) {
				var o manifest.InferenceEndpointConfig
				if err := json.Unmarshal(b, &o); err != nil {
					t.Fatal(err)
				}
				if o.Metadata.Generation != 1 || o.Metadata.Namespace != "default" || o.Metadata.UID == "" {
					t.Errorf("stored object metadata = %+v", o.Metadata)
				}
				// Defaults were applied before storing.
				if o.Spec.Replicas == nil || *o.Spec.Replicas != manifest.DefaultReplicas || o.Spec.InvocationEndpoint != manifest.DefaultInvocationEndpoint {
					t.Errorf("stored object not defaulted: %+v", o.Spec)
				}
			}},
		{name: "put unchanged", setup: iecDemo, method: http.MethodPut, path: iecPath, body: iecDemo, wantCode: http.StatusOK,
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"generation": 1,`)) || !bytes.Contains(b, []byte(`"resourceVersion": "1"`)) {
					t.Errorf("re-applying the same manifest changed it: %s", b)
				}
			}},
		{name: "put configured", setup: iecDemo, method: http.MethodPut, path: iecPath,
			body: strings.Replace(iecDemo, "image: vllm/vllm-openai:latest", "image: vllm/vllm-openai:v2", 1), wantCode: http.StatusOK,
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"image": "vllm/vllm-openai:v2"`)) || !bytes.Contains(b, []byte(`"generation": 2`)) {
					t.Errorf("changed manifest: %s", b)
				}
			}},
		{name: "put of a stale resourceVersion conflicts", setup: iecDemo, method: http.MethodPut, path: iecPath,
			prepare: func(t *testing.T, h *harness) {
				h.mustApply(t, strings.Replace(iecDemo, "image: vllm/vllm-openai:latest", "image: vllm/vllm-openai:v2", 1))
			},
			body:     strings.Replace(iecDemo, "metadata: {name: small}", "metadata: {name: small, resourceVersion: \"1\"}", 1),
			wantCode: http.StatusConflict, wantReason: ReasonConflict},
		{name: "put JSON body into URL namespace", method: http.MethodPut, path: ObjectPath(Resources[1], "team-b", "js"),
			body:     `{"apiVersion":"inference.sagemaker.aws.amazon.com/v1","kind":"JumpStartModel","metadata":{"name":"js"},"spec":{"model":{"modelId":"deepseek-llm-r1-distill-qwen-1-5b"},"server":{"instanceType":"ml.g5.8xlarge"}}}`,
			wantCode: http.StatusCreated,
			check: func(t *testing.T, h *harness, _ []byte) {
				if _, err := h.svc.Get(context.Background(), manifest.KindJumpStartModel, "team-b", "js"); err != nil {
					t.Errorf("not stored in the URL's namespace: %v", err)
				}
			}},
		{name: "unknown field names its path", method: http.MethodPut, path: iecPath,
			body: strings.Replace(iecDemo, "  instanceType: ml.g5.24xlarge\n", "  instanceType: ml.g5.24xlarge\n  replicaz: 3\n", 1), wantCode: 422, wantReason: ReasonInvalid, golden: "unknown-field",
			check: func(t *testing.T, h *harness, b []byte) {
				st := decodeStatus(t, b)
				if got := fields(st); len(got) != 1 || got[0] != "spec.replicaz" {
					t.Errorf("causes at %v, want [spec.replicaz]", got)
				}
			}},
		{name: "IEC MIG profile the GPU lacks names the resource", method: http.MethodPut, path: ObjectPath(Resources[0], "default", "qwen-mig"),
			body: badMIG(t, "examples-iec-mig.yaml"), wantCode: 422, wantReason: ReasonInvalid, golden: "mig-iec",
			check: func(t *testing.T, h *harness, b []byte) {
				st := decodeStatus(t, b)
				if !hasFieldPrefix(st, "spec.worker.resources") || !strings.Contains(st.Message, "4g.71gb") {
					t.Errorf("causes %v / message %q do not name spec.worker.resources and the profile", fields(st), st.Message)
				}
				if st.Details.Name != "qwen-mig" || st.Details.Kind != manifest.KindInferenceEndpointConfig {
					t.Errorf("details = %+v", st.Details)
				}
			}},
		{name: "JSM MIG profile the GPU lacks names acceleratorPartitionType", method: http.MethodPut, path: ObjectPath(Resources[1], "default", "deepseek"),
			body: badMIG(t, "examples-jsm-mig.yaml"), wantCode: 422, wantReason: ReasonInvalid,
			check: func(t *testing.T, h *harness, b []byte) {
				if st := decodeStatus(t, b); !hasFieldPrefix(st, "spec.server.acceleratorPartitionType") {
					t.Errorf("causes at %v", fields(st))
				}
			}},
		{name: "wrong name on URL", method: http.MethodPut, path: ObjectPath(Resources[0], "default", "other"), body: iecDemo,
			wantCode: 400, wantReason: ReasonBadRequest, golden: "name-mismatch"},
		{name: "wrong namespace on URL", method: http.MethodPut, path: ObjectPath(Resources[1], "default", "deepseek"), body: jsmDemo,
			wantCode: 400, wantReason: ReasonBadRequest},
		{name: "wrong kind for URL", method: http.MethodPut, path: ObjectPath(Resources[1], "default", "small"), body: iecDemo,
			wantCode: 400, wantReason: ReasonBadRequest},
		{name: "PUT with two documents", method: http.MethodPut, path: iecPath, body: iecDemo + "---\n" + jsmDemo,
			wantCode: 400, wantReason: ReasonBadRequest},
		{name: "invalid name on URL", method: http.MethodGet, path: ObjectPath(Resources[0], "default", "Bad_Name"),
			wantCode: 400, wantReason: ReasonBadRequest},
		{name: "invalid namespace on URL", method: http.MethodGet, path: CollectionPath(Resources[0], "NS"),
			wantCode: 400, wantReason: ReasonBadRequest},
		{name: "body too large", opts: Options{MaxBodyBytes: 512}, method: http.MethodPut, path: iecPath,
			body: iecDemo + "#" + strings.Repeat("x", 600) + "\n", wantCode: 413, wantReason: ReasonRequestEntityTooLarge, golden: "too-large"},
		{name: "too many documents", opts: Options{MaxDocuments: 2}, method: http.MethodPost, path: ApplyPath,
			body: iecDemo + "---\n" + jsmDemo + "---\n" + strings.Replace(iecDemo, "name: small", "name: small2", 1), wantCode: 413, wantReason: ReasonRequestEntityTooLarge},
		{name: "empty apply", method: http.MethodPost, path: ApplyPath, body: "# nothing\n---\n", wantCode: 400, wantReason: ReasonBadRequest},
		{name: "get not found", method: http.MethodGet, path: iecPath, wantCode: 404, wantReason: ReasonNotFound, golden: "not-found"},
		{name: "delete not found", method: http.MethodDelete, path: iecPath, wantCode: 404, wantReason: ReasonNotFound},
		{name: "events not found", method: http.MethodGet, path: iecPath + "/events", wantCode: 404, wantReason: ReasonNotFound},
		{name: "kvcache not found", method: http.MethodGet, path: iecPath + "/kvcache", wantCode: 404, wantReason: ReasonNotFound},
		{name: "POST on kvcache", setup: iecDemo, method: http.MethodPost, path: iecPath + "/kvcache", wantCode: 405, wantReason: ReasonMethodNotAllowed},
		{name: "kvcache", setup: iecDemo + `  kvCacheSpec: {l1CacheSize: 8Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: "redis://127.0.0.1:6379"}}` + "\n", method: http.MethodGet, path: iecPath + "/kvcache", wantCode: 200, golden: "kvcache",
			prepare: func(t *testing.T, h *harness) {
				h.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
			},
			check: func(t *testing.T, h *harness, b []byte) {
				var r KVCacheReport
				if err := json.Unmarshal(b, &r); err != nil {
					t.Fatal(err)
				}
				// The fake replica has no address to scrape: the tiers and
				// their sizes come from the spec.
				if r.Kind != "KVCacheReport" || len(r.Tiers) != 3 || r.Tiers[0].Name != manifest.KVTierGPU || r.Tiers[1].EachBytes != 8<<30 {
					t.Errorf("kvcache = %s", b)
				}
			}},
		{name: "unknown resource", method: http.MethodGet, path: BasePath + "/pods", wantCode: 404, wantReason: ReasonNotFound},
		{name: "unknown subresource", method: http.MethodGet, path: iecPath + "/logs", wantCode: 404, wantReason: ReasonNotFound},
		{name: "other group", method: http.MethodGet, path: "/apis/apps/v1/deployments", wantCode: 404, wantReason: ReasonNotFound},
		{name: "POST on object", method: http.MethodPost, path: iecPath, body: iecDemo, wantCode: 405, wantReason: ReasonMethodNotAllowed, golden: "method-not-allowed"},
		{name: "GET on apply", method: http.MethodGet, path: ApplyPath, wantCode: 405, wantReason: ReasonMethodNotAllowed},
		{name: "DELETE on collection", method: http.MethodDelete, path: CollectionPath(Resources[0], "default"), wantCode: 405, wantReason: ReasonMethodNotAllowed},
		{name: "get object", setup: iecDemo, method: http.MethodGet, path: iecPath, wantCode: 200, golden: "get-object"},
		{name: "list in namespace", setup: iecDemo + "---\n" + jsmDemo, method: http.MethodGet, path: CollectionPath(Resources[1], "team-a"), wantCode: 200, golden: "list",
			check: func(t *testing.T, h *harness, b []byte) {
				var l struct {
					Kind  string
					Items []manifest.JumpStartModel
				}
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				if l.Kind != "JumpStartModelList" || len(l.Items) != 1 || l.Items[0].Metadata.Name != "deepseek" {
					t.Errorf("list = %s", b)
				}
			}},
		{name: "list other namespace is empty", setup: jsmDemo, method: http.MethodGet, path: CollectionPath(Resources[1], "default"), wantCode: 200,
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"items": []`)) {
					t.Errorf("want an empty items array: %s", b)
				}
			}},
		{name: "list all namespaces", setup: jsmDemo + "---\n" + strings.Replace(jsmDemo, "team-a", "team-b", 1), method: http.MethodGet, path: CollectionPath(Resources[1], ""), wantCode: 200,
			check: func(t *testing.T, h *harness, b []byte) {
				var l struct{ Items []manifest.JumpStartModel }
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				if len(l.Items) != 2 || l.Items[0].Metadata.Namespace != "team-a" || l.Items[1].Metadata.Namespace != "team-b" {
					t.Errorf("want both namespaces in order: %s", b)
				}
			}},
		{name: "get deployed object", setup: iecDemo, method: http.MethodGet, path: iecPath, wantCode: 200, golden: "get-deployed",
			prepare: func(t *testing.T, h *harness) {
				h.clk.Step(time.Minute)
				h.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
			},
			check: func(t *testing.T, h *harness, b []byte) {
				var o manifest.InferenceEndpointConfig
				if err := json.Unmarshal(b, &o); err != nil {
					t.Fatal(err)
				}
				if o.Status.State != manifest.StateDeploymentComplete || o.Status.ReadyReplicas != 1 || o.Status.ObservedGeneration != 1 {
					t.Errorf("the controller's status does not show through GET: %+v", o.Status)
				}
			}},
		{name: "events", setup: iecDemo, method: http.MethodGet, path: iecPath + "/events", wantCode: 200, golden: "events",
			prepare: func(t *testing.T, h *harness) {
				h.clk.Step(time.Minute)
				h.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
			},
			check: func(t *testing.T, h *harness, b []byte) {
				var l EventList
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				// Oldest first: the apply, then what the controller did a minute later.
				if len(l.Items) < 2 || l.Items[0].Reason != "Applied" || !l.Items[0].Time.Equal(t0) || !l.Items[len(l.Items)-1].Time.Equal(t0.Add(time.Minute)) {
					t.Errorf("events = %+v", l.Items)
				}
			}},
		{name: "delete", setup: iecDemo, method: http.MethodDelete, path: iecPath, wantCode: 200, golden: "delete",
			prepare: func(t *testing.T, h *harness) {
				h.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
			},
			check: func(t *testing.T, h *harness, _ []byte) {
				// Deletion is started, not done: the controller drains and
				// stops the replicas, then removes the object.
				o, err := h.svc.Get(context.Background(), manifest.KindInferenceEndpointConfig, "default", "small")
				if err != nil || o.GetStatus().State != manifest.StateDeletionPending {
					t.Fatalf("after DELETE: %v %+v", err, o)
				}
				if got := h.rt.Running(); len(got) != 1 {
					t.Fatalf("running before the controller deletes: %v", got)
				}
				h.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
				if _, err := h.svc.Get(context.Background(), manifest.KindInferenceEndpointConfig, "default", "small"); !errors.Is(err, manifest.ErrNotFound) {
					t.Errorf("still stored: %v", err)
				}
				if got := h.rt.Running(); len(got) != 0 {
					t.Errorf("replicas left running: %v", got)
				}
			}},
		{name: "multi-document apply", method: http.MethodPost, path: ApplyPath, body: iecDemo + "---\n" + jsmDemo, wantCode: 200, golden: "apply-list"},
		{name: "apply ?namespace= fills missing namespaces", method: http.MethodPost, path: ApplyPath + "?namespace=prod", body: iecDemo + "---\n" + jsmDemo, wantCode: 200,
			check: func(t *testing.T, h *harness, b []byte) {
				var l ApplyResultList
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				if len(l.Items) != 2 || l.Items[0].Namespace != "prod" || l.Items[1].Namespace != "team-a" {
					t.Errorf("results %+v", l.Items)
				}
				if got := h.stored(t); !slices.Equal(got, []string{"InferenceEndpointConfig/prod/small", "JumpStartModel/team-a/deepseek"}) {
					t.Errorf("stored %v", got)
				}
			}},
		{name: "multi-document all or nothing", method: http.MethodPost, path: ApplyPath,
			body: iecDemo + "---\n" + badMIG(t, "examples-iec-mig.yaml") + "---\n" + jsmDemo, wantCode: 422, wantReason: ReasonInvalid, golden: "apply-invalid",
			check: func(t *testing.T, h *harness, b []byte) {
				if got := h.stored(t); len(got) != 0 {
					t.Errorf("stored %v although a document was invalid", got)
				}
				st := decodeStatus(t, b)
				for _, c := range st.Details.Causes {
					if c.Document == nil || *c.Document != 1 || c.Object != "InferenceEndpointConfig/qwen-mig" || c.Line != 14 {
						t.Errorf("cause not placed in document 1 at line 14: %+v", c)
					}
				}
			}},
		{name: "duplicate object in one apply", method: http.MethodPost, path: ApplyPath, body: iecDemo + "---\n" + iecDemo, wantCode: 422, wantReason: ReasonInvalid,
			check: func(t *testing.T, h *harness, b []byte) {
				if got := h.stored(t); len(got) != 0 {
					t.Errorf("stored %v", got)
				}
			}},
		{name: "immutable change refused before anything is stored", setup: iecDemo, method: http.MethodPost, path: ApplyPath,
			body: jsmDemo + "---\n" + strings.Replace(iecDemo, "spec:\n", "spec:\n  intelligentRoutingSpec: {enabled: true}\n", 1), wantCode: 422, wantReason: ReasonInvalid,
			check: func(t *testing.T, h *harness, b []byte) {
				if got := h.stored(t); !slices.Equal(got, []string{"InferenceEndpointConfig/default/small"}) { // only the setup
					t.Errorf("stored %v", got)
				}
				if m := h.meta(t, manifest.KindInferenceEndpointConfig, "default", "small"); m.Generation != 1 || m.ResourceVersion != "1" {
					t.Errorf("the setup object was written again: generation %d, resourceVersion %s", m.Generation, m.ResourceVersion)
				}
				if st := decodeStatus(t, b); !hasFieldPrefix(st, "spec.intelligentRoutingSpec") {
					t.Errorf("causes at %v", fields(st))
				}
			}},
		{name: "round-tripped get output applies unchanged", setup: iecDemo, method: http.MethodPost, path: ApplyPath, wantCode: 200,
			bodyFrom: func(t *testing.T, h *harness) string {
				// get output carries status and server-set metadata, which
				// apply ignores; the controller writes a full status first.
				h.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
				_, b := h.do(t, http.MethodGet, iecPath, "")
				for _, want := range []string{`"state": "DeploymentComplete"`, `"conditions"`, `"uid"`, `"resourceVersion"`} {
					if !bytes.Contains(b, []byte(want)) {
						t.Fatalf("get output lacks %s: %s", want, b)
					}
				}
				return string(b)
			},
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"action": "unchanged"`)) {
					t.Errorf("re-applying get output: %s", b)
				}
			}},
		{name: "discovery", method: http.MethodGet, path: BasePath, wantCode: 200, golden: "discovery"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			if tt.setup != "" {
				h.mustApply(t, tt.setup)
			}
			if tt.prepare != nil {
				tt.prepare(t, h)
			}
			body := tt.body
			if tt.bodyFrom != nil {
				body = tt.bodyFrom(t, h)
			}
			code, b := h.do(t, tt.method, tt.path, body)
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d: %s", code, tt.wantCode, b)
			}
			if tt.wantReason != "" {
				st := decodeStatus(t, b)
				if st.Reason != tt.wantReason || st.Code != code || st.Status != StatusFailure || st.Message == "" {
					t.Errorf("status = %+v, want reason %s code %d", st, tt.wantReason, code)
				}
			}
			if tt.golden != "" {
				golden(t, tt.golden, b)
			}
			if tt.check != nil {
				tt.check(t, h, b)
			}
		})
	}
}

// TestStoreErrors checks how failures of the real Store reach the wire.
// Errors the service cannot produce on demand are covered by TestStatusFor.
func TestStoreErrors(t *testing.T) {
	t.Run("object being deleted", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.mustApply(t, jsmDemo)
		if code, b := h.do(t, http.MethodDelete, ObjectPath(Resources[1], "team-a", "deepseek"), ""); code != 200 {
			t.Fatalf("delete: %d %s", code, b)
		}
		// Until the controller has removed it, the JSM cannot be applied;
		// the IEC before it in the body is applied, and the message says so.
		code, b := h.do(t, http.MethodPost, ApplyPath, iecDemo+"---\n"+jsmDemo)
		st := decodeStatus(t, b)
		if code != http.StatusConflict || st.Reason != ReasonConflict || !strings.Contains(st.Message, "being deleted") {
			t.Fatalf("got %d %s %q", code, st.Reason, st.Message)
		}
		if !strings.Contains(st.Message, "already applied: InferenceEndpointConfig/default/small created") {
			t.Errorf("message does not list what was applied: %q", st.Message)
		}
		if st.Details == nil || st.Details.Kind != manifest.KindJumpStartModel || st.Details.Name != "deepseek" {
			t.Errorf("details = %+v", st.Details)
		}
		if got := h.stored(t); !slices.Equal(got, []string{"InferenceEndpointConfig/default/small", "JumpStartModel/team-a/deepseek"}) {
			t.Errorf("stored %v", got)
		}
		// Once deletion completes, the same body applies.
		h.reconcile(t, manifest.KindJumpStartModel, "team-a", "deepseek")
		if code, b := h.do(t, http.MethodPost, ApplyPath, iecDemo+"---\n"+jsmDemo); code != 200 || !bytes.Contains(b, []byte(`"action": "created"`)) {
			t.Errorf("after deletion: %d %s", code, b)
		}
	})
	t.Run("store unavailable", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.mustApply(t, iecDemo)
		if err := h.db.Close(); err != nil { // as if the database failed under the server
			t.Fatal(err)
		}
		for _, req := range []struct{ method, path, body string }{
			{http.MethodPost, ApplyPath, iecDemo},
			{http.MethodGet, ObjectPath(Resources[0], "default", "small"), ""},
			{http.MethodGet, CollectionPath(Resources[0], ""), ""},
			{http.MethodDelete, ObjectPath(Resources[0], "default", "small"), ""},
		} {
			code, b := h.do(t, req.method, req.path, req.body)
			st := decodeStatus(t, b)
			if code != 500 || st.Reason != ReasonInternalError || !strings.Contains(st.Message, "database not open") {
				t.Errorf("%s %s: %d %s %q", req.method, req.path, code, st.Reason, st.Message)
			}
		}
	})
}

func TestResolveKind(t *testing.T) {
	for _, in := range []string{"InferenceEndpointConfig", "inferenceendpointconfigs", "inferenceendpointconfig", "iec", "IEC",
		"inferenceendpointconfig.inference.sagemaker.aws.amazon.com", "inferenceendpointconfigs.v1.inference.sagemaker.aws.amazon.com"} {
		if r, ok := ResolveKind(in); !ok || r.Kind != manifest.KindInferenceEndpointConfig {
			t.Errorf("ResolveKind(%q) = %v, %v", in, r, ok)
		}
	}
	for _, in := range []string{"JumpStartModel", "jumpstartmodels", "jsm"} {
		if r, ok := ResolveKind(in); !ok || r.Kind != manifest.KindJumpStartModel {
			t.Errorf("ResolveKind(%q) = %v, %v", in, r, ok)
		}
	}
	for _, in := range []string{"", "pods", "iecs", "inferenceendpointconfig.apps"} {
		if _, ok := ResolveKind(in); ok {
			t.Errorf("ResolveKind(%q) resolved", in)
		}
	}
}

func TestReadRefs(t *testing.T) {
	refs, err := ReadRefs([]byte("# c\n---\n" + iecDemo + "---\n" + strings.Replace(jsmDemo, "spec:", "spec:\n  unknownField: 1", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[0].Name != "small" || refs[0].Namespace != "" || refs[0].Line != 3 ||
		refs[1].Kind != manifest.KindJumpStartModel || refs[1].Namespace != "team-a" {
		t.Errorf("refs = %+v", refs)
	}
	if _, err := ReadRefs([]byte("kind: JumpStartModel\n")); err == nil {
		t.Error("a document without a name was accepted")
	}
}

func BenchmarkApplyUnchanged(b *testing.B) {
	clk := clock.NewFake(t0)
	h, _ := New(Options{Store: newService(b, clk, openStore(b), fake.New(fake.WithClock(clk)), nil)})
	body := exampleFile(b, "examples-iec-kv-routing.yaml")
	run := func() int {
		req := httptest.NewRequest(http.MethodPost, ApplyPath, strings.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	if c := run(); c != 200 {
		b.Fatalf("code %d", c)
	}
	b.ReportAllocs()
	for b.Loop() {
		if c := run(); c != 200 {
			b.Fatalf("code %d", c)
		}
	}
}

// badMIG is a published MIG example asking for a profile its instance
// type's GPU lacks: the H200's 4g.71gb on an A100 p4d.
func badMIG(t *testing.T, name string) string {
	t.Helper()
	s := exampleFile(t, name)
	out := strings.Replace(strings.Replace(s, "ml.p5en.48xlarge", "ml.p4d.24xlarge", 1), "mig-7g.40gb", "mig-4g.71gb", 1)
	if out == s {
		t.Fatalf("%s: nothing to change", name)
	}
	return out
}

// doAs is do with the request's Content-Type.
func (h *harness) doAs(t *testing.T, method, path, contentType, body string) (int, []byte) {
	t.Helper()
	code, b, _ := h.request(t, method, path, contentType, body)
	return code, b
}

// The verbs kubectl writes with: create (POST to the collection), merge
// and JSON patches, the scale subresource and server-side apply (field
// managers, conflicts, force), each validated like an apply and answering
// the stored object (or its Scale).
func TestKubernetesVerbs(t *testing.T) {
	h := newHarness(t, Options{})
	coll := CollectionPath(Resources[0], "default")
	obj := ObjectPath(Resources[0], "default", "small")
	ssaObj := ObjectPath(Resources[1], "default", "ssa")
	ssaDoc := func(replicas int) string {
		return fmt.Sprintf("apiVersion: inference.sagemaker.aws.amazon.com/v1\nkind: JumpStartModel\nmetadata: {name: ssa}\nspec:\n"+
			"  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}\n  server: {instanceType: ml.g5.8xlarge}\n  replicas: %d\n", replicas)
	}
	var ssaVersion string
	resourceVersion := func(b []byte) string {
		var o struct {
			Metadata struct{ ResourceVersion string } `json:"metadata"`
		}
		if err := json.Unmarshal(b, &o); err != nil || o.Metadata.ResourceVersion == "" {
			t.Fatalf("no resourceVersion: %v %s", err, b)
		}
		return o.Metadata.ResourceVersion
	}
	replicas := func(b []byte) int32 {
		var o struct {
			Spec struct{ Replicas *int32 } `json:"spec"`
		}
		if err := json.Unmarshal(b, &o); err != nil || o.Spec.Replicas == nil {
			t.Fatalf("not an object with spec.replicas: %v %s", err, b)
		}
		return *o.Spec.Replicas
	}
	for _, step := range []struct {
		name, method, path, contentType, body string
		wantCode                              int
		wantReason                            string
		check                                 func(b []byte)
	}{
		{"create", http.MethodPost, coll, "application/yaml", iecDemo, http.StatusCreated, "", func(b []byte) {
			if replicas(b) != manifest.DefaultReplicas {
				t.Errorf("created: %s", b)
			}
		}},
		{"create again", http.MethodPost, coll, "application/yaml", iecDemo, http.StatusConflict, ReasonAlreadyExists, nil},
		{"create into another namespace's URL", http.MethodPost, CollectionPath(Resources[0], "other"), "application/yaml",
			strings.Replace(iecDemo, "metadata: {name: small}", "metadata: {name: small, namespace: default}", 1), http.StatusBadRequest, ReasonBadRequest, nil},
		{"create a JumpStartModel at the IEC URL", http.MethodPost, coll, "application/yaml", jsmDemo, http.StatusBadRequest, ReasonBadRequest, nil},
		{"merge patch", http.MethodPatch, obj, mergePatch, `{"spec":{"replicas":3}}`, http.StatusOK, "", func(b []byte) {
			if replicas(b) != 3 {
				t.Errorf("merge patched: %s", b)
			}
		}},
		{"json patch", http.MethodPatch, obj, jsonPatch, `[{"op":"replace","path":"/spec/replicas","value":2}]`, http.StatusOK, "", func(b []byte) {
			if replicas(b) != 2 {
				t.Errorf("json patched: %s", b)
			}
		}},
		{"patch adding an unknown field", http.MethodPatch, obj, mergePatch, `{"spec":{"replicaz":3}}`, http.StatusUnprocessableEntity, ReasonInvalid, nil},
		{"patch with a failing test op", http.MethodPatch, obj, jsonPatch, `[{"op":"test","path":"/spec/replicas","value":9}]`, http.StatusBadRequest, ReasonBadRequest, nil},
		{"strategic merge patch", http.MethodPatch, obj, "application/strategic-merge-patch+json", `{"spec":{"replicas":3}}`, http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType, nil},
		{"patch of a missing object", http.MethodPatch, ObjectPath(Resources[0], "default", "nope"), mergePatch, `{}`, http.StatusNotFound, ReasonNotFound, nil},
		{"scale", http.MethodGet, obj + "/scale", "", "", http.StatusOK, "", func(b []byte) {
			if !bytes.Contains(b, []byte(`"kind": "Scale"`)) || !bytes.Contains(b, []byte(`"replicas": 2`)) {
				t.Errorf("scale: %s", b)
			}
		}},
		{"scale patch", http.MethodPatch, obj + "/scale", mergePatch, `{"spec":{"replicas":4}}`, http.StatusOK, "", func(b []byte) {
			if !bytes.Contains(b, []byte(`"replicas": 4`)) {
				t.Errorf("scaled: %s", b)
			}
			_, ob := h.do(t, http.MethodGet, obj, "")
			if replicas(ob) != 4 {
				t.Errorf("the object after scaling: %s", ob)
			}
		}},
		{"scale put", http.MethodPut, obj + "/scale", "application/json", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"small"},"spec":{"replicas":1}}`, http.StatusOK, "", func(b []byte) {
			if !bytes.Contains(b, []byte(`"replicas": 1`)) {
				t.Errorf("scaled: %s", b)
			}
		}},
		{"scale past the limit", http.MethodPatch, obj + "/scale", mergePatch, `{"spec":{"replicas":100000000}}`, http.StatusBadRequest, ReasonBadRequest, nil},
		{"scale to a negative count", http.MethodPatch, obj + "/scale", mergePatch, `{"spec":{"replicas":-1}}`, http.StatusBadRequest, ReasonBadRequest, nil},
		{"server-side apply creates", http.MethodPatch, ssaObj + "?fieldManager=alice", applyPatch, ssaDoc(2), http.StatusCreated, "", func(b []byte) {
			if replicas(b) != 2 || !bytes.Contains(b, []byte(`"manager": "alice"`)) || !bytes.Contains(b, []byte(`"operation": "Apply"`)) {
				t.Errorf("server-side apply: %s", b)
			}
			ssaVersion = resourceVersion(b)
		}},
		{"server-side apply of the same is unchanged", http.MethodPatch, ssaObj + "?fieldManager=alice", applyPatch, ssaDoc(2), http.StatusOK, "", func(b []byte) {
			if v := resourceVersion(b); v != ssaVersion {
				t.Errorf("a repeated server-side apply wrote: resourceVersion %s → %s", ssaVersion, v)
			}
		}},
		{"another manager's value conflicts", http.MethodPatch, ssaObj + "?fieldManager=bob", applyPatch, ssaDoc(3), http.StatusConflict, ReasonConflict, func(b []byte) {
			if st := decodeStatus(t, b); st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != ".spec.replicas" ||
				!strings.Contains(st.Message, `conflict with "alice"`) {
				t.Errorf("conflict: %s", b)
			}
		}},
		{"force takes the field", http.MethodPatch, ssaObj + "?fieldManager=bob&force=true", applyPatch, ssaDoc(3), http.StatusOK, "", func(b []byte) {
			if replicas(b) != 3 {
				t.Errorf("forced: %s", b)
			}
		}},
		{"server-side apply without a field manager", http.MethodPatch, ssaObj, applyPatch, ssaDoc(3), http.StatusBadRequest, ReasonBadRequest, nil},
		{"server-side apply of an unknown field", http.MethodPatch, ssaObj + "?fieldManager=alice", applyPatch,
			strings.Replace(ssaDoc(3), "replicas: 3", "replicaz: 3", 1), http.StatusUnprocessableEntity, ReasonInvalid, nil},
		{"status", http.MethodGet, obj + "/status", "", "", http.StatusOK, "", func(b []byte) {
			if !bytes.Contains(b, []byte(`"status": {`)) || replicas(b) != 1 {
				t.Errorf("status: %s", b)
			}
		}},
		{"status is read-only", http.MethodPut, obj + "/status", "application/json", `{}`, http.StatusMethodNotAllowed, ReasonMethodNotAllowed, nil},
		{"delete orphaning the replicas", http.MethodDelete, obj, "application/json", `{"propagationPolicy":"Orphan"}`, http.StatusBadRequest, ReasonBadRequest, nil},
		{"delete with a stale precondition", http.MethodDelete, obj, "application/json", `{"preconditions":{"resourceVersion":"1"}}`, http.StatusConflict, ReasonConflict, func(b []byte) {
			if st := decodeStatus(t, b); !strings.HasPrefix(st.Message, "Precondition failed: ResourceVersion in precondition: 1,") {
				t.Errorf("precondition: %s", b)
			}
		}},
		{"delete as a dry run", http.MethodDelete, obj + "?dryRun=All", "application/json", `{"propagationPolicy":"Foreground"}`, http.StatusOK, "", func(b []byte) {
			if code, _ := h.do(t, http.MethodGet, obj, ""); code != http.StatusOK || replicas(b) != 1 {
				t.Errorf("a dry-run delete: the object answers %d; the answer was %s", code, b)
			}
		}},
		{"delete", http.MethodDelete, obj, "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}`, http.StatusOK, "", func(b []byte) {
			if st := decodeStatus(t, b); st.Status != StatusSuccess {
				t.Errorf("delete: %s", b)
			}
		}},
	} {
		code, b := h.doAs(t, step.method, step.path, step.contentType, step.body)
		if code != step.wantCode {
			t.Fatalf("%s: %d %s, want %d", step.name, code, b, step.wantCode)
		}
		if step.wantReason != "" {
			if st := decodeStatus(t, b); st.Reason != step.wantReason {
				t.Fatalf("%s: reason %s (%s), want %s", step.name, st.Reason, st.Message, step.wantReason)
			}
		}
		if step.check != nil {
			step.check(b)
		}
	}
}
