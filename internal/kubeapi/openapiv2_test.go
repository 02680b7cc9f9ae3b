package kubeapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

func TestOpenAPIV2(t *testing.T) {
	defs, err := crds()
	if err != nil {
		t.Fatal(err)
	}
	d, err := buildOpenAPIV2(defs)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Swagger     string                    `json:"swagger"`
		Definitions map[string]map[string]any `json:"definitions"`
		Paths       map[string]any            `json:"paths"`
	}
	if err := json.Unmarshal(d.json, &doc); err != nil || doc.Swagger != "2.0" {
		t.Fatalf("document: %v, swagger %q", err, doc.Swagger)
	}
	for _, name := range []string{"com.amazon.aws.sagemaker.inference.v1.JumpStartModel", "org.jupyter.workspace.v1alpha1.Workspace"} {
		if _, ok := doc.Definitions[name]["x-kubernetes-group-version-kind"]; !ok {
			t.Errorf("%s: no definition with its group-version-kind", name)
		}
	}
	if _, ok := doc.Paths["/apis/workspace.jupyter.org/v1alpha1/namespaces/{namespace}/workspaces/{name}"]; !ok {
		t.Errorf("no Workspace path in %v", doc.Paths)
	}
	// OpenAPI v2 has no nullable, anyOf or oneOf: the conversion drops them
	// (the CRDs' int-or-string quantities use anyOf).
	for _, kw := range []string{`"nullable"`, `"anyOf"`, `"oneOf"`} {
		if strings.Contains(string(d.json), kw) {
			t.Errorf("the v2 document holds %s", kw)
		}
	}
	for _, accept := range []string{"application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/openapi/v2", nil)
		r.Header.Set("Accept", accept)
		d.serve(rec, r)
		var pb openapi_v2.Document
		if err := proto.Unmarshal(rec.Body.Bytes(), &pb); err != nil || pb.GetSwagger() != "2.0" || rec.Header().Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
			t.Errorf("Accept %s: %v, swagger %q, Content-Type %q", accept, err, pb.GetSwagger(), rec.Header().Get("Content-Type"))
		}
	}
}
