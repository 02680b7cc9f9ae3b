// Package spaces holds the CustomResourceDefinitions of the spaces' kinds
// (workspace.jupyter.org/v1alpha1 Workspace and WorkspaceTemplate),
// generated from internal/workspace/apis/v1alpha1 by controller-gen
// (go generate ./deploy/spaces); a test fails when the committed files
// differ from what it generates. capstan serve answers kubectl with their
// printer columns and OpenAPI schemas, and types server-side apply by them.
// The operator does not serve spaces, so it does not install them.
package spaces

import (
	"embed"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/capstan-dev/capstan/deploy/operator"
)

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 crd:allowDangerousTypes=true paths=../../internal/workspace/apis/... output:crd:dir=crds

//go:embed crds/*.yaml
var files embed.FS

// CRDs are the custom resource definitions of crds/, decoded.
func CRDs() ([]apiextv1.CustomResourceDefinition, error) { return operator.ReadCRDs(files) }
