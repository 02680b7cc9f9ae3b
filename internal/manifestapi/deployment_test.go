package manifestapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
)

var _ Store = (*deployment.Service)(nil)

// TestWithDeploymentService drives the handler over the real
// deployment.Service: apply semantics, all-or-nothing validation, status
// written by the controller, events and deletion.
func TestWithDeploymentService(t *testing.T) {
	hr := newHarness(t, Options{})
	svc := hr.svc
	ctx := context.Background()
	reconcile := func(kind, ns, name string) {
		t.Helper()
		hr.reconcile(t, kind, ns, name)
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

	// An invalid MIG document makes the whole body fail; the valid change
	// in it is not stored either.
	changed := strings.Replace(iecDemo, "vllm-openai:latest", "vllm-openai:v2", 1)
	code, b = hr.do(t, http.MethodPost, ApplyPath, changed+"---\n"+badMIG(t, "examples-jsm-mig.yaml"))
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

// TestEndpointNameInUse shows what happens when two manifests name the same
// SageMaker endpoint: the Store's Apply does not refuse the second one (the
// name is claimed by the controller, not at apply time), and the controller
// fails it with reason EndpointNameInUse, which GET and the events show.
func TestEndpointNameInUse(t *testing.T) {
	clk := clock.NewFake(t0)
	db := openStore(t)
	rt := fake.New(fake.WithClock(clk))
	// Managed registrations take no fleet instances, so the SageMaker side
	// needs no fleet allocator here.
	reg := endpoint.NewService(db, nil, catalog.Default(), clk, slog.New(slog.DiscardHandler))
	h := serveHarness(t, Options{}, &harness{svc: newService(t, clk, db, rt, reg), db: db, clk: clk, rt: rt})

	h.mustApply(t, jsmDemo)
	h.reconcile(t, manifest.KindJumpStartModel, "team-a", "deepseek")
	second := strings.Replace(jsmDemo, "metadata: {name: deepseek,", "metadata: {name: deepseek-copy,", 1)
	if second == jsmDemo {
		t.Fatal("test bug: the name was not replaced")
	}
	if code, b := h.do(t, http.MethodPost, ApplyPath, second); code != 200 || !bytes.Contains(b, []byte(`"action": "created"`)) {
		t.Fatalf("apply of the second holder: %d %s", code, b)
	}
	h.reconcile(t, manifest.KindJumpStartModel, "team-a", "deepseek-copy")

	get := func(name string) manifest.JumpStartModel {
		t.Helper()
		code, b := h.do(t, http.MethodGet, ObjectPath(Resources[1], "team-a", name), "")
		var o manifest.JumpStartModel
		if err := json.Unmarshal(b, &o); code != 200 || err != nil {
			t.Fatalf("get %s: %d %v %s", name, code, err, b)
		}
		return o
	}
	if o := get("deepseek"); o.Status.State != manifest.StateDeploymentComplete || o.Status.Endpoints == nil ||
		o.Status.Endpoints.SageMaker == nil || o.Status.Endpoints.SageMaker.State != "CreationCompleted" {
		t.Errorf("holder: %+v", o.Status)
	}
	o := get("deepseek-copy")
	var ready manifest.Condition
	for _, c := range o.Status.Conditions {
		if c.Type == manifest.ConditionReady {
			ready = c
		}
	}
	if o.Status.State != manifest.StateDeploymentFailed || ready.Reason != manifest.ReasonEndpointNameInUse ||
		!strings.Contains(ready.Message, `endpoint "deepseek" already belongs to`) {
		t.Errorf("second holder: state %s, ready %+v", o.Status.State, ready)
	}
	if es := o.Status.Endpoints; es == nil || es.SageMaker == nil || es.SageMaker.State != "CreationFailed" || es.SageMaker.EndpointArn != "" {
		t.Errorf("second holder's SageMaker status: %+v", es)
	}
	if got := rt.Running(); len(got) != 1 || !strings.Contains(got[0], "deepseek") || strings.Contains(got[0], "copy") {
		t.Errorf("running replicas %v, want only the holder's", got)
	}
	code, b := h.do(t, http.MethodGet, ObjectPath(Resources[1], "team-a", "deepseek-copy")+"/events", "")
	if code != 200 || !bytes.Contains(b, []byte(`"reason": "DeploymentFailed"`)) {
		t.Errorf("events: %d %s", code, b)
	}
}

// TestApplyResultWarnings: POST .../apply and PUT answer an ignored field
// with a warning line naming it in the result; a manifest without one has
// no "warnings" member at all.
func TestApplyResultWarnings(t *testing.T) {
	hr := newHarness(t, Options{})
	withDNS := strings.Replace(iecDemo, "spec:\n", `spec:
  tlsConfig: {customCertificateConfig: {acmArn: "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-0000-1111-2222-333344445555", domainName: models.example.com}}
  dnsConfig: {hostedZoneId: Z0123456789ABC}
`, 1)
	for _, tc := range []struct {
		name, method, path, body string
		want                     []string
	}{
		{"apply with", http.MethodPost, ApplyPath, withDNS, []string{"spec.tlsConfig has no effect here: ", "spec.dnsConfig has no effect here: "}},
		{"re-apply unchanged still warns", http.MethodPost, ApplyPath, withDNS, []string{"spec.tlsConfig", "spec.dnsConfig"}},
		{"put without", http.MethodPut, ObjectPath(Resources[0], "default", "small"), iecDemo, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := hr.do(t, tc.method, tc.path, tc.body)
			if code != 200 && code != 201 {
				t.Fatalf("%d %s", code, b)
			}
			var res struct {
				Warnings []string `json:"warnings"`
				Items    []struct {
					Warnings []string `json:"warnings"`
				} `json:"items"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			got := res.Warnings
			if len(res.Items) == 1 {
				got = res.Items[0].Warnings
			}
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("warning %d %q, want prefix %q", i, got[i], w)
				}
			}
			if tc.want == nil && bytes.Contains(b, []byte(`"warnings"`)) {
				t.Errorf("a manifest without ignored fields has a warnings member: %s", b)
			}
		})
	}
}
