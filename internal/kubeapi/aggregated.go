package kubeapi

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// aggregatedType is the media type of aggregated discovery (one
// apidiscovery.k8s.io/v2 APIGroupDiscoveryList for /api or /apis), which
// kubectl and client-go ask for first: one request instead of one per
// group version.
const aggregatedType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// acceptsAggregated reports whether the Accept header asks for aggregated
// discovery before a plain document.
func acceptsAggregated(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || (mt != "application/json" && mt != "*/*") {
			continue
		}
		return params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList"
	}
	return false
}

// aggregated answers /api (core) or /apis as one APIGroupDiscoveryList,
// built from the same resource lists the per-group-version documents hold.
func (h *Handler) aggregated(w http.ResponseWriter, r *http.Request, core bool) {
	l := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	if core {
		l.Items = append(l.Items, groupDiscovery("", "v1", coreResources()))
	} else {
		for _, gv := range h.o.Groups {
			rl, err := h.resourceList(r, "/apis/"+gv.String())
			if err != nil {
				writeStatus(w, err)
				return
			}
			l.Items = append(l.Items, groupDiscovery(gv.Group, gv.Version, rl))
		}
	}
	w.Header().Set("Content-Type", aggregatedType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(&l) // the client may be gone
}

// groupDiscovery is one group version's resource list in aggregated form:
// each resource with its subresources (…/status, …/scale) folded in.
func groupDiscovery(group, version string, rl *metav1.APIResourceList) apidiscoveryv2.APIGroupDiscovery {
	v := apidiscoveryv2.APIVersionDiscovery{Version: version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	index := map[string]int{}
	for _, res := range rl.APIResources {
		if strings.Contains(res.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if res.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[res.Name] = len(v.Resources)
		v.Resources = append(v.Resources, apidiscoveryv2.APIResourceDiscovery{Resource: res.Name,
			ResponseKind: &metav1.GroupVersionKind{Group: group, Version: version, Kind: res.Kind}, Scope: scope,
			SingularResource: res.SingularName, Verbs: res.Verbs, ShortNames: res.ShortNames, Categories: res.Categories})
	}
	for _, res := range rl.APIResources {
		parent, sub, ok := strings.Cut(res.Name, "/")
		i, found := index[parent]
		if !ok || !found {
			continue
		}
		kind := &metav1.GroupVersionKind{Group: group, Version: version, Kind: res.Kind}
		if res.Group != "" || res.Version != "" {
			kind.Group, kind.Version = res.Group, res.Version
		}
		v.Resources[i].Subresources = append(v.Resources[i].Subresources,
			apidiscoveryv2.APISubresourceDiscovery{Subresource: sub, ResponseKind: kind, Verbs: res.Verbs})
	}
	return apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}, Versions: []apidiscoveryv2.APIVersionDiscovery{v}}
}

// resourceList is a group version's resource list as discovery serves it.
func (h *Handler) resourceList(r *http.Request, path string) (*metav1.APIResourceList, error) {
	code, body, _ := h.call(r, path)
	if code != http.StatusOK {
		return nil, fmt.Errorf("kubeapi: discovery of %s answered %d", path, code)
	}
	return parseResourceList(path, body)
}

// parseResourceList reads a group version's resource list, adding the
// verbs this Handler serves for every resource (watch) and the "all"
// category.
func parseResourceList(path string, body []byte) (*metav1.APIResourceList, error) {
	var l metav1.APIResourceList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("kubeapi: discovery of %s: %w", path, err)
	}
	for i := range l.APIResources {
		res := &l.APIResources[i]
		if !strings.Contains(res.Name, "/") && !slices.Contains(res.Verbs, "watch") {
			res.Verbs = append(res.Verbs, "watch")
		}
		if !strings.Contains(res.Name, "/") && !slices.Contains(res.Categories, "all") {
			res.Categories = append(res.Categories, "all")
		}
	}
	return &l, nil
}
