package manifestapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
	"github.com/capstan-dev/capstan/internal/store"
)

var _ Store = (*deployment.Service)(nil)

// newDeploymentService is the real Store as capstan serve wires it, over a
// fake runtime and the default cluster, with a fake clock.
func newDeploymentService(t *testing.T) *deployment.Service {
	t.Helper()
	clk := clock.NewFake(t0)
	st, err := store.Open(filepath.Join(t.TempDir(), "capstan.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cl, err := cluster.New(catalog.Default(), cluster.DefaultInstanceGroups())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := deployment.New(deployment.Options{
		Store: st, Clock: clk, Registerer: prometheus.NewRegistry(),
		Runtime: fake.New(fake.WithClock(clk)), Cluster: cl,
		Gateway:    gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry()}),
		GatewayURL: "http://127.0.0.1:8080", EngineArgs: []string{"--time-scale=0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestWithDeploymentService drives the handler over the real
// deployment.Service: apply semantics, all-or-nothing validation, status
// written by the controller, events and deletion.
func TestWithDeploymentService(t *testing.T) {
	svc := newDeploymentService(t)
	h, err := New(Options{Store: svc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	hr := &harness{srv: srv}
	ctx := context.Background()
	reconcile := func(kind, ns, name string) {
		t.Helper()
		for range 4 {
			if err := svc.Controller().Reconcile(ctx, deployment.Key(kind, ns, name)); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
		}
	}
	actions := func(b []byte) []string {
		var l ApplyResultList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		var out []string
		for _, r := range l.Items {
			out = append(out, r.Name+" "+r.Action)
		}
		return out
	}
	both := iecDemo + "---\n" + jsmDemo

	code, b := hr.do(t, http.MethodPost, ApplyPath, both)
	if code != 200 || strings.Join(actions(b), ",") != "small created,deepseek created" {
		t.Fatalf("apply: %d %s", code, b)
	}
	if _, b := hr.do(t, http.MethodPost, ApplyPath, both); strings.Join(actions(b), ",") != "small unchanged,deepseek unchanged" {
		t.Fatalf("re-apply: %s", b)
	}

	// A MIG document makes the whole body fail; the valid change in it is
	// not stored either.
	changed := strings.Replace(iecDemo, "vllm-openai:latest", "vllm-openai:v2", 1)
	code, b = hr.do(t, http.MethodPost, ApplyPath, changed+"---\n"+exampleFile(t, "examples-jsm-mig.yaml"))
	if st := decodeStatus(t, b); code != 422 || !hasFieldPrefix(st, "spec.server.acceleratorPartitionType") {
		t.Fatalf("MIG body: %d %s", code, b)
	}
	if o, _ := svc.Get(ctx, manifest.KindInferenceEndpointConfig, "default", "small"); o.GetMeta().Generation != 1 {
		t.Fatalf("the valid document of a refused body was stored: generation %d", o.GetMeta().Generation)
	}
	if _, b := hr.do(t, http.MethodPost, ApplyPath, changed); strings.Join(actions(b), ",") != "small configured" {
		t.Fatalf("change: %s", b)
	}

	// The controller's status shows through GET.
	reconcile(manifest.KindInferenceEndpointConfig, "default", "small")
	code, b = hr.do(t, http.MethodGet, ObjectPath(Resources[0], "default", "small"), "")
	var got manifest.InferenceEndpointConfig
	if err := json.Unmarshal(b, &got); code != 200 || err != nil {
		t.Fatalf("get: %d %v %s", code, err, b)
	}
	if got.Status.State != manifest.StateDeploymentComplete || got.Status.ReadyReplicas != 1 || got.Status.Endpoints == nil || got.Status.Endpoints.URL == "" {
		t.Errorf("status after reconcile: %+v", got.Status)
	}
	code, b = hr.do(t, http.MethodGet, ObjectPath(Resources[0], "default", "small")+"/events", "")
	if code != 200 || !strings.Contains(string(b), `"reason": "Applied"`) {
		t.Errorf("events: %d %s", code, b)
	}

	// Immutable fields are refused with their path.
	code, b = hr.do(t, http.MethodPut, ObjectPath(Resources[0], "default", "small"),
		strings.Replace(changed, "spec:\n", "spec:\n  intelligentRoutingSpec: {enabled: true}\n", 1))
	if st := decodeStatus(t, b); code != 422 || !hasFieldPrefix(st, "spec.intelligentRoutingSpec") {
		t.Errorf("immutable change: %d %s", code, b)
	}

	// Delete starts deletion; applying while it runs is a conflict.
	if code, b := hr.do(t, http.MethodDelete, ObjectPath(Resources[1], "team-a", "deepseek"), ""); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	code, b = hr.do(t, http.MethodPut, ObjectPath(Resources[1], "team-a", "deepseek"), jsmDemo)
	if st := decodeStatus(t, b); code != 409 || st.Reason != ReasonConflict {
		t.Errorf("apply while deleting: %d %s", code, b)
	}
	reconcile(manifest.KindJumpStartModel, "team-a", "deepseek")
	if code, b := hr.do(t, http.MethodGet, ObjectPath(Resources[1], "team-a", "deepseek"), ""); code != 404 {
		t.Errorf("after deletion completes: %d %s", code, b)
	}
	if code, b := hr.do(t, http.MethodGet, CollectionPath(Resources[1], ""), ""); code != 200 || !strings.Contains(string(b), `"items": []`) {
		t.Errorf("list after delete: %d %s", code, b)
	}
}
