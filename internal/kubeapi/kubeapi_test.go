package kubeapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAcceptsTable(t *testing.T) {
	for _, tt := range []struct{ accept, want string }{
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", "v1"},
		{"application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", "v1beta1"},
		{"application/json", ""},
		{"application/json, application/json;as=Table;v=v1;g=meta.k8s.io", ""}, // a plain type first wins
		{"application/json;as=Table;v=v2;g=meta.k8s.io,application/json", ""},
		{"application/yaml;as=Table;v=v1;g=meta.k8s.io", ""},
		{"", ""},
	} {
		if got := acceptsTable(tt.accept); got != tt.want {
			t.Errorf("acceptsTable(%q) = %q, want %q", tt.accept, got, tt.want)
		}
	}
}

func TestReadQuery(t *testing.T) {
	for _, tt := range []struct {
		query string
		err   string
		check func(query) bool
	}{
		{"", "", func(q query) bool { return !q.watch && !q.filters() && q.includeObject == metav1.IncludeMetadata }},
		{"watch=true&resourceVersion=12&timeoutSeconds=30", "", func(q query) bool {
			return q.watch && q.resourceVersion == "12" && q.timeout == 30*time.Second
		}},
		{"fieldSelector=metadata.name%3Da,metadata.namespace%3Ddefault&labelSelector=team%3Da", "", func(q query) bool { return q.filters() }},
		{"fieldSelector=spec.replicas%3D1", "field label not supported: spec.replicas", nil},
		{"labelSelector=%21%21", "labelSelector", nil},
		{"watch=maybe", "watch=", nil},
		{"timeoutSeconds=-1", "timeoutSeconds", nil},
		{"includeObject=All", "includeObject", nil},
		{"fieldSelector=" + strings.Repeat("a", maxSelector+1), "limit", nil},
	} {
		q, err := readQuery(httptest.NewRequest("GET", "/apis/x/v1/things?"+tt.query, nil))
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.query, err, tt.err)
			}
		case err != nil || !tt.check(q):
			t.Errorf("%q: %+v, %v", tt.query, q, err)
		}
	}
}

func TestQueryFilter(t *testing.T) {
	obj := func(ns, name string, labels map[string]any) any {
		return map[string]any{"metadata": map[string]any{"namespace": ns, "name": name, "labels": labels}}
	}
	items := []any{obj("default", "a", map[string]any{"team": "x"}), obj("default", "b", nil), obj("other", "a", map[string]any{"team": "y"})}
	for _, tt := range []struct {
		query string
		want  int
	}{
		{"", 3},
		{"fieldSelector=metadata.name%3Da", 2},
		{"fieldSelector=metadata.name%3Da,metadata.namespace%3Dother", 1},
		{"fieldSelector=metadata.name%21%3Da", 1},
		{"labelSelector=team", 2},
		{"labelSelector=team%3Dx", 1},
		{"labelSelector=%21team", 1},
	} {
		q, err := readQuery(httptest.NewRequest("GET", "/x?"+tt.query, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(q.filter(items)); got != tt.want {
			t.Errorf("%q kept %d, want %d", tt.query, got, tt.want)
		}
	}
}

// Cells are filled as the API server fills a custom resource's: a date as
// an age, a number as it is, a missing value as nil.
func TestCell(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	obj := map[string]any{"metadata": map[string]any{"creationTimestamp": "2026-12-07T11:55:00Z"},
		"spec": map[string]any{"replicas": 3}, "status": map[string]any{"state": "DeploymentComplete"}}
	for _, tt := range []struct {
		col  column
		want any
	}{
		{column{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}, "5m"},
		{column{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"}, 3},
		{column{Name: "State", Type: "string", JSONPath: ".status.state"}, "DeploymentComplete"},
		{column{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas"}, nil},
		{column{Name: "Bad", Type: "string", JSONPath: ".status[["}, nil},
	} {
		if got := cell(obj, tt.col, now); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.col.Name, got, tt.want)
		}
	}
}

// The printer columns come from the operator's CRDs.
func TestPrinterColumnsFromCRDs(t *testing.T) {
	defs, err := crds()
	if err != nil {
		t.Fatal(err)
	}
	cols := printerColumns(defs)
	for _, kind := range []string{"InferenceEndpointConfig", "JumpStartModel"} {
		var names []string
		for _, c := range cols[kind] {
			names = append(names, c.Name)
		}
		if strings.Join(names, ",") != "State,Replicas,Ready,Age" {
			t.Errorf("%s columns %v", kind, names)
		}
	}
}

func TestQueryPage(t *testing.T) {
	obj := func(ns, name string) any {
		return map[string]any{"metadata": map[string]any{"namespace": ns, "name": name}}
	}
	items := func() []any { return []any{obj("b", "x"), obj("a", "z"), obj("a", "y"), obj("c", "w")} }
	names := func(l []any) string {
		var out []string
		for _, it := range l {
			md := metadataOf(it)
			out = append(out, md["namespace"].(string)+"/"+md["name"].(string))
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct {
		name, query, want string
		remaining         int
		more              bool
	}{
		{"no limit", "", "b/x,a/z,a/y,c/w", 0, false},
		{"first page", "limit=2", "a/y,a/z", 2, true},
		{"a limit past the end", "limit=9", "a/y,a/z,b/x,c/w", 0, false},
		{"from a token", "limit=2&continue=" + encodeContinue("a/z"), "b/x,c/w", 0, false},
		{"a token past every key", "limit=2&continue=" + encodeContinue("d/a"), "", 0, false},
		{"a huge limit", "limit=99999999999", "a/y,a/z,b/x,c/w", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := readQuery(httptest.NewRequest("GET", "/apis/g/v1/xs?"+tt.query, nil))
			if err != nil {
				t.Fatal(err)
			}
			got, next, remaining := q.page(items())
			if names(got) != tt.want || (next != "") != tt.more || remaining != tt.remaining {
				t.Fatalf("page = %s, continue %q, remaining %d; want %s, more %v, remaining %d", names(got), next, remaining, tt.want, tt.more, tt.remaining)
			}
		})
	}
	for _, bad := range []string{"limit=-1", "limit=x", "continue=not-a-token", "continue=" + strings.Repeat("a", 2000)} {
		if _, err := readQuery(httptest.NewRequest("GET", "/apis/g/v1/xs?"+bad, nil)); err == nil {
			t.Errorf("readQuery(%s) accepted it", bad)
		}
	}
}
