package nodeapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	nodepoolcrds "github.com/capstan-dev/capstan/deploy/nodepools"
	"github.com/capstan-dev/capstan/internal/autoscale/nodes"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/store"
)

// Object is a NodePool or HyperpodNodeClass as the API serves it: the
// applied manifest with the metadata the server keeps and the status it
// observes, so kubectl and capstan read the same object.
type Object struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Metadata   manifest.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage     `json:"spec,omitempty"`
	Status     *ObjectStatus       `json:"status,omitempty"`
}

func (o *Object) GetKind() string               { return o.Kind }
func (o *Object) GetMeta() *manifest.ObjectMeta { return &o.Metadata }

// ObjectStatus is what capstan observes of a NodePool or HyperpodNodeClass.
type ObjectStatus struct {
	// Conditions: a NodePool's Ready, false while its HyperpodNodeClass is
	// missing.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Nodes is how many nodes of its instance groups exist.
	Nodes int `json:"nodes"`
}

// ObjectList is a collection answer.
type ObjectList struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Items      []*Object `json:"items"`
}

// Ready reports a NodePool's Ready condition (a HyperpodNodeClass is
// always ready) and its message.
func (o *Object) Ready() (bool, string) {
	if o.Status == nil {
		return true, ""
	}
	for _, c := range o.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == metav1.ConditionTrue, c.Message
		}
	}
	return true, ""
}

// resources are the node kinds as the manifests API describes them, by kind.
var resources = map[string]manifestapi.Resource{}

func init() {
	for _, r := range manifestapi.NodeResources {
		resources[r.Kind] = r
	}
}

// kubeRoutes serves the node kinds as Kubernetes resources: discovery of
// both groups, list and get, and (through manifestapi.KubeAPI) create,
// update, patch, server-side apply, delete and the status subresource.
func (h *Handler) kubeRoutes() error {
	defs, err := nodepoolcrds.CRDs()
	if err != nil {
		return err
	}
	for _, kind := range []string{KindNodePool, KindNodeClass} {
		res := resources[kind]
		base, apiVersion := NodePoolPath, APIVersionNodePool
		if kind == KindNodeClass {
			base, apiVersion = NodeClassPath, APIVersionNodeClass
		}
		kube, err := manifestapi.NewKubeAPI(nodeKinds{h}, apiVersion, ApplyPath, defs, h.o.Clock, h.o.Logger)
		if err != nil {
			return err
		}
		if h.kube == nil {
			h.kube = map[string]*manifestapi.KubeAPI{}
		}
		h.kube[kind] = kube
		discovery := func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, manifestapi.ResourceList(apiVersion, []manifestapi.Resource{res}))
		}
		h.mux.HandleFunc("GET "+strings.TrimSuffix(base, "/"), discovery)
		h.mux.HandleFunc("GET "+base+"{$}", discovery)
		h.handle("GET "+base+res.Plural, func(r *http.Request) (any, error) {
			objs, err := h.objects(kind, "")
			if objs == nil {
				objs = []*Object{}
			}
			return &ObjectList{APIVersion: apiVersion, Kind: kind + "List", Items: objs}, err
		})
		h.handle("GET "+base+res.Plural+"/{name}", func(r *http.Request) (any, error) {
			objs, err := h.objects(kind, r.PathValue("name"))
			if err != nil {
				return nil, err
			}
			return objs[0], nil
		})
		h.mux.HandleFunc("POST "+base+res.Plural, func(w http.ResponseWriter, r *http.Request) { kube.Serve(w, r, res, "", "", "") })
		for _, m := range []string{"PUT", "PATCH", "DELETE"} {
			h.mux.HandleFunc(m+" "+base+res.Plural+"/{name}", func(w http.ResponseWriter, r *http.Request) {
				kube.Serve(w, r, res, "", r.PathValue("name"), "")
			})
		}
		h.mux.HandleFunc(base+res.Plural+"/{name}/status", func(w http.ResponseWriter, r *http.Request) {
			kube.Serve(w, r, res, "", r.PathValue("name"), "status")
		})
	}
	return nil
}

