package nodeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/store"
)

// Paths the handler serves; mount each prefix on it.
const (
	CapstanPath   = "/apis/capstan.dev/v1/"
	NodePoolPath  = "/apis/karpenter.sh/v1/"
	NodeClassPath = "/apis/karpenter.sagemaker.amazonaws.com/v1/"
	// ApplyPath takes NodePool and HyperpodNodeClass documents.
	ApplyPath = NodePoolPath + "apply"
)

// Clusters is what the handler reads of clusters and nodes
// (*hyperpod.Service).
type Clusters interface {
	Clusters(ctx context.Context) ([]hyperpod.Cluster, error)
	Cluster(ctx context.Context, nameOrArn string) (hyperpod.Cluster, []hyperpod.GroupView, error)
	Nodes(ctx context.Context, cluster string) ([]hyperpod.Node, error)
	Node(ctx context.Context, cluster, nodeID string) (hyperpod.Node, error)
	FailNode(ctx context.Context, nodeNameOrID string) (hyperpod.Node, error)
	Events(ctx context.Context, cluster, node string) ([]hyperpod.Event, error)
	// UpdateCluster and SetMetrics change add-ons.
	UpdateCluster(ctx context.Context, nameOrArn string, u hyperpod.ClusterUpdate) (hyperpod.Cluster, error)
	SetMetrics(ctx context.Context, nameOrArn string, on bool) (hyperpod.Cluster, error)
}

