package observability

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/runtime"
)

type list []runtime.Replica

func (l list) List() []runtime.Replica { return l }

func TestTargets(t *testing.T) {
	sm := runtime.ReplicaSpec{ID: "ep.AllTraffic.gen1.0", Labels: map[string]string{"endpoint": "ep", "variant": "AllTraffic", "instance_type": "ml.g5.xlarge"}}
	dep := runtime.ReplicaSpec{ID: "iec-default-chat-r1-0", Controller: runtime.ControllerDeployment, Engine: "llamacpp",
		Labels: map[string]string{"namespace": "default", "deployment": "chat", "kind": "InferenceEndpointConfig", "endpoint": "chat", "instance_type": ""}}
	tests := []struct {
		name string
		in   []runtime.Replica
		want []TargetGroup
	}{
		{"none", nil, []TargetGroup{}},
		{"not ready replicas are left out", []runtime.Replica{
			{Spec: sm, State: runtime.StateStarting, Addr: "127.0.0.1:1"},
			{Spec: sm, State: runtime.StateFailed, Addr: "127.0.0.1:1"},
			{Spec: sm, State: runtime.StateHealthy},
		}, []TargetGroup{}},
		{"both doors, sorted by replica, empty labels dropped", []runtime.Replica{
			{Spec: sm, State: runtime.StateHealthy, Addr: "127.0.0.1:2"},
			{Spec: dep, State: runtime.StateHealthy, Addr: "127.0.0.1:3"},
		}, []TargetGroup{
			{Targets: []string{"127.0.0.1:2"}, Labels: map[string]string{"replica": "ep.AllTraffic.gen1.0", "engine": "sim", "endpoint": "ep", "variant": "AllTraffic", "instance_type": "ml.g5.xlarge"}},
			{Targets: []string{"127.0.0.1:3"}, Labels: map[string]string{"replica": "iec-default-chat-r1-0", "engine": "llamacpp", "namespace": "default", "deployment": "chat", "kind": "InferenceEndpointConfig", "endpoint": "chat"}},
		}},
		{"an owner label cannot replace the replica id", []runtime.Replica{
			{Spec: runtime.ReplicaSpec{ID: "r", Labels: map[string]string{"replica": "other"}}, State: runtime.StateHealthy, Addr: "h:1"},
		}, []TargetGroup{{Targets: []string{"h:1"}, Labels: map[string]string{"replica": "r", "engine": "sim"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Targets(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestTargetsHandler(t *testing.T) {
	srv := httptest.NewServer(TargetsHandler(list{{Spec: runtime.ReplicaSpec{ID: "r", Labels: map[string]string{"endpoint": "e"}}, State: runtime.StateHealthy, Addr: "h:1"}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{{"targets": []any{"h:1"}, "labels": map[string]any{"replica": "r", "engine": "sim", "endpoint": "e"}}}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !reflect.DeepEqual(raw, want) {
		t.Fatalf("%d %s %v", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
}

// TestReplicaMetricsHandler: a ready replica's page comes through with its
// key; an unknown, stopped or address-less replica is 404, and nothing but
// GET of /_capstan/replicas/<id>/metrics is served.
func TestReplicaMetricsHandler(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer k1" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, "vllm:num_requests_running 3\n")
	}))
	defer engine.Close()
	addr := strings.TrimPrefix(engine.URL, "http://")
	h := httptest.NewServer(ReplicaMetricsHandler(list{
		{Spec: runtime.ReplicaSpec{ID: "a.0"}, State: runtime.StateHealthy, Addr: addr, APIKey: "k1"},
		{Spec: runtime.ReplicaSpec{ID: "b.0"}, State: runtime.StateStopped, Addr: addr, APIKey: "k1"},
		{Spec: runtime.ReplicaSpec{ID: "c.0"}, State: runtime.StateHealthy, Addr: addr, APIKey: "wrong"},
	}))
	defer h.Close()
	for _, tc := range []struct {
		method, path string
		want         int
		body         string
	}{
		{"GET", "/_capstan/replicas/a.0/metrics", 200, "vllm:num_requests_running 3"},
		{"GET", "/_capstan/replicas/b.0/metrics", 404, "no ready replica"},
		{"GET", "/_capstan/replicas/zz/metrics", 404, "no ready replica"},
		{"GET", "/_capstan/replicas/c.0/metrics", 401, ""}, // the engine's own answer passes through
		{"POST", "/_capstan/replicas/a.0/metrics", 405, ""},
		{"GET", "/_capstan/replicas/a.0/health", 404, ""},
	} {
		req, _ := http.NewRequest(tc.method, h.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s %s: %d %q, want %d with %q", tc.method, tc.path, resp.StatusCode, b, tc.want, tc.body)
		}
	}
}