// objects reads the stored objects of kind (one, when name is set) with
// their status: a pool's readiness and how many nodes its groups have. One
// object is read by its key, with only its pool's class.
func (h *Handler) objects(kind, name string) ([]*Object, error) {
	var recs []record
	classes := map[string]*nodes.NodeClass{}
	err := h.o.Store.View(func(tx *store.Tx) error {
		if name == "" {
			var err error
			if recs, err = store.List[record](tx, buckets[kind]); err != nil {
				return err
			}
			cs, err := store.List[record](tx, buckets[KindNodeClass])
			for _, c := range cs {
				classes[c.Class.Name] = c.Class
			}
			return err
		}
		var r record
		if found, err := tx.Get(buckets[kind], name, &r); err != nil || !found {
			return err
		}
		recs = []record{r}
		if r.Pool == nil {
			return nil
		}
		var c record
		found, err := tx.Get(buckets[KindNodeClass], r.Pool.NodeClass, &c)
		if found {
			classes[c.Class.Name] = c.Class
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	pool := h.o.Pool.Nodes()
	var out []*Object
	for _, r := range recs {
		if name != "" && r.name() != name {
			continue
		}
		st := &ObjectStatus{}
		var groups []string
		cl := ""
		if r.Pool != nil {
			cl = r.Pool.Cluster
			if cl == "" {
				cl = cluster.DefaultName
			}
			ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: r.Generation,
				LastTransitionTime: metav1.NewTime(r.lastWrite().UTC().Truncate(time.Second))}
			if c, ok := classes[r.Pool.NodeClass]; ok {
				groups = c.InstanceGroups
			} else {
				ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "NodeClassNotFound", fmt.Sprintf("HyperpodNodeClass %s not found", r.Pool.NodeClass)
			}
			st.Conditions = []metav1.Condition{ready}
		} else {
			groups = r.Class.InstanceGroups
		}
		for _, n := range pool {
			if slices.Contains(groups, n.InstanceGroup) && (cl == "" || n.Cluster == cl) {
				st.Nodes++
			}
		}
		o, err := r.object()
		if err != nil {
			return nil, err
		}
		o.Status = st
		out = append(out, o)
	}
	if name != "" && len(out) == 0 {
		return nil, fmt.Errorf("%w: %s %s not found", errNotFound, kind, name)
	}
	return out, nil
}

// lastWrite is when the record was last written (created, for records from
// before writes were dated).
func (r *record) lastWrite() time.Time {
	if r.Updated.IsZero() {
		return r.Created
	}
	return r.Updated
}

// object is the record as a Kubernetes object, without status.
func (r *record) object() (*Object, error) {
	raw, err := yaml.YAMLToJSON([]byte(r.Manifest))
	if err != nil {
		return nil, fmt.Errorf("stored %s %s: %w", r.kind(), r.name(), err)
	}
	var doc struct {
		APIVersion string              `json:"apiVersion"`
		Kind       string              `json:"kind"`
		Metadata   manifest.ObjectMeta `json:"metadata"`
		Spec       json.RawMessage     `json:"spec"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("stored %s %s: %w", r.kind(), r.name(), err)
	}
	m := doc.Metadata
	created := r.Created.UTC().Truncate(time.Second)
	m.Namespace, m.UID, m.Generation, m.CreationTimestamp = "", r.UID, r.Generation, &created
	if m.UID == "" { // a record from before uids were kept: one derived from what identifies it
		sum := sha256.Sum256([]byte(r.kind() + "/" + r.name() + "/" + r.Created.String()))
		m.UID = uuid.NewHash(sha256.New(), uuid.Nil, sum[:], 5).String()
	}
	m.ResourceVersion = strconv.FormatInt(r.resourceVersion(), 10)
	m.ManagedFields = r.ManagedFields
	return &Object{APIVersion: doc.APIVersion, Kind: doc.Kind, Metadata: m, Spec: doc.Spec}, nil
}

// nodeKinds are the node kinds as manifestapi's Kubernetes verbs write
// them.
type nodeKinds struct{ h *Handler }

var _ manifestapi.KubeKinds = nodeKinds{}

func (k nodeKinds) Get(_ context.Context, res manifestapi.Resource, _, name string) (manifestapi.KubeObject, error) {
	objs, err := k.h.objects(res.Kind, name)
	if errors.Is(err, errNotFound) {
		return nil, manifestapi.NotFound(res, "", name)
	}
	if err != nil {
		return nil, err
	}
	return objs[0], nil
}

// Load reads one document: parsed and checked as `capstan apply` parses
// it, with status and server-set metadata dropped. The kinds are
// cluster-scoped, so a namespace is dropped too, as the API server does.
func (nodeKinds) Load(body []byte, _ string) ([]manifestapi.KubeObject, error) {
	docs := manifestapi.SplitDocuments(body)
	if len(docs) != 1 {
		return nil, manifest.ErrorList{{Message: fmt.Sprintf("the body holds %d documents; one is written at a time (POST %s takes several)", len(docs), ApplyPath)}}
	}
	raw, err := yaml.YAMLToJSON(docs[0].Text)
	if err != nil {
		return nil, manifest.ErrorList{{Message: "invalid YAML: " + err.Error()}}
	}
	var o Object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, manifest.ErrorList{{Message: "a manifest must be a mapping with apiVersion, kind, metadata and spec: " + err.Error()}}
	}
	m := &o.Metadata
	m.Namespace, m.UID, m.ResourceVersion, m.Generation, m.CreationTimestamp = "", "", "", 0, nil
	o.Status = nil
	if _, err := parseRecord(string(manifestOf(&o))); err != nil {
		return nil, fieldError(err)
	}
	return []manifestapi.KubeObject{&o}, nil
}

// fieldError is a parse error as a field error: "path: message" when the
// parser named a path.
func fieldError(err error) manifest.ErrorList {
	msg := err.Error()
	if path, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(path, " \"") {
		return manifest.ErrorList{{Path: path, Message: rest}}
	}
	return manifest.ErrorList{{Message: msg}}
}

// manifestOf is what is stored of o: its kind, name, labels, annotations
// and spec.
func manifestOf(o *Object) []byte {
	type meta struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	b, _ := json.Marshal(struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   meta            `json:"metadata"`
		Spec       json.RawMessage `json:"spec,omitempty"`
	}{o.APIVersion, o.Kind, meta{o.Metadata.Name, o.Metadata.Labels, o.Metadata.Annotations}, o.Spec})
	return b
}

// Decode leaves an applied configuration's field errors to Load of the
// merged object: the parser checks required fields too, which a partial
// configuration may leave out.
func (nodeKinds) Decode([]byte) error { return nil }

func (nodeKinds) CheckUpdate(_, _ manifestapi.KubeObject) error { return nil }

func (k nodeKinds) ApplyWith(_ context.Context, obj manifestapi.KubeObject, pre manifest.Preconditions) (manifest.ApplyResult, error) {
	o := obj.(*Object)
	r, err := parseRecord(string(manifestOf(o)))
	if err != nil {
		return manifest.ApplyResult{}, fieldError(err)
	}
	r.ManagedFields = o.Metadata.ManagedFields
	var action string
	err = k.h.o.Store.Update(func(tx *store.Tx) error {
		var err error
		action, err = put(tx, k.h.o.Clock.Now(), r, pre)
		return err
	})
	if err != nil {
		return manifest.ApplyResult{}, err
	}
	k.h.o.Logger.Info("node manifest applied", "kind", r.kind(), "name", r.name(), "action", action)
	return manifest.ApplyResult{Kind: r.kind(), Name: r.name(), Action: action, Generation: r.Generation, Warnings: r.Warnings}, nil
}

func (k nodeKinds) Delete(_ context.Context, res manifestapi.Resource, _, name string) error {
	err := k.h.o.Store.Update(func(tx *store.Tx) error {
		if !tx.Exists(buckets[res.Kind], name) {
			return manifestapi.NotFound(res, "", name)
		}
		return tx.Delete(buckets[res.Kind], name)
	})
	if err == nil {
		k.h.o.Logger.Info("node manifest deleted", "kind", res.Kind, "name", name)
	}
	return err
}

// NodePool is the object's NodePool, parsed as the autoscaler reads it.
func (o *Object) NodePool() (nodes.NodePool, error) {
	np, _, err := nodes.ParseNodePool(manifestOf(o))
	return np, err
}

// NodeClass is the object's HyperpodNodeClass, parsed.
func (o *Object) NodeClass() (nodes.NodeClass, error) {
	nc, _, err := nodes.ParseNodeClass(manifestOf(o))
	return nc, err
}
