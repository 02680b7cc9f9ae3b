// Package operator holds the operator's install manifests (a kustomize
// base: kubectl apply -k deploy/operator) and embeds them for
// `capstan operator install`. The CRDs and the ClusterRole are generated
// from the Go types and RBAC markers by controller-gen (go generate ./deploy/operator);
// a test fails when the committed files differ from what it generates.
package operator

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 crd:allowDangerousTypes=true rbac:roleName=capstan-operator paths=../../internal/operator/... output:crd:dir=crds output:rbac:dir=rbac

// Files are the kustomize base's files, by their path in it.
//
//go:embed kustomization.yaml namespace.yaml manager.yaml gateway.yaml crds/*.yaml rbac/*.yaml webhook/*.yaml
var Files embed.FS

// CRDs are the custom resource definitions of crds/, decoded: capstan
// serve answers kubectl from the same ones (printer columns, OpenAPI
// schemas, server-side apply's types).
func CRDs() ([]apiextv1.CustomResourceDefinition, error) { return ReadCRDs(Files) }

// ReadCRDs decodes the custom resource definitions of fsys's crds/*.yaml,
// files as controller-gen writes them.
func ReadCRDs(fsys fs.FS) ([]apiextv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(fsys, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []apiextv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(string(raw), "---\n")), &crd); err != nil {
			return nil, fmt.Errorf("deploy: %s: %w", f, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
