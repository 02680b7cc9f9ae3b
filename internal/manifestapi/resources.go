package manifestapi

import (
	"strings"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// Group and Version of the API; the path prefix of every resource.
const (
	Group    = "inference.sagemaker.aws.amazon.com"
	Version  = "v1"
	BasePath = "/apis/" + Group + "/" + Version
)

// Resource describes one kind the API serves, with every name the CLI
// accepts for it.
type Resource struct {
	Kind       string   // InferenceEndpointConfig
	Plural     string   // inferenceendpointconfigs (the URL segment)
	Singular   string   // inferenceendpointconfig
	ShortNames []string // iec
	// Group is the kind's API group when it is not this API's (Group).
	APIGroup string
	// ClusterScoped: the kind's objects are in no namespace.
	ClusterScoped bool
	// Scale: the kind serves the scale subresource (kubectl scale).
	Scale bool
	// Status: the kind has a status, served read-only at …/{name}/status.
	Status bool
}

// verbs are the Kubernetes verbs every kind answers (kube.go), beside
// capstan's multi-document apply.
var verbs = []string{"create", "delete", "get", "list", "patch", "update"}

// Resources lists the served kinds. Upstream publishes no short names; iec
// and jsm are capstan's, in the spirit of kubectl's.
var Resources = []Resource{
	{Kind: manifest.KindInferenceEndpointConfig, Plural: "inferenceendpointconfigs", Singular: "inferenceendpointconfig", ShortNames: []string{"iec"}, Scale: true, Status: true},
	{Kind: manifest.KindJumpStartModel, Plural: "jumpstartmodels", Singular: "jumpstartmodel", ShortNames: []string{"jsm"}, Scale: true, Status: true},
}

// GroupResource is the kubectl-style qualified name, e.g.
// "inferenceendpointconfig.inference.sagemaker.aws.amazon.com".
func (r Resource) GroupResource() string { return r.Singular + "." + r.group() }

func (r Resource) group() string {
	if r.APIGroup != "" {
		return r.APIGroup
	}
	return Group
}

// ResolveKind finds the resource for a name as a user types it: the kind
// (any case), plural, singular or a short name, optionally qualified with
// ".inference.sagemaker.aws.amazon.com" (or the group/version).
func ResolveKind(s string) (Resource, bool) { return resolveIn(Resources, Group, Version, s) }

// resolveIn finds s among one API group's resources.
func resolveIn(resources []Resource, group, version, s string) (Resource, bool) {
	n := strings.ToLower(strings.TrimSpace(s))
	for _, suffix := range []string{"." + version + "." + group, "." + group} {
		if t, ok := strings.CutSuffix(n, suffix); ok {
			n = t
			break
		}
	}
	for _, r := range resources {
		if n == strings.ToLower(r.Kind) || n == r.Plural || n == r.Singular {
			return r, true
		}
		for _, sn := range r.ShortNames {
			if n == sn {
				return r, true
			}
		}
	}
	return Resource{}, false
}

// ResourceForKind returns the resource of an exact kind name.
func ResourceForKind(kind string) (Resource, bool) {
	for _, r := range Resources {
		if r.Kind == kind {
			return r, true
		}
	}
	return Resource{}, false
}

func resourceForPlural(plural string) (Resource, bool) {
	for _, r := range Resources {
		if r.Plural == plural {
			return r, true
		}
	}
	return Resource{}, false
}

// CollectionPath is the URL path of a resource's list: all namespaces when
// namespace is "".
func CollectionPath(r Resource, namespace string) string {
	if namespace == "" {
		return BasePath + "/" + r.Plural
	}
	return BasePath + "/namespaces/" + namespace + "/" + r.Plural
}

// ObjectPath is the URL path of one object.
func ObjectPath(r Resource, namespace, name string) string {
	return CollectionPath(r, namespace) + "/" + name
}

// ApplyPath is the URL path of the multi-document apply.
const ApplyPath = BasePath + "/apply"
