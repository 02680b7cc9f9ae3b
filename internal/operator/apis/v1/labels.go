package v1

import "github.com/capstan-dev/capstan/internal/manifest"

// Labels and port names the operator puts on what it makes: the contract
// between the operator and whoever reads the cluster after it (the
// gateway's discovery selects Services' EndpointSlices by LabelName and
// finds a replica's KV events by KVEventsPortName). The pod selector is
// LabelName plus LabelKind, so an IEC and a JSM of one name never select
// each other's pods.
const (
	LabelName = "inference.capstan.dev/name"
	LabelKind = "inference.capstan.dev/kind"
	// KVEventsPortName is the model container's KV events publisher port.
	KVEventsPortName = "kv-events"
)

// SelectorLabels select the pods of one manifest of kind (a manifest
// kind name) and name.
func SelectorLabels(kind, name string) map[string]string {
	return map[string]string{LabelName: name, LabelKind: kindLabel(kind)}
}

// kindLabel is the short kind used in labels ("iec", "jsm").
func kindLabel(kind string) string {
	if kind == manifest.KindJumpStartModel {
		return "jsm"
	}
	return "iec"
}
