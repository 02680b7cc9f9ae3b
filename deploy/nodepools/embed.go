// Package nodepools holds CustomResourceDefinitions for the node API's
// kinds, Karpenter's karpenter.sh/v1 NodePool and HyperPod's
// karpenter.sagemaker.amazonaws.com/v1 HyperpodNodeClass, as capstan serve
// describes them to kubectl: printer columns, and schemas that name the
// fields capstan honours (docs/clusters.md) and keep the rest, which
// capstan's own parser checks, as unknown-preserving. On a Kubernetes
// cluster Karpenter and HyperPod install their own; nothing installs these.
package nodepools

import (
	"embed"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/capstan-dev/capstan/deploy/operator"
)

//go:embed crds/*.yaml
var files embed.FS

// CRDs are the custom resource definitions of crds/, decoded.
func CRDs() ([]apiextv1.CustomResourceDefinition, error) { return operator.ReadCRDs(files) }
