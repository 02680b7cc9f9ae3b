package manifestapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// The verbs kubectl and client-go write with, beside capstan's own apply:
// create (POST to a collection), update (PUT), patch (JSON merge patch, JSON
// patch, server-side apply), delete with its options, and the status and
// scale subresources, over any group's kinds (KubeKinds). Each write goes
// through the same decoding, validation and update rules as an apply, and
// answers the stored object, as a Kubernetes API server does.

// Patch media types a custom resource takes.
const (
	mergePatch = "application/merge-patch+json"
	jsonPatch  = "application/json-patch+json"
)

// maxPatchRetries bounds how often a patch is recomputed when the object
// changes between its read and its write.
const maxPatchRetries = 5

// KubeObject is a stored object of any kind the Kubernetes verbs serve.
type KubeObject interface {
	GetKind() string
	GetMeta() *manifest.ObjectMeta
}

// KubeKinds is one API group's kinds as the Kubernetes verbs read and
// write them: the manifests' (Handler), the spaces' (WorkspaceHandler) and
// the node API's NodePools and HyperpodNodeClasses (through KubeAPI).
type KubeKinds interface {
	// Get is the stored object; a missing one is NotFound's error.
	Get(ctx context.Context, res Resource, ns, name string) (KubeObject, error)
	// Load decodes, defaults and validates body's documents, dropping
	// status and server-set metadata; one without a namespace takes ns.
	// Field errors are a manifest.ErrorList (or anything
	// manifest.FieldErrors reads).
	Load(body []byte, ns string) ([]KubeObject, error)
	// Decode reads a partial object (an applied configuration) for its
	// field errors; nil leaves them to Load of the merged object.
	Decode(raw []byte) error
	// CheckUpdate runs the rules that compare next with live, the stored
	// object, before next is stored.
	CheckUpdate(live, next KubeObject) error
	// ApplyWith stores o under pre (manifest.ErrAlreadyExists,
	// manifest.ErrConflict, manifest.ErrNotFound).
	ApplyWith(ctx context.Context, o KubeObject, pre manifest.Preconditions) (manifest.ApplyResult, error)
	// Delete deletes an object, with Get's error wording.
	Delete(ctx context.Context, res Resource, ns, name string) error
}

