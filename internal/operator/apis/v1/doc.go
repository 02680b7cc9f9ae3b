// Package v1 is the Kubernetes face of the manifests: the
// inference.sagemaker.aws.amazon.com/v1 InferenceEndpointConfig and
// JumpStartModel kinds as API objects, for the operator and for the CRDs
// that controller-gen derives from them.
//
// The spec and status are internal/manifest's own types (the ones
// `capstan apply` decodes, defaults and validates); only the object
// envelope (TypeMeta, ObjectMeta) is Kubernetes'. So the CRD schema and the
// operator read exactly what the single-machine server reads, and
// ToManifest turns an API object into the manifest that manifest.Validate
// checks.
//
// +groupName=inference.sagemaker.aws.amazon.com
// +versionName=v1
package v1
