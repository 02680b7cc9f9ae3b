// Package operator holds the operator's install manifests (a kustomize
// base: kubectl apply -k deploy/operator) and embeds them for
// `capstan operator install`. The CRDs and the ClusterRole are generated
// from the Go types and RBAC markers by controller-gen (go generate ./deploy/operator);
// a test fails when the committed files differ from what it generates.
package operator

import "embed"

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 crd:allowDangerousTypes=true rbac:roleName=capstan-operator paths=../../internal/operator/... output:crd:dir=crds output:rbac:dir=rbac

// Files are the kustomize base's files, by their path in it.
//
//go:embed kustomization.yaml namespace.yaml manager.yaml gateway.yaml crds/*.yaml rbac/*.yaml webhook/*.yaml
var Files embed.FS
