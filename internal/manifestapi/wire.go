package manifestapi

import "github.com/capstan-dev/capstan/internal/manifest"

// List is the answer to a collection GET, e.g. kind InferenceEndpointConfigList.
type List struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   struct{}          `json:"metadata"`
	Items      []manifest.Object `json:"items"`
}

// ApplyResponse answers a PUT: what the apply did, plus the stored object
// (omitted if it could not be read back).
type ApplyResponse struct {
	manifest.ApplyResult
	Object manifest.Object `json:"object,omitempty"`
}

// ApplyResultList answers POST .../apply, one result per document in order.
type ApplyResultList struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Items      []manifest.ApplyResult `json:"items"`
}

// EventList answers GET .../{name}/events, oldest first.
type EventList struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Items      []manifest.Event `json:"items"`
}

// KVCacheReport answers GET .../{name}/kvcache: the deployment's KV cache
// tiers, computed from its replicas when asked.
type KVCacheReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	manifest.KVCacheReport
}

// APIResource and APIResourceList are the discovery document at BasePath.
type APIResource struct {
	Name         string   `json:"name"`
	SingularName string   `json:"singularName"`
	Namespaced   bool     `json:"namespaced"`
	Kind         string   `json:"kind"`
	Verbs        []string `json:"verbs"`
	ShortNames   []string `json:"shortNames,omitempty"`
	// Group and Version of a subresource whose kind is in another group
	// (a Scale is autoscaling/v1).
	Group   string `json:"group,omitempty"`
	Version string `json:"version,omitempty"`
}

// APIResourceList is served at GET BasePath.
type APIResourceList struct {
	Kind         string        `json:"kind"`
	APIVersion   string        `json:"apiVersion"`
	GroupVersion string        `json:"groupVersion"`
	Resources    []APIResource `json:"resources"`
}

// ResourceList is the discovery document of one API group version's
// resources, each with the Kubernetes verbs and the subresources it serves.
func ResourceList(groupVersion string, resources []Resource) *APIResourceList {
	l := &APIResourceList{Kind: "APIResourceList", APIVersion: "v1", GroupVersion: groupVersion}
	for _, r := range resources {
		namespaced := !r.ClusterScoped
		l.Resources = append(l.Resources, APIResource{Name: r.Plural, SingularName: r.Singular, Namespaced: namespaced,
			Kind: r.Kind, Verbs: verbs, ShortNames: r.ShortNames})
		if r.Status {
			l.Resources = append(l.Resources, APIResource{Name: r.Plural + "/status", Namespaced: namespaced, Kind: r.Kind, Verbs: []string{"get"}})
		}
		if r.Scale {
			l.Resources = append(l.Resources, APIResource{Name: r.Plural + "/scale", Namespaced: namespaced, Group: "autoscaling", Version: "v1",
				Kind: "Scale", Verbs: []string{"get", "patch", "update"}})
		}
	}
	return l
}
