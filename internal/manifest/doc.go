// Package manifest owns capstan's HyperPod-style manifest kinds,
// InferenceEndpointConfig and JumpStartModel (apiVersion
// inference.sagemaker.aws.amazon.com/v1): their Go types (spec and status),
// strict multi-document YAML decoding with field paths in every error,
// defaulting, and validation against the built-in catalog.
//
// The order of operations follows the config-loader habit of the project:
// Decode (strict: unknown fields and wrong types are rejected with their
// path) → Default → Validate (every error, each naming its field path).
// Load does all three. ValidateUpdate holds the rules that compare a new
// version with the stored one (immutable fields). Errors are FieldErrors
// collected in an ErrorList, placed in a file by DocumentError; FieldErrors
// flattens any of them for a protocol's error mapper.
//
// Fields, defaults and bounds follow the published CRDs of the HyperPod
// inference operator (see the reference notes in the design folder). Where
// capstan deliberately differs it says so at the rule: MIG partitions are
// rejected until capstan can place them, and Prometheus triggers accept any
// Prometheus-compatible URL, not only Amazon Managed Prometheus.
//
// The package is a pure library: it must not talk to the store, the runtime
// or the network. Controllers write Status; users' manifests may carry one
// (round-tripped from `get -o yaml`), which Validate ignores.
package manifest
