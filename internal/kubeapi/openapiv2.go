package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	openapiv2conv "k8s.io/apiextensions-apiserver/pkg/controller/openapi/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The protobuf encoding's media types: the one client-go's OpenAPISchema
// asks for (and the only encoding it reads), its older spelling, and the
// one the API server answers with (a media type mime can parse).
const (
	openAPIV2Proto           = "com.github.proto-openapi.spec.v2.v1.0+protobuf"
	openAPIV2ProtoDeprecated = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// openAPIV2 is /openapi/v2: one Swagger document for every served kind, in
// JSON and in the protobuf encoding client-go reads. Each kind's schema is
// its CRD's, turned into the OpenAPI v2 subset by the API server's own
// conversion (apiextensions' ToStructuralOpenAPIV2: no nullable, anyOf or
// oneOf), with the same definition names and x-kubernetes-group-version-kind
// as the v3 documents.
type openAPIV2 struct {
	json, proto []byte
}

func buildOpenAPIV2(defs []apiextv1.CustomResourceDefinition) (*openAPIV2, error) {
	sw := &spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0",
		Info:  &spec.Info{InfoProps: spec.InfoProps{Title: "capstan", Version: KubernetesVersion}},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{}}, Definitions: spec.Definitions{}}}
	for _, crd := range defs {
		g, n := crd.Spec.Group, crd.Spec.Names
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("kubeapi: the %s schema: %w", n.Kind, err)
			}
			st, err := structuralschema.NewStructural(&internal)
			if err != nil {
				return nil, fmt.Errorf("kubeapi: the %s schema: %w", n.Kind, err)
			}
			s := openapiv2conv.ToStructuralOpenAPIV2(st).ToKubeOpenAPI()
			gvk := map[string]any{"group": g, "version": v.Name, "kind": n.Kind}
			s.AddExtension("x-kubernetes-group-version-kind", []any{gvk})
			name := schemaName(g, v.Name, n.Kind)
			sw.Definitions[name] = *s
			base, scope := collectionPath(g+"/"+v.Name, crd.Spec.Scope, n.Plural)
			sw.Paths.Paths[base+"/{name}"] = objectPathV2(name, n.Kind, gvk, scope)
		}
	}
	js, err := json.Marshal(sw)
	if err != nil {
		return nil, err
	}
	doc, err := openapi_v2.ParseDocument(js)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: the OpenAPI v2 document: %w", err)
	}
	pb, err := proto.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return &openAPIV2{json: js, proto: pb}, nil
}

// objectPathV2 is an object's path: read, replace and patch, the last two
// declaring the fieldValidation parameter, as in the v3 documents.
func objectPathV2(definition, kind string, gvk map[string]any, scope []string) spec.PathItem {
	ref := spec.MustCreateRef("#/definitions/" + definition)
	ok := &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
		http.StatusOK: {ResponseProps: spec.ResponseProps{Description: "OK", Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref}}}}}}}
	param := func(name, in, description string) spec.Parameter {
		return spec.Parameter{SimpleSchema: spec.SimpleSchema{Type: "string"},
			ParamProps: spec.ParamProps{Name: name, In: in, Required: in == "path", Description: description}}
	}
	validation := param("fieldValidation", "query", "capstan always validates strictly: an unknown or duplicate field is an error")
	op := func(id string, params ...spec.Parameter) *spec.Operation {
		o := &spec.Operation{OperationProps: spec.OperationProps{ID: id, Responses: ok, Parameters: params}}
		o.AddExtension("x-kubernetes-group-version-kind", gvk)
		return o
	}
	var params []spec.Parameter
	for _, p := range append(scope, "name") {
		params = append(params, param(p, "path", ""))
	}
	return spec.PathItem{PathItemProps: spec.PathItemProps{
		Parameters: params,
		Get:        op("read" + kind), Put: op("replace"+kind, validation), Patch: op("patch"+kind, validation)}}
}

// serve writes the document in the encoding the Accept header asks for.
func (d *openAPIV2) serve(w http.ResponseWriter, r *http.Request) {
	ct, body := "application/json", d.json
	if a := r.Header.Get("Accept"); strings.Contains(a, openAPIV2Proto) || strings.Contains(a, openAPIV2ProtoDeprecated) {
		ct, body = "application/"+openAPIV2Proto, d.proto
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Vary", "Accept")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // the client may be gone
}
