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
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/manifest"
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

type harness struct {
	store *MemoryStore
	srv   *httptest.Server
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	st := NewMemoryStore(clock.NewFake(t0))
	o.Store = st
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/apis/", h) // mounted as capstan serve mounts it
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &harness{store: st, srv: srv}
}

func (h *harness) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return resp.StatusCode, b
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

// golden compares a response body with testdata/NAME.json.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
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
		setup      string // applied first
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
				var r struct {
					manifest.ApplyResult
					Object manifest.InferenceEndpointConfig `json:"object"`
				}
				if err := json.Unmarshal(b, &r); err != nil {
					t.Fatal(err)
				}
				if r.Action != manifest.ActionCreated || r.Generation != 1 || r.Namespace != "default" {
					t.Errorf("result = %+v", r.ApplyResult)
				}
				// Defaults were applied before storing.
				if r.Object.Spec.Replicas == nil || *r.Object.Spec.Replicas != manifest.DefaultReplicas || r.Object.Spec.InvocationEndpoint != manifest.DefaultInvocationEndpoint {
					t.Errorf("stored object not defaulted: %+v", r.Object.Spec)
				}
			}},
		{name: "put unchanged", setup: iecDemo, method: http.MethodPut, path: iecPath, body: iecDemo, wantCode: http.StatusOK,
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"action": "unchanged"`)) {
					t.Errorf("re-applying the same manifest: %s", b)
				}
			}},
		{name: "put configured", setup: iecDemo, method: http.MethodPut, path: iecPath,
			body: strings.Replace(iecDemo, "image: vllm/vllm-openai:latest", "image: vllm/vllm-openai:v2", 1), wantCode: http.StatusOK,
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"action": "configured"`)) || !bytes.Contains(b, []byte(`"generation": 2`)) {
					t.Errorf("changed manifest: %s", b)
				}
			}},
		{name: "put JSON body into URL namespace", method: http.MethodPut, path: ObjectPath(Resources[1], "team-b", "js"),
			body:     `{"apiVersion":"inference.sagemaker.aws.amazon.com/v1","kind":"JumpStartModel","metadata":{"name":"js"},"spec":{"model":{"modelId":"deepseek-llm-r1-distill-qwen-1-5b"},"server":{"instanceType":"ml.g5.8xlarge"}}}`,
			wantCode: http.StatusCreated,
			check: func(t *testing.T, h *harness, _ []byte) {
				if _, err := h.store.Get(context.Background(), manifest.KindJumpStartModel, "team-b", "js"); err != nil {
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
		{name: "IEC MIG request names resources.limits", method: http.MethodPut, path: ObjectPath(Resources[0], "default", "qwen-mig"),
			body: exampleFile(t, "examples-iec-mig.yaml"), wantCode: 422, wantReason: ReasonInvalid, golden: "mig-iec",
			check: func(t *testing.T, h *harness, b []byte) {
				st := decodeStatus(t, b)
				if !hasFieldPrefix(st, "spec.worker.resources.limits") || !strings.Contains(st.Message, "MIG") {
					t.Errorf("causes %v / message %q do not name spec.worker.resources.limits and MIG", fields(st), st.Message)
				}
				if st.Details.Name != "qwen-mig" || st.Details.Kind != manifest.KindInferenceEndpointConfig {
					t.Errorf("details = %+v", st.Details)
				}
			}},
		{name: "JSM MIG partition names acceleratorPartitionType", method: http.MethodPut, path: ObjectPath(Resources[1], "default", "deepseek"),
			body: exampleFile(t, "examples-jsm-mig.yaml"), wantCode: 422, wantReason: ReasonInvalid,
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
		{name: "events", setup: iecDemo, method: http.MethodGet, path: iecPath + "/events", wantCode: 200, golden: "events"},
		{name: "delete", setup: iecDemo, method: http.MethodDelete, path: iecPath, wantCode: 200, golden: "delete",
			check: func(t *testing.T, h *harness, _ []byte) {
				if _, err := h.store.Get(context.Background(), manifest.KindInferenceEndpointConfig, "default", "small"); !errors.Is(err, manifest.ErrNotFound) {
					t.Errorf("still stored: %v", err)
				}
			}},
		{name: "multi-document apply", method: http.MethodPost, path: ApplyPath, body: iecDemo + "---\n" + jsmDemo, wantCode: 200, golden: "apply-list"},
		{name: "apply ?namespace= fills missing namespaces", method: http.MethodPost, path: ApplyPath + "?namespace=prod", body: iecDemo + "---\n" + jsmDemo, wantCode: 200,
			check: func(t *testing.T, h *harness, _ []byte) {
				if got := h.store.Applied(); len(got) != 2 || got[0] != "InferenceEndpointConfig/prod/small" || got[1] != "JumpStartModel/team-a/deepseek" {
					t.Errorf("applied %v", got)
				}
			}},
		{name: "multi-document all or nothing", method: http.MethodPost, path: ApplyPath,
			body: iecDemo + "---\n" + exampleFile(t, "examples-iec-mig.yaml") + "---\n" + jsmDemo, wantCode: 422, wantReason: ReasonInvalid, golden: "apply-invalid",
			check: func(t *testing.T, h *harness, b []byte) {
				if got := h.store.Applied(); len(got) != 0 {
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
				if got := h.store.Applied(); len(got) != 0 {
					t.Errorf("stored %v", got)
				}
			}},
		{name: "immutable change refused before anything is stored", setup: iecDemo, method: http.MethodPost, path: ApplyPath,
			body: jsmDemo + "---\n" + strings.Replace(iecDemo, "spec:\n", "spec:\n  intelligentRoutingSpec: {enabled: true}\n", 1), wantCode: 422, wantReason: ReasonInvalid,
			check: func(t *testing.T, h *harness, b []byte) {
				if got := h.store.Applied(); len(got) != 1 { // only the setup
					t.Errorf("applied %v", got)
				}
				if st := decodeStatus(t, b); !hasFieldPrefix(st, "spec.intelligentRoutingSpec") {
					t.Errorf("causes at %v", fields(st))
				}
			}},
		{name: "round-tripped get output applies unchanged", setup: iecDemo, method: http.MethodPost, path: ApplyPath, wantCode: 200,
			bodyFrom: func(t *testing.T, h *harness) string {
				// get output carries status and server-set metadata, which apply ignores.
				h.store.SetStatus(manifest.KindInferenceEndpointConfig, "default", "small", func(s *manifest.Status) { s.State = manifest.StateDeploymentComplete })
				_, b := h.do(t, http.MethodGet, iecPath, "")
				return string(b)
			},
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"action": "unchanged"`)) {
					t.Errorf("re-applying get output: %s", b)
				}
			}},
		{name: "discovery", method: http.MethodGet, path: BasePath, wantCode: 200, golden: "discovery"},
		{name: "group list", method: http.MethodGet, path: "/apis", wantCode: 200,
			check: func(t *testing.T, h *harness, b []byte) {
				if !bytes.Contains(b, []byte(`"groupVersion": "inference.sagemaker.aws.amazon.com/v1"`)) {
					t.Errorf("%s", b)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			if tt.setup != "" {
				h.mustApply(t, tt.setup)
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

// TestStoreErrors checks how errors from the Store reach the wire.
func TestStoreErrors(t *testing.T) {
	tests := []struct {
		name       string
		fail       error
		wantCode   int
		wantReason string
		wantMsg    string
	}{
		{"endpoint name taken", fmt.Errorf("register: %w: endpoint %q already belongs to X", endpoint.ErrNameInUse, "deepseek"), 409, ReasonAlreadyExists, "already belongs"},
		{"internal", errors.New("bolt: disk full"), 500, ReasonInternalError, "disk full"},
		{"validation from the store", manifest.ErrorList{{Path: "spec.replicas", Message: "too many"}}, 422, ReasonInvalid, "spec.replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.store.FailApply = func(o manifest.Object) error {
				if o.GetKind() == manifest.KindJumpStartModel {
					return tt.fail
				}
				return nil
			}
			code, b := h.do(t, http.MethodPost, ApplyPath, iecDemo+"---\n"+jsmDemo)
			st := decodeStatus(t, b)
			if code != tt.wantCode || st.Reason != tt.wantReason || !strings.Contains(st.Message, tt.wantMsg) {
				t.Fatalf("got %d %s %q", code, st.Reason, st.Message)
			}
			// The first document was applied before the store failed; the
			// message says so.
			if !strings.Contains(st.Message, "InferenceEndpointConfig/default/small created") {
				t.Errorf("message does not list what was applied: %q", st.Message)
			}
		})
	}
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
	st := NewMemoryStore(clock.NewFake(t0))
	h, _ := New(Options{Store: st})
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
