package observability

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/capstan-dev/capstan/internal/runtime"
)

// DiscoveryPath is where capstan serve answers Prometheus' HTTP service
// discovery (http_sd_configs) with its ready replicas.
const DiscoveryPath = "/_capstan/prometheus/targets"

// TargetGroup is one entry of Prometheus' HTTP service discovery format:
// https://prometheus.io/docs/prometheus/latest/http_sd/.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Lister is what discovery reads replicas from (the runtime both doors'
// replicas run on).
type Lister interface {
	List() []runtime.Replica
}

// Targets is one target group per ready replica (healthy, with an
// address), sorted by replica id: its metrics address and the labels of its
// owner (runtime.ReplicaSpec.Labels: endpoint and variant, or namespace,
// deployment and kind) plus replica, its id. Empty label values are left
// out. Never nil, so it encodes as [].
func Targets(rs []runtime.Replica) []TargetGroup {
	out := []TargetGroup{}
	for _, r := range rs {
		if r.State != runtime.StateHealthy || r.Addr == "" {
			continue
		}
		l := map[string]string{"replica": r.Spec.ID}
		for k, v := range r.Spec.Labels {
			if v != "" && k != "replica" {
				l[k] = v
			}
		}
		out = append(out, TargetGroup{Targets: []string{r.Addr}, Labels: l})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Labels["replica"] < out[j].Labels["replica"] })
	return out
}

// TargetsHandler answers GET with Targets of what l runs, as JSON.
func TargetsHandler(l Lister) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Targets(l.List()))
	})
}
