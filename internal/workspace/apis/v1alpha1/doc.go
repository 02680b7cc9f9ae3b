// Package v1alpha1 is the Kubernetes face of the spaces: the
// workspace.jupyter.org/v1alpha1 Workspace and WorkspaceTemplate kinds as
// API objects, for the CRDs that controller-gen derives from them
// (go generate ./internal/workspace). capstan serve answers kubectl with
// those CRDs' schemas and printer columns.
//
// The spec and status are internal/workspace's own types (the ones the
// spaces API decodes, defaults and validates); only the object envelope
// (TypeMeta, ObjectMeta) is Kubernetes'.
//
// +groupName=workspace.jupyter.org
// +versionName=v1alpha1
package v1alpha1
