// Package manifestapi owns capstan's HTTP API for manifests: the
// Kubernetes-shaped resource paths under /apis/inference.sagemaker.aws.amazon.com/v1
// for InferenceEndpointConfig and JumpStartModel (list, get, put, delete,
// events, and a multi-document apply; and the verbs kubectl writes with:
// create, merge and JSON patches, the scale subresource, kube.go), the
// Kubernetes Status error body, and the resource table (kinds, plurals,
// short names) that the CLI shares. internal/kubeapi adds what kubectl
// reads (discovery, tables, watches, OpenAPI) in front of it.
//
// The handler decodes, defaults and validates every manifest (package
// manifest) before it reaches the Store; a multi-document apply is checked as
// a whole, so nothing is stored when any document is invalid. Storage,
// rollout and status belong to the Store: internal/deployment's Service, in
// `capstan serve` and in this package's tests alike.
//
// Errors map to the wire in exactly one function, statusFor.
package manifestapi
