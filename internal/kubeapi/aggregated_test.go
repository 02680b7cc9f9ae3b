package kubeapi

import (
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAcceptsAggregated(t *testing.T) {
	for _, tt := range []struct {
		accept string
		want   bool
	}{
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", true},
		{"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", false},
		{"application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", false}, // plain first wins
		{"", false},
	} {
		if got := acceptsAggregated(tt.accept); got != tt.want {
			t.Errorf("acceptsAggregated(%q) = %v, want %v", tt.accept, got, tt.want)
		}
	}
}

func TestGroupDiscovery(t *testing.T) {
	rl := &metav1.APIResourceList{GroupVersion: "g.example/v1", APIResources: []metav1.APIResource{
		{Name: "things", SingularName: "thing", Namespaced: true, Kind: "Thing", Verbs: []string{"get", "list"}, ShortNames: []string{"th"}},
		{Name: "things/status", Namespaced: true, Kind: "Thing", Verbs: []string{"get"}},
		{Name: "things/scale", Namespaced: true, Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: []string{"get", "update"}},
		{Name: "orphans/status", Kind: "Orphan", Verbs: []string{"get"}}, // no parent: dropped
		{Name: "globals", SingularName: "global", Kind: "Global", Verbs: []string{"get"}},
	}}
	g := groupDiscovery("g.example", "v1", rl)
	if g.Name != "g.example" || len(g.Versions) != 1 || g.Versions[0].Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Fatalf("group %+v", g)
	}
	res := g.Versions[0].Resources
	if len(res) != 2 || res[0].Resource != "things" || res[1].Resource != "globals" {
		t.Fatalf("resources %+v", res)
	}
	things := res[0]
	if things.Scope != apidiscoveryv2.ScopeNamespace || things.ResponseKind.Kind != "Thing" || things.ResponseKind.Group != "g.example" ||
		things.SingularResource != "thing" || things.ShortNames[0] != "th" || len(things.Subresources) != 2 {
		t.Fatalf("things %+v", things)
	}
	if s := things.Subresources[1]; s.Subresource != "scale" || s.ResponseKind.Group != "autoscaling" || s.ResponseKind.Kind != "Scale" {
		t.Fatalf("scale subresource %+v", s)
	}
	if s := things.Subresources[0]; s.Subresource != "status" || s.ResponseKind.Group != "g.example" || s.ResponseKind.Kind != "Thing" {
		t.Fatalf("status subresource %+v", s)
	}
	if res[1].Scope != apidiscoveryv2.ScopeCluster {
		t.Fatalf("globals scope %s", res[1].Scope)
	}
}