// kubeObjects is objs as KubeObjects.
func kubeObjects[T KubeObject](objs []T) []KubeObject {
	out := make([]KubeObject, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// NotFound is the error KubeKinds return for a missing object, worded as
// Kubernetes words it.
func NotFound(res Resource, ns, name string) error {
	if ns == "" {
		return fail(errNotFound, "%s %q not found", res.GroupResource(), name)
	}
	return fail(errNotFound, "%s %q not found in namespace %q", res.GroupResource(), name, ns)
}

// kubeVerbs are Kubernetes' writes over one group's kinds, beside
// capstan's multi-document apply: create (POST to a collection), update
// (PUT), patch (JSON merge patch, JSON patch, server-side apply). Each goes
// through the same decoding, validation and update rules as an apply, and
// answers the stored object, as a Kubernetes API server does.
type kubeVerbs struct {
	kinds      KubeKinds
	apiVersion string // of the group's kinds
	applyPath  string // the group's multi-document apply
	maxBody    int64
	// fieldManagers do server-side apply, by kind (ssa.go).
	fieldManagers fieldManagers
	clock         clock.Clock
}

// serveObject answers r for one object: GET reads it; PUT, PATCH and
// DELETE write it.
func (v *kubeVerbs) serveObject(r *http.Request, res Resource, ns, name string) (any, int, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		o, err := v.kinds.Get(r.Context(), res, ns, name)
		if err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
		return o, http.StatusOK, nil
	case http.MethodPut:
		return v.put(r, res, ns, name)
	case http.MethodPatch:
		return v.patch(r, res, ns, name)
	case http.MethodDelete:
		return v.delete(r, res, ns, name)
	}
	return nil, 0, fail(errMethodNotAllowed, "%s is not supported on %s (use GET, PUT, PATCH or DELETE)", r.Method, r.URL.Path)
}

// matchesURL refuses a body that is not exactly one object of the URL's
// kind, namespace and (for all but a create) name.
func (v *kubeVerbs) matchesURL(method string, objs []KubeObject, res Resource, ns, name string) error {
	if len(objs) != 1 {
		return fail(errBadRequest, "%s takes exactly one manifest, got %d; POST %s takes several", method, len(objs), v.applyPath)
	}
	m := objs[0].GetMeta()
	switch {
	case objs[0].GetKind() != res.Kind:
		return fail(errBadRequest, "the body is a %s but the URL is for %s", objs[0].GetKind(), res.Plural)
	case name != "" && m.Name != name:
		return fail(errBadRequest, "the name of the object (%s) does not match the name on the URL (%s)", m.Name, name)
	case m.Namespace != ns:
		return fail(errBadRequest, "the namespace of the object (%s) does not match the namespace on the URL (%s)", m.Namespace, ns)
	}
	return nil
}

// create stores one new object (POST to the namespace's collection);
// manifest.ErrAlreadyExists when it exists.
func (v *kubeVerbs) create(r *http.Request, res Resource, ns string) (any, int, error) {
	body, err := readBody(r, v.maxBody)
	if err != nil {
		return nil, 0, err
	}
	objs, err := v.kinds.Load(body, ns)
	if err != nil {
		return nil, 0, err
	}
	if err := v.matchesURL(http.MethodPost, objs, res, ns, ""); err != nil {
		return nil, 0, err
	}
	o, name := objs[0], objs[0].GetMeta().Name
	if err := v.track(r, nil, o); err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	if _, err := v.kinds.ApplyWith(r.Context(), o, manifest.Preconditions{Create: true}); err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	stored, err := v.kinds.Get(r.Context(), res, ns, name)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	return stored, http.StatusCreated, nil
}

// put stores the body's one object (PUT on the object's URL). A body that
// carries the resourceVersion it was read at (kubectl replace, client-go
// Update) is an update of that version: a stale one is a conflict, as in
// Kubernetes. Without one, PUT applies.
func (v *kubeVerbs) put(r *http.Request, res Resource, ns, name string) (any, int, error) {
	ctx := r.Context()
	body, err := readBody(r, v.maxBody)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	objs, err := v.kinds.Load(body, ns)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	if err := v.matchesURL(http.MethodPut, objs, res, ns, name); err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	o := objs[0]
	var pre manifest.Preconditions
	var read struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if raw, err := yaml.YAMLToJSON(body); err == nil && json.Unmarshal(raw, &read) == nil {
		pre.ResourceVersion = read.Metadata.ResourceVersion
	}
	live, err := v.kinds.Get(ctx, res, ns, name)
	switch {
	case errors.Is(err, errNotFound):
		live = nil
	case err != nil:
		return nil, 0, withObject(res.Kind, name, err)
	default:
		if err := v.kinds.CheckUpdate(live, o); err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
	}
	if err := v.track(r, live, o); err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	ar, err := v.kinds.ApplyWith(ctx, o, pre)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	code := http.StatusOK
	if ar.Action == manifest.ActionCreated {
		code = http.StatusCreated
	}
	stored, err := v.kinds.Get(ctx, res, ns, name)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	return stored, code, nil
}

// patch applies a JSON merge patch or a JSON patch to the stored object and
// stores the result as an update of the version it read: the object as
// patched is decoded, defaulted and validated like any apply, and a
// concurrent write makes it read again.
func (v *kubeVerbs) patch(r *http.Request, res Resource, ns, name string) (any, int, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == applyPatch {
		return v.serverSideApply(r, res, ns, name)
	}
	if ct != mergePatch && ct != jsonPatch {
		return nil, 0, withObject(res.Kind, name, fail(errUnsupportedMediaType,
			"the body of the request was in an unknown format %q - accepted media types include: %s, %s, %s", ct, jsonPatch, mergePatch, applyPatch))
	}
	body, err := readBody(r, v.maxBody)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	stored, err := v.patchWith(r, res, ns, name, func(_ KubeObject, doc []byte) ([]byte, error) {
		return applyPatchBody(ct, doc, body, v.maxBody)
	})
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	return stored, http.StatusOK, nil
}

// applyPatchBody applies a JSON merge patch or JSON patch (ct) to doc.
func applyPatchBody(ct string, doc, patch []byte, maxBody int64) ([]byte, error) {
	if ct == mergePatch {
		return jsonpatch.MergePatch(doc, patch)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	opts := jsonpatch.NewApplyOptions()
	opts.AccumulatedCopySizeLimit = maxBody // copies cannot grow the object past a body's size
	return p.ApplyWithOptions(doc, opts)
}

// patchWith stores change(the stored object, its JSON) as an update of the
// version read, reading again when another write came first.
func (v *kubeVerbs) patchWith(r *http.Request, res Resource, ns, name string, change func(KubeObject, []byte) ([]byte, error)) (KubeObject, error) {
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		cur, err := v.kinds.Get(ctx, res, ns, name)
		if err != nil {
			return nil, err
		}
		doc, err := json.Marshal(cur)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s/%s: %w", res.Kind, ns, name, err)
		}
		patched, err := change(cur, doc)
		if err != nil {
			return nil, fail(errBadRequest, "the patch does not apply: %v", err)
		}
		objs, err := v.kinds.Load(patched, ns)
		if err != nil {
			return nil, err
		}
		if err := v.matchesURL(http.MethodPatch, objs, res, ns, name); err != nil {
			return nil, err
		}
		if err := v.kinds.CheckUpdate(cur, objs[0]); err != nil {
			return nil, err
		}
		if err := v.track(r, cur, objs[0]); err != nil {
			return nil, err
		}
		_, err = v.kinds.ApplyWith(ctx, objs[0], manifest.Preconditions{ResourceVersion: cur.GetMeta().ResourceVersion})
		if errors.Is(err, manifest.ErrConflict) && attempt < maxPatchRetries {
			continue
		}
		if err != nil {
			return nil, err
		}
		return v.kinds.Get(ctx, res, ns, name)
	}
}

