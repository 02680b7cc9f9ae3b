package kubeapi

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// openAPIDocs builds one OpenAPI v3 document per group version from the
// CRDs, as the API server publishes custom resources: each kind's schema
// (with x-kubernetes-group-version-kind, which kubectl explain and
// client-side validation look up) and its collection and object paths,
// whose POST and PATCH declare the fieldValidation parameter. kubectl then
// leaves field validation to the server, and capstan's decoding is strict:
// an unknown field is an error naming its path.
func openAPIDocs(defs []apiextv1.CustomResourceDefinition) map[string][]byte {
	type doc struct {
		schemas map[string]any
		paths   map[string]any
	}
	docs := map[string]*doc{}
	for _, crd := range defs {
		g, n := crd.Spec.Group, crd.Spec.Names
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			gv := g + "/" + v.Name
			d := docs[gv]
			if d == nil {
				d = &doc{schemas: map[string]any{}, paths: map[string]any{}}
				docs[gv] = d
			}
			raw, err := json.Marshal(v.Schema.OpenAPIV3Schema)
			if err != nil {
				continue
			}
			var schema map[string]any
			if err := json.Unmarshal(raw, &schema); err != nil {
				continue
			}
			gvk := []any{map[string]any{"group": g, "version": v.Name, "kind": n.Kind}}
			schema["x-kubernetes-group-version-kind"] = gvk
			name := schemaName(g, v.Name, n.Kind)
			d.schemas[name] = schema
			ref := map[string]any{"$ref": "#/components/schemas/" + name}
			ok := func(s any) map[string]any {
				return map[string]any{"200": map[string]any{"description": "OK",
					"content": map[string]any{"application/json": map[string]any{"schema": s}}}}
			}
			op := func(id string, validated bool, body bool) map[string]any {
				o := map[string]any{"operationId": id, "x-kubernetes-group-version-kind": gvk[0], "responses": ok(ref)}
				if validated {
					o["parameters"] = []any{map[string]any{"name": "fieldValidation", "in": "query", "schema": map[string]any{"type": "string"},
						"description": "capstan always validates strictly: an unknown or duplicate field is an error"}}
				}
				if body {
					o["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref}}}
				}
				return o
			}
			params := func(names ...string) []any {
				var out []any
				for _, p := range names {
					out = append(out, map[string]any{"name": p, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
				}
				return out
			}
			base, scope := collectionPath(gv, crd.Spec.Scope, n.Plural)
			d.paths[base] = map[string]any{"parameters": params(scope...),
				"get": op("list"+n.Kind, false, false), "post": op("create"+n.Kind, true, true)}
			d.paths[base+"/{name}"] = map[string]any{"parameters": params(append(scope, "name")...),
				"get": op("read"+n.Kind, false, false), "put": op("replace"+n.Kind, true, true),
				"patch": op("patch"+n.Kind, true, false), "delete": op("delete"+n.Kind, false, false)}
		}
	}
	out := map[string][]byte{}
	for gv, d := range docs {
		b, err := json.Marshal(map[string]any{"openapi": "3.0.0",
			"info":  map[string]any{"title": "capstan", "version": KubernetesVersion},
			"paths": d.paths, "components": map[string]any{"schemas": d.schemas}})
		if err == nil {
			out[gv] = b
		}
	}
	return out
}

// collectionPath is the path of a kind's collection in OpenAPI's terms,
// and its path parameters: under /namespaces/{namespace}/ for a namespaced
// kind.
func collectionPath(gv string, scope apiextv1.ResourceScope, plural string) (string, []string) {
	if scope == apiextv1.ClusterScoped {
		return "/apis/" + gv + "/" + plural, nil
	}
	return "/apis/" + gv + "/namespaces/{namespace}/" + plural, []string{"namespace"}
}

// schemaName is the API server's name for a kind's schema: the group
// reversed, the version, the kind (com.amazon.aws.sagemaker.inference.v1.JumpStartModel).
func schemaName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + version + "." + kind
}

// openAPI serves /openapi/v3 (the list of group versions, each with its
// document's hash) and /openapi/v3/apis/<group>/<version>.
func (h *Handler) openAPI(w http.ResponseWriter, r *http.Request, rest string) {
	if rest == "" {
		paths := map[string]any{}
		gvs := make([]string, 0, len(h.openapi))
		for gv := range h.openapi {
			gvs = append(gvs, gv)
		}
		sort.Strings(gvs)
		for _, gv := range gvs {
			sum := sha512.Sum512(h.openapi[gv])
			paths["apis/"+gv] = map[string]any{"serverRelativeURL": "/openapi/v3/apis/" + gv + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:]))}
		}
		writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
		return
	}
	b, ok := h.openapi[strings.TrimPrefix(rest, "apis/")]
	if !ok || !strings.HasPrefix(rest, "apis/") {
		writeStatus(w, notFound(r.URL.Path))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