// Options wire a Handler; all are required but Logger and Clock.
type Options struct {
	Store    *store.Store
	Clusters Clusters
	Pool     *cluster.Cluster
	// Catalog lists the instance types (GET instancetypes).
	Catalog *catalog.Catalog
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Handler serves the node API.
type Handler struct {
	o   Options
	mux *http.ServeMux
	// kube are the Kubernetes verbs over each node kind (kube.go).
	kube map[string]*manifestapi.KubeAPI
}

// New returns the handler.
func New(o Options) (*Handler, error) {
	var missing []error
	if o.Store == nil {
		missing = append(missing, errors.New("nodeapi: Options.Store is required"))
	}
	if o.Clusters == nil {
		missing = append(missing, errors.New("nodeapi: Options.Clusters is required"))
	}
	if o.Pool == nil {
		missing = append(missing, errors.New("nodeapi: Options.Pool is required"))
	}
	if o.Catalog == nil {
		missing = append(missing, errors.New("nodeapi: Options.Catalog is required"))
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	h.handle("GET "+CapstanPath+"clusters", h.clusters)
	h.handle("GET "+CapstanPath+"clusters/{name}/addons", h.addons)
	h.handle("PUT "+CapstanPath+"clusters/{name}/addons/{addon}", h.setAddon)
	h.handle("GET "+CapstanPath+"instancetypes", h.instanceTypes)
	h.handle("GET "+CapstanPath+"nodes", h.nodes)
	h.handle("GET "+CapstanPath+"nodes/{name}", h.node)
	h.handle("POST "+CapstanPath+"nodes/{name}/fail", h.fail)
	h.handle("POST "+ApplyPath, h.apply)
	if err := h.kubeRoutes(); err != nil {
		return nil, err
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, manifestapi.ReasonNotFound, fmt.Sprintf("the server could not find the requested resource %s", r.URL.Path))
	})
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// handle registers a handler that returns a value to write as JSON or an
// error to write as a Status.
func (h *Handler) handle(pattern string, fn func(r *http.Request) (any, error)) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			code, reason := statusOf(err)
			if code >= 500 {
				h.o.Logger.Error("node API request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeStatus(w, code, reason, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// statusOf is the one place that maps errors to HTTP codes.
func statusOf(err error) (int, string) {
	var nf *hyperpod.NotFoundError
	var inv *invalidError
	var mbe *http.MaxBytesError
	var conflict *hyperpod.ConflictError
	var field *hyperpod.FieldError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, manifestapi.ReasonRequestEntityTooLarge
	case errors.As(err, &nf), errors.Is(err, errNotFound):
		return http.StatusNotFound, manifestapi.ReasonNotFound
	case errors.As(err, &inv), errors.As(err, &field):
		return http.StatusUnprocessableEntity, manifestapi.ReasonInvalid
	case errors.As(err, &conflict):
		return http.StatusConflict, manifestapi.ReasonConflict
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest, manifestapi.ReasonBadRequest
	}
	return http.StatusInternalServerError, manifestapi.ReasonInternalError
}

var (
	errNotFound   = errors.New("not found")
	errBadRequest = errors.New("bad request")
)

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	writeJSON(w, code, &manifestapi.Status{Kind: "Status", APIVersion: "v1", Status: manifestapi.StatusFailure,
		Code: code, Reason: reason, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may be gone
}

// List is the shape of every collection answer.
type List[T any] struct {
	Items []T `json:"items"`
}

// ClusterView is a cluster as `capstan get clusters` shows it.
type ClusterView struct {
	Name           string               `json:"name"`
	ID             string               `json:"id"`
	Status         hyperpod.Status      `json:"status"`
	FailureMessage string               `json:"failureMessage,omitempty"`
	AutoScaling    hyperpod.AutoScaling `json:"autoScaling"`
	NodeRecovery   string               `json:"nodeRecovery"`
	Groups         []GroupView          `json:"groups"`
	Created        time.Time            `json:"created"`
}

// GroupView is one instance group's counts.
type GroupView struct {
	Name         string                `json:"name"`
	InstanceType string                `json:"instanceType"`
	CapacityType hyperpod.CapacityType `json:"capacityType"`
	Current      int                   `json:"current"`
	Target       int                   `json:"target"`
	Status       hyperpod.GroupStatus  `json:"status"`
	Plan         string                `json:"plan,omitempty"`
}

func (h *Handler) clusters(r *http.Request) (any, error) {
	cs, err := h.o.Clusters.Clusters(r.Context())
	if err != nil {
		return nil, err
	}
	out := List[ClusterView]{Items: []ClusterView{}}
	for _, c := range cs {
		_, groups, err := h.o.Clusters.Cluster(r.Context(), c.Name)
		if err != nil {
			var nf *hyperpod.NotFoundError
			if errors.As(err, &nf) {
				continue // deleted meanwhile
			}
			return nil, err
		}
		v := ClusterView{Name: c.Name, ID: c.ID, Status: c.Status, FailureMessage: c.FailureMessage, AutoScaling: c.AutoScaling,
			NodeRecovery: c.NodeRecovery, Created: c.Created, Groups: []GroupView{}}
		for _, g := range groups {
			v.Groups = append(v.Groups, GroupView{Name: g.Name, InstanceType: g.InstanceType, CapacityType: g.CapacityType(),
				Current: g.Current, Target: g.Target, Status: g.Status, Plan: g.Plan.Key})
		}
		out.Items = append(out.Items, v)
	}
	return out, nil
}

// NodeView is a node with what the pool knows of it.
type NodeView struct {
	hyperpod.Node
	Name      string            `json:"name"`
	Capacity  cluster.Resources `json:"capacity"`
	Allocated cluster.Resources `json:"allocated"`
	Cordoned  bool              `json:"cordoned,omitempty"`
	Replicas  []string          `json:"replicas,omitempty"`
	// Placed is what each replica holds (its request and whole GPUs).
	Placed []cluster.Placement `json:"placed,omitempty"`
	// Partitions is each GPU's MIG slices by GPU index (none: whole GPUs,
	// as are the GPUs past its end); Slices says who holds each slice.
	Partitions [][]string       `json:"partitions,omitempty"`
	Slices     []cluster.Slice  `json:"slices,omitempty"`
	Events     []hyperpod.Event `json:"events,omitempty"`
}

func (h *Handler) view(n hyperpod.Node, pool map[string]cluster.Node) NodeView {
	v := NodeView{Node: n, Name: n.Name()}
	if pn, ok := pool[v.Name]; ok {
		v.Capacity, v.Allocated, v.Cordoned, v.Replicas, v.Placed = pn.Capacity, pn.Allocated, pn.Cordoned, pn.Replicas, pn.Placed
		v.Partitions, v.Slices = pn.Partitions, pn.Slices
	}
	return v
}

func (h *Handler) poolNodes() map[string]cluster.Node {
	m := map[string]cluster.Node{}
	for _, n := range h.o.Pool.Nodes() {
		m[n.Name] = n
	}
	return m
}

func (h *Handler) nodes(r *http.Request) (any, error) {
	ns, err := h.o.Clusters.Nodes(r.Context(), r.URL.Query().Get("cluster"))
	if err != nil {
		return nil, err
	}
	pool := h.poolNodes()
	out := List[NodeView]{Items: make([]NodeView, 0, len(ns))}
	for _, n := range ns {
		out.Items = append(out.Items, h.view(n, pool))
	}
	return out, nil
}

func (h *Handler) node(r *http.Request) (any, error) {
	n, err := h.o.Clusters.Node(r.Context(), "", r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	v := h.view(n, h.poolNodes())
	if v.Events, err = h.o.Clusters.Events(r.Context(), n.Cluster, n.ID); err != nil {
		return nil, err
	}
	return v, nil
}

func (h *Handler) fail(r *http.Request) (any, error) {
	n, err := h.o.Clusters.FailNode(r.Context(), r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	h.o.Logger.Warn("node failed by request", "node", n.Name(), "cluster", n.Cluster)
	return h.view(n, h.poolNodes()), nil
}

// maxApplyBytes bounds an apply body.
const maxApplyBytes = 1 << 20

func (h *Handler) apply(r *http.Request) (any, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxApplyBytes))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	var docs []string
	for _, d := range manifestapi.SplitDocuments(body) {
		docs = append(docs, string(d.Text))
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%w: the body holds no manifest", errBadRequest)
	}
	if len(docs) > maxObjects {
		return nil, fmt.Errorf("%w: the body holds %d documents; the limit is %d", errBadRequest, len(docs), maxObjects)
	}
	res, err := apply(h.o.Store, h.o.Clock.Now(), docs, func(rec *record) error {
		o, err := rec.object()
		if err != nil {
			return err
		}
		if err := h.kube[rec.kind()].TrackApply(r, resources[rec.kind()], o); err != nil {
			return err
		}
		rec.ManagedFields = o.Metadata.ManagedFields
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, a := range res {
		h.o.Logger.Info("node manifest applied", "kind", a.Kind, "name", a.Name, "action", a.Action)
	}
	return List[applied]{Items: res}, nil
}