// Scale is the autoscaling/v1 Scale of an object: its spec.replicas and
// the replicas its status counts (kubectl scale, HPA).
type Scale struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   scaleMeta  `json:"metadata"`
	Spec       scaleSpec  `json:"spec"`
	Status     scaleState `json:"status"`
}

type scaleMeta struct {
	Name              string `json:"name"`
	Namespace         string `json:"namespace"`
	UID               string `json:"uid,omitempty"`
	ResourceVersion   string `json:"resourceVersion,omitempty"`
	CreationTimestamp any    `json:"creationTimestamp,omitempty"`
}

type scaleSpec struct {
	Replicas int32 `json:"replicas"`
}

type scaleState struct {
	Replicas int32  `json:"replicas"`
	Selector string `json:"selector,omitempty"`
}

// scale serves …/{name}/scale: GET reads it; PUT (a Scale) and PATCH (a
// merge or JSON patch of the Scale) set spec.replicas, which is applied as
// an update of the object.
func (h *Handler) scale(r *http.Request, res Resource, ns, name string) (any, int, error) {
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		cur, err := h.store.Get(ctx, res.Kind, ns, name)
		if err != nil {
			return nil, 0, withObject(res.Kind, name, storeErr(res, ns, name, "get", err))
		}
		return scaleOf(cur), http.StatusOK, nil
	case http.MethodPut, http.MethodPatch:
	default:
		return nil, 0, fail(errMethodNotAllowed, "%s is not supported on %s (use GET, PUT or PATCH)", r.Method, r.URL.Path)
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method == http.MethodPatch && ct != mergePatch && ct != jsonPatch {
		return nil, 0, withObject(res.Kind, name, fail(errUnsupportedMediaType,
			"the body of the request was in an unknown format %q - accepted media types include: %s, %s", ct, jsonPatch, mergePatch))
	}
	body, err := h.readBody(r)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	stored, err := h.kube.patchWith(r, res, ns, name, func(obj KubeObject, doc []byte) ([]byte, error) {
		var cur map[string]any
		if err := json.Unmarshal(doc, &cur); err != nil {
			return nil, err
		}
		replicas, err := scaledReplicas(r.Method, ct, body, obj.(manifest.Object), h.kube.maxBody)
		if err != nil {
			return nil, err
		}
		spec, _ := cur["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
		}
		spec["replicas"] = replicas
		cur["spec"] = spec
		return json.Marshal(cur)
	})
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	return scaleOf(stored.(manifest.Object)), http.StatusOK, nil
}

