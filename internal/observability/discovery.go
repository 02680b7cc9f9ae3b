package observability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/capstan-dev/capstan/internal/engines"
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
// deployment and kind) plus replica, its id, and engine, its engine adapter
// (Config maps each engine's series to the catalog's names by it). Empty
// label values are left out. Never nil, so it encodes as [].
func Targets(rs []runtime.Replica) []TargetGroup {
	out := []TargetGroup{}
	for _, r := range rs {
		if r.State != runtime.StateHealthy || r.Addr == "" {
			continue
		}
		eng := r.Spec.Engine
		if eng == "" {
			eng = engines.Sim
		}
		l := map[string]string{"replica": r.Spec.ID, "engine": eng}
		for k, v := range r.Spec.Labels {
			if v != "" && k != "replica" && k != "engine" {
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

// ReplicaMetricsPath is where capstan serve proxies each ready replica's
// /metrics: ReplicaMetricsPath + "<replica id>/metrics". A replica's own port
// answers only requests with its API key (runtime.Replica.APIKey), which
// stays inside capstan; Prometheus scrapes here with the admin token.
const ReplicaMetricsPath = "/_capstan/replicas/"

// replicaMetricsLimit bounds one replica's metrics page.
const replicaMetricsLimit = 32 << 20

// ReplicaMetricsHandler serves GET ReplicaMetricsPath{id}/metrics: the
// engine's own /metrics page of replica id, read with its API key.
func ReplicaMetricsHandler(l Lister) http.Handler {
	client := &http.Client{Timeout: 10 * time.Second}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ReplicaMetricsPath+"{id}/metrics", func(w http.ResponseWriter, r *http.Request) {
		resp, err := FetchReplicaMetrics(r.Context(), client, l, r.PathValue("id"), r.Header.Get("Accept"))
		if err != nil {
			code := http.StatusBadGateway
			if errors.Is(err, ErrNoReadyReplica) {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, replicaMetricsLimit))
	})
	return mux
}

// ErrNoReadyReplica is FetchReplicaMetrics' error for an id that names no
// ready replica.
var ErrNoReadyReplica = errors.New("no ready replica")

// FetchReplicaMetrics reads the engine's own /metrics page of replica id
// with its API key (accept, when set, is passed on: Prometheus negotiates
// its exposition format). The caller closes the body and bounds its read.
func FetchReplicaMetrics(ctx context.Context, client *http.Client, l Lister, id, accept string) (*http.Response, error) {
	var rep *runtime.Replica
	for _, x := range l.List() {
		if x.Spec.ID == id && x.State == runtime.StateHealthy && x.Addr != "" {
			rep = &x
			break
		}
	}
	if rep == nil {
		return nil, fmt.Errorf("%w %q", ErrNoReadyReplica, id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rep.Addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if rep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+rep.APIKey)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", id, err)
	}
	return resp, nil
}

// ErrUnauthorized is returned by FetchTargets when the server wants an
// admin token it was not given (or a different one).
var ErrUnauthorized = errors.New("the server refused the admin token")

// FetchTargets reads the server's discovery answer, as Prometheus does,
// sending token as a bearer token when it is not empty.
func FetchTargets(ctx context.Context, server, token string) ([]TargetGroup, error) {
	u, err := ParseServer(server)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.Scheme+"://"+u.Host+DiscoveryPath, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach capstan at %s: %w", server, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, ErrUnauthorized
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: status %d", req.URL, resp.StatusCode)
	}
	var out []TargetGroup
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	return out, nil
}