// scaledReplicas reads the replicas a scale write asks for: a PUT's Scale,
// or the Scale of obj (the stored object) as the patch leaves it.
func scaledReplicas(method, ct string, body []byte, obj manifest.Object, maxBody int64) (int32, error) {
	cur, err := json.Marshal(scaleOf(obj))
	if err != nil {
		return 0, err
	}
	next := body
	if method == http.MethodPatch {
		next, err = applyPatchBody(ct, cur, body, maxBody)
	}
	if err != nil {
		return 0, err
	}
	var s struct {
		Spec struct {
			Replicas *int64 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(next, &s); err != nil {
		return 0, fmt.Errorf("the Scale: %v", err)
	}
	if s.Spec.Replicas == nil {
		return 0, errors.New("the Scale has no spec.replicas")
	}
	if n := *s.Spec.Replicas; n < 0 || n > manifest.MaxReplicas {
		return 0, fmt.Errorf("spec.replicas %d must be in [0, %d]", n, manifest.MaxReplicas)
	}
	return int32(*s.Spec.Replicas), nil
}

// scaleOf is obj's Scale: spec.replicas (its default when unset) and the
// replicas its status counts.
func scaleOf(obj manifest.Object) *Scale {
	m := obj.GetMeta()
	s := &Scale{APIVersion: "autoscaling/v1", Kind: "Scale",
		Metadata: scaleMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}}
	if m.CreationTimestamp != nil {
		s.Metadata.CreationTimestamp = m.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
	}
	s.Spec.Replicas = manifest.DefaultReplicas
	switch o := obj.(type) {
	case *manifest.InferenceEndpointConfig:
		if o.Spec.Replicas != nil {
			s.Spec.Replicas = *o.Spec.Replicas
		}
	case *manifest.JumpStartModel:
		if o.Spec.Replicas != nil {
			s.Spec.Replicas = *o.Spec.Replicas
		}
	}
	s.Status.Replicas = obj.GetStatus().Replicas
	return s
}

// status serves …/{name}/status: the object, read-only, since capstan's
// controllers alone write status (a client's write would be overwritten on
// the next reconcile).
func (v *kubeVerbs) status(r *http.Request, res Resource, ns, name string) (any, int, error) {
	if !res.Status {
		return nil, 0, fail(errNotFound, "the server could not find the requested resource %s", r.URL.Path)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, 0, withObject(res.Kind, name, fail(errMethodNotAllowed,
			"%s is not supported on %s: the status of a %s is written by capstan's controllers (use GET)", r.Method, r.URL.Path, res.Kind))
	}
	o, err := v.kinds.Get(r.Context(), res, ns, name)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	return o, http.StatusOK, nil
}

// delete deletes an object (DELETE on its URL) under the DeleteOptions a
// client sends in the body or the query: preconditions on its uid and
// resourceVersion (409 when they do not hold), dryRun=All (nothing is
// deleted; the answer is the object) and the propagation policy. An
// object's replicas or space process are its dependents, and capstan
// always stops them before the object goes (as a finalizer would), so
// Background and Foreground both mean that; Orphan, which would leave them
// running with no object to own them, is refused.
func (v *kubeVerbs) delete(r *http.Request, res Resource, ns, name string) (any, int, error) {
	ctx := r.Context()
	opts, err := deleteOptionsOf(r, v.maxBody)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	if p := opts.Preconditions; p != nil || len(opts.DryRun) > 0 {
		cur, err := v.kinds.Get(ctx, res, ns, name)
		if err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
		m := cur.GetMeta()
		if p != nil && p.UID != nil && string(*p.UID) != m.UID {
			return nil, 0, withObject(res.Kind, name, fail(errPrecondition, "Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, m.UID))
		}
		if p != nil && p.ResourceVersion != nil && *p.ResourceVersion != m.ResourceVersion {
			return nil, 0, withObject(res.Kind, name, fail(errPrecondition, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, m.ResourceVersion))
		}
		if len(opts.DryRun) > 0 {
			return cur, http.StatusOK, nil
		}
	}
	if err := v.kinds.Delete(ctx, res, ns, name); err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	group, _, _ := strings.Cut(v.apiVersion, "/")
	return &Status{Kind: "Status", APIVersion: "v1", Status: StatusSuccess, Code: http.StatusOK,
		Details: &StatusDetails{Name: name, Group: group, Kind: res.Kind}}, http.StatusOK, nil
}

// deleteOptionsOf reads a DELETE's DeleteOptions from its body (kubectl,
// client-go) and its query, and checks them.
func deleteOptionsOf(r *http.Request, maxBody int64) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	body, err := readBody(r, maxBody)
	if err != nil {
		return opts, err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			return opts, fail(errBadRequest, "the DeleteOptions body: %v", err)
		}
	}
	q := r.URL.Query()
	if p := q.Get("propagationPolicy"); p != "" {
		opts.PropagationPolicy = new(metav1.DeletionPropagation(p))
	}
	opts.DryRun = append(opts.DryRun, q["dryRun"]...)
	for _, d := range opts.DryRun {
		if d != metav1.DryRunAll {
			return opts, fail(errBadRequest, "dryRun %q: the only dry run is %q", d, metav1.DryRunAll)
		}
	}
	if opts.OrphanDependents != nil && *opts.OrphanDependents {
		opts.PropagationPolicy = new(metav1.DeletePropagationOrphan)
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		case metav1.DeletePropagationOrphan:
			return opts, fail(errBadRequest, "propagationPolicy Orphan: capstan stops an object's replicas with it and cannot leave them running without it; use Background or Foreground")
		default:
			return opts, fail(errBadRequest, "propagationPolicy %q must be Background, Foreground or Orphan", *p)
		}
	}
	return opts, nil
}

// NodeResources are the node API's kinds (internal/nodeapi), which it
// serves through a KubeAPI: cluster-scoped, as in Karpenter.
var NodeResources = []Resource{
	{Kind: "NodePool", Plural: "nodepools", Singular: "nodepool", ShortNames: []string{"np"}, APIGroup: "karpenter.sh",
		ClusterScoped: true, Status: true},
	{Kind: "HyperpodNodeClass", Plural: "hyperpodnodeclasses", Singular: "hyperpodnodeclass", ShortNames: []string{"hpnc", "nodeclass"},
		APIGroup: "karpenter.sagemaker.amazonaws.com", ClusterScoped: true, Status: true},
}

// KubeAPI serves the Kubernetes verbs over kinds another package stores
// (the node API's): create, update, patch (JSON merge, JSON patch,
// server-side apply), delete and the read-only status subresource, with
// this package's reading of bodies and wording of errors.
type KubeAPI struct {
	v   *kubeVerbs
	log *slog.Logger
}

// NewKubeAPI returns the verbs over kinds, whose objects are of apiVersion
// and typed for server-side apply by crds; applyPath is the group's
// multi-document apply, which errors point to.
func NewKubeAPI(kinds KubeKinds, apiVersion, applyPath string, crds []apiextv1.CustomResourceDefinition, clk clock.Clock, log *slog.Logger) (*KubeAPI, error) {
	fms, err := newFieldManagers(crds)
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &KubeAPI{v: &kubeVerbs{kinds: kinds, apiVersion: apiVersion, applyPath: applyPath, maxBody: manifest.MaxManifestBytes,
		fieldManagers: fms, clock: clk}, log: log}, nil
}

// Serve answers r for res's object name in namespace ns ("" for a
// cluster-scoped kind): its collection when name is "" (POST creates), the
// object (PUT, PATCH, DELETE), or its status subresource when sub is
// "status".
func (a *KubeAPI) Serve(w http.ResponseWriter, r *http.Request, res Resource, ns, name, sub string) {
	v, code, err := a.route(r, res, ns, name, sub)
	if err != nil {
		st := statusFor(err)
		code, v = st.Code, st
		if code >= 500 {
			a.log.ErrorContext(r.Context(), "kube API request failed", "method", r.Method, "path", r.URL.Path, "error", st.Message)
		}
	}
	writeJSON(w, code, v)
}

// TrackApply records in o's managedFields the fields a document of the
// kinds' multi-document apply sets, under ApplyManager (or the request's
// fieldManager), against the stored object.
func (a *KubeAPI) TrackApply(r *http.Request, res Resource, o KubeObject) error {
	return a.v.trackApply(r, res, o)
}

func (a *KubeAPI) route(r *http.Request, res Resource, ns, name, sub string) (any, int, error) {
	switch {
	case name == "" && r.Method == http.MethodPost:
		return a.v.create(r, res, ns)
	case name == "":
		return nil, 0, fail(errMethodNotAllowed, "%s is not supported on %s (use POST)", r.Method, r.URL.Path)
	case sub == "status":
		return a.v.status(r, res, ns, name)
	case sub != "":
		return nil, 0, fail(errNotFound, "the server could not find the requested resource %s", r.URL.Path)
	}
	return a.v.serveObject(r, res, ns, name)
}
