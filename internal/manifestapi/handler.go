package manifestapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	operatormanifests "github.com/capstan-dev/capstan/deploy/operator"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// Store keeps manifests and reports what became of them. Kind is
// manifest.KindInferenceEndpointConfig or manifest.KindJumpStartModel.
//
// Error contract: Get, Delete and Events return an error wrapping
// manifest.ErrNotFound for an unknown object; Apply returns validation
// problems it finds against the stored object (manifest.ValidateUpdate) as a
// manifest.ErrorList (or anything manifest.FieldErrors can read),
// deployment.ErrBeingDeleted while the object is being deleted and
// deployment.ErrTooMany past the object limit. (A SageMaker endpoint name that
// is taken is not an apply error: the object is stored and its status says
// EndpointNameInUse.) Apply receives an object that is already defaulted and
// valid, with status and server-set metadata cleared. List with namespace "" lists every
// namespace; List and Events return an empty slice, not an error, for none.
// internal/deployment's Service implements it.
type Store interface {
	Apply(ctx context.Context, obj manifest.Object) (manifest.ApplyResult, error)
	// ApplyWith is Apply under Kubernetes' create and update
	// preconditions (manifest.ErrAlreadyExists, manifest.ErrConflict).
	ApplyWith(ctx context.Context, obj manifest.Object, pre manifest.Preconditions) (manifest.ApplyResult, error)
	Get(ctx context.Context, kind, namespace, name string) (manifest.Object, error)
	List(ctx context.Context, kind, namespace string) ([]manifest.Object, error)
	Delete(ctx context.Context, kind, namespace, name string) error
	Events(ctx context.Context, kind, namespace, name string) ([]manifest.Event, error)
}

// KVCacheStore is a Store that also reports a deployment's KV cache tiers
// (GET …/{name}/kvcache), with Get's error contract. Without it that path
// answers 404. internal/deployment's Service implements it.
type KVCacheStore interface {
	KVCache(ctx context.Context, kind, namespace, name string) (manifest.KVCacheReport, error)
}

// Options configure a Handler. Zero values pick the defaults.
type Options struct {
	Store  Store
	Logger *slog.Logger
	// MaxBodyBytes caps a request body (default manifest.MaxManifestBytes, 1 MiB).
	MaxBodyBytes int64
	// MaxDocuments caps the documents in one apply (default manifest.MaxDocuments, 100).
	MaxDocuments int
	// Clock stamps managedFields entries (default the wall clock).
	Clock clock.Clock
}

// Handler serves the manifests API. It matches full paths under BasePath,
// so mount it at "/apis/" without stripping the prefix.
type Handler struct {
	store   Store
	log     *slog.Logger
	maxBody int64
	maxDocs int
	// kube are Kubernetes' write verbs over the store (kube.go).
	kube *kubeVerbs
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler over o.Store.
func New(o Options) (*Handler, error) {
	if o.Store == nil {
		return nil, errors.New("manifestapi: Options.Store is required")
	}
	defs, err := operatormanifests.CRDs()
	if err != nil {
		return nil, err
	}
	fms, err := newFieldManagers(defs)
	if err != nil {
		return nil, err
	}
	h := &Handler{store: o.Store, log: o.Logger, maxBody: o.MaxBodyBytes, maxDocs: o.MaxDocuments}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody <= 0 {
		h.maxBody = manifest.MaxManifestBytes
	}
	if h.maxDocs <= 0 {
		h.maxDocs = manifest.MaxDocuments
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	h.kube = &kubeVerbs{kinds: manifestKinds{h}, apiVersion: manifest.APIVersion, applyPath: ApplyPath, maxBody: h.maxBody,
		fieldManagers: fms, clock: o.Clock}
	return h, nil
}

// manifestKinds are the manifests as the Kubernetes verbs see them.
type manifestKinds struct{ h *Handler }

func (k manifestKinds) Get(ctx context.Context, res Resource, ns, name string) (KubeObject, error) {
	o, err := k.h.store.Get(ctx, res.Kind, ns, name)
	if err != nil {
		return nil, storeErr(res, ns, name, "get", err)
	}
	return o, nil
}

func (k manifestKinds) Load(body []byte, ns string) ([]KubeObject, error) {
	objs, err := k.h.load(body, ns)
	return kubeObjects(objs), err
}

func (manifestKinds) Decode(raw []byte) error {
	_, err := manifest.Decode(raw)
	return err
}

func (manifestKinds) CheckUpdate(live, next KubeObject) error {
	return manifest.ValidateUpdate(live.(manifest.Object), next.(manifest.Object))
}

func (k manifestKinds) Delete(ctx context.Context, res Resource, ns, name string) error {
	if err := k.h.store.Delete(ctx, res.Kind, ns, name); err != nil {
		return storeErr(res, ns, name, "delete", err)
	}
	k.h.log.InfoContext(ctx, "manifest deleted", "kind", res.Kind, "namespace", ns, "name", name)
	return nil
}

func (k manifestKinds) ApplyWith(ctx context.Context, o KubeObject, pre manifest.Preconditions) (manifest.ApplyResult, error) {
	ar, err := k.h.applyWith(ctx, o.(manifest.Object), pre)
	if err != nil {
		return manifest.ApplyResult{}, err
	}
	return ar.ApplyResult, nil
}

// reDNSLabel is RFC 1123's label, the rule for names and namespaces.
var reDNSLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func checkLabel(what, v string) error {
	if len(v) > 63 || !reDNSLabel.MatchString(v) {
		return fail(errBadRequest, "%s %q must be an RFC 1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", what, v)
	}
	return nil
}

// ServeHTTP routes by path segments rather than with http.ServeMux so that
// unknown paths and wrong methods answer with a Status body, as Kubernetes
// clients expect.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	code, v := h.serve(r)
	writeJSON(w, code, v)
	attrs := []any{"method", r.Method, "path", r.URL.Path, "code", code}
	switch {
	case code >= 500:
		h.log.ErrorContext(r.Context(), "manifest API request failed", append(attrs, "error", v.(*Status).Message)...)
	case code >= 400:
		h.log.DebugContext(r.Context(), "manifest API request refused", append(attrs, "reason", v.(*Status).Reason)...)
	}
}

// serve returns the HTTP code and the body to write.
func (h *Handler) serve(r *http.Request) (int, any) {
	v, code, err := h.route(r)
	if err != nil {
		st := statusFor(err)
		return st.Code, st
	}
	return code, v
}

func (h *Handler) route(r *http.Request) (any, int, error) {
	ctx := r.Context()
	p := r.URL.Path
	t, err := parseTarget(p, BasePath, resource)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case t.apply:
		if err := allow(r, http.MethodPost); err != nil {
			return nil, 0, err
		}
		return h.applyMany(r)
	case t.res == nil:
		if err := allow(r, http.MethodGet); err != nil {
			return nil, 0, err
		}
		return ResourceList(manifest.APIVersion, Resources), http.StatusOK, nil
	case t.name == "":
		if r.Method == http.MethodPost && t.ns != "" {
			return h.kube.create(r, *t.res, t.ns)
		}
		if err := allow(r, http.MethodGet); err != nil {
			return nil, 0, err
		}
		return h.list(ctx, *t.res, t.ns)
	}
	res, ns, name := *t.res, t.ns, t.name
	switch t.sub {
	case "scale":
		return h.scale(r, res, ns, name)
	case "status":
		return h.kube.status(r, res, ns, name)
	}
	if t.sub != "" {
		kvs, kvOK := h.store.(KVCacheStore)
		if t.sub != "events" && (t.sub != "kvcache" || !kvOK) {
			return nil, 0, fail(errNotFound, "the server could not find the requested resource %s", p)
		}
		if err := allow(r, http.MethodGet); err != nil {
			return nil, 0, err
		}
		if t.sub == "kvcache" {
			return kvCache(ctx, kvs, res, ns, name)
		}
		return h.events(ctx, res, ns, name)
	}
	return h.kube.serveObject(r, res, ns, name)
}

// storeErr words a Store failure about one object; NotFound reads as
// Kubernetes words it rather than repeating the store's text.
func storeErr(res Resource, ns, name, op string, err error) error {
	if errors.Is(err, manifest.ErrNotFound) {
		return NotFound(res, ns, name)
	}
	return fmt.Errorf("%s %s %q in namespace %q: %w", op, res.GroupResource(), name, ns, err)
}

func allow(r *http.Request, method string) error {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return nil
	}
	return fail(errMethodNotAllowed, "%s is not supported on %s (use %s)", r.Method, r.URL.Path, method)
}

func resource(plural string) (Resource, error) {
	res, ok := resourceForPlural(plural)
	if !ok {
		return Resource{}, fail(errNotFound, "the server does not serve resource %q in %s/%s (served: inferenceendpointconfigs, jumpstartmodels)", plural, Group, Version)
	}
	return res, nil
}

func (h *Handler) list(ctx context.Context, res Resource, ns string) (any, int, error) {
	objs, err := h.store.List(ctx, res.Kind, ns)
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", res.Plural, err)
	}
	if objs == nil {
		objs = []manifest.Object{}
	}
	return &List{APIVersion: manifest.APIVersion, Kind: res.Kind + "List", Items: objs}, http.StatusOK, nil
}

func (h *Handler) events(ctx context.Context, res Resource, ns, name string) (any, int, error) {
	evs, err := h.store.Events(ctx, res.Kind, ns, name)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, storeErr(res, ns, name, "events of", err))
	}
	if evs == nil {
		evs = []manifest.Event{}
	}
	return &EventList{APIVersion: manifest.APIVersion, Kind: "EventList", Items: evs}, http.StatusOK, nil
}

func kvCache(ctx context.Context, kvs KVCacheStore, res Resource, ns, name string) (any, int, error) {
	rep, err := kvs.KVCache(ctx, res.Kind, ns, name)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, storeErr(res, ns, name, "KV cache of", err))
	}
	if rep.Tiers == nil {
		rep.Tiers = []manifest.KVTierReport{}
	}
	return &KVCacheReport{APIVersion: manifest.APIVersion, Kind: "KVCacheReport", KVCacheReport: rep}, http.StatusOK, nil
}

// readBody reads the request body up to h's limit.
func (h *Handler) readBody(r *http.Request) ([]byte, error) { return readBody(r, h.maxBody) }

// readBody reads the request body up to limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fail(errTooLarge, "request body is %d bytes; the limit is %d", r.ContentLength, limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fail(errTooLarge, "request body is larger than the limit of %d bytes", limit)
		}
		return nil, fail(errBadRequest, "read body: %v", err)
	}
	return body, nil
}

// load decodes, defaults and validates every document of body, as
// manifest.Load does, except that a document without a namespace takes
// defaultNS (the URL's, or the apply's ?namespace=) before defaulting.
// Status and server-set metadata from a round-tripped `get -o yaml` are
// dropped: they belong to the server.
func (h *Handler) load(body []byte, defaultNS string) ([]manifest.Object, error) {
	docs := SplitDocuments(body)
	if len(docs) == 0 {
		return nil, fail(errBadRequest, "the body holds no manifest")
	}
	if len(docs) > h.maxDocs {
		return nil, fail(errTooLarge, "the body holds %d documents; the limit is %d", len(docs), h.maxDocs)
	}
	objs, err := manifest.Decode(body)
	if err != nil {
		if len(manifest.FieldErrors(err)) == 0 {
			return nil, fail(errBadRequest, "%v", err)
		}
		return nil, err
	}
	var errs []error
	for i, o := range objs {
		m := o.GetMeta()
		if m.Namespace == "" {
			m.Namespace = defaultNS
		}
		m.UID, m.ResourceVersion, m.Generation, m.CreationTimestamp = "", "", 0, nil
		*o.GetStatus() = manifest.Status{}
		o.Default()
		if err := o.Validate(); err != nil {
			errs = append(errs, docError(docs, objs, i, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

func docError(docs []Document, objs []manifest.Object, i int, err error) *manifest.DocumentError {
	de := &manifest.DocumentError{Index: i, Kind: objs[i].GetKind(), Name: objs[i].GetMeta().Name, Err: err}
	if len(docs) == len(objs) {
		de.Line = docs[i].Line
	}
	return de
}

// checkUpdates runs the rules that compare objs with what is stored, and
// refuses the same object twice in one body, before anything is stored.
func (h *Handler) checkUpdates(ctx context.Context, docs []Document, objs []manifest.Object) error {
	var errs []error
	seen := map[string]int{}
	for i, o := range objs {
		m := o.GetMeta()
		key := o.GetKind() + "/" + m.Namespace + "/" + m.Name
		if j, dup := seen[key]; dup {
			errs = append(errs, docError(docs, objs, i, manifest.ErrorList{{Path: "metadata.name", Message: fmt.Sprintf("%s %q appears twice in the body (also document %d)", o.GetKind(), m.Name, j)}}))
			continue
		}
		seen[key] = i
		prev, err := h.store.Get(ctx, o.GetKind(), m.Namespace, m.Name)
		switch {
		case errors.Is(err, manifest.ErrNotFound):
			continue
		case err != nil:
			return fmt.Errorf("read stored %s: %w", key, err)
		}
		if err := manifest.ValidateUpdate(prev, o); err != nil {
			errs = append(errs, docError(docs, objs, i, err))
		}
	}
	return errors.Join(errs...)
}

func (h *Handler) apply(ctx context.Context, o manifest.Object) (*ApplyResponse, error) {
	out, err := h.applyWith(ctx, o, manifest.Preconditions{})
	if err != nil {
		return nil, err
	}
	// The stored object carries what the store added (uid, generation,
	// status); a failure to read it back does not undo the apply.
	m := o.GetMeta()
	if stored, err := h.store.Get(ctx, o.GetKind(), m.Namespace, m.Name); err == nil {
		out.Object = stored
	}
	return out, nil
}

// applyWith stores o under pre and logs what it did.
func (h *Handler) applyWith(ctx context.Context, o manifest.Object, pre manifest.Preconditions) (*ApplyResponse, error) {
	m := o.GetMeta()
	res, err := h.store.ApplyWith(ctx, o, pre)
	if err != nil {
		return nil, fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), m.Namespace, m.Name, err)
	}
	h.log.InfoContext(ctx, "manifest applied", "kind", res.Kind, "namespace", res.Namespace, "name", res.Name,
		"action", res.Action, "generation", res.Generation)
	return &ApplyResponse{ApplyResult: res}, nil
}

func (h *Handler) applyMany(r *http.Request) (any, int, error) {
	ctx := r.Context()
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = manifest.DefaultNamespace
	} else if err := checkLabel("namespace", ns); err != nil {
		return nil, 0, err
	}
	body, err := h.readBody(r)
	if err != nil {
		return nil, 0, err
	}
	objs, err := h.load(body, ns)
	if err != nil {
		return nil, 0, err
	}
	docs := SplitDocuments(body)
	if err := h.checkUpdates(ctx, docs, objs); err != nil {
		return nil, 0, err
	}
	for _, o := range objs {
		res, _ := ResourceForKind(o.GetKind())
		if err := h.kube.trackApply(r, res, o); err != nil {
			return nil, 0, withObject(o.GetKind(), o.GetMeta().Name, err)
		}
	}
	out := &ApplyResultList{APIVersion: manifest.APIVersion, Kind: "ApplyResultList", Items: []manifest.ApplyResult{}}
	for i, o := range objs {
		res, err := h.apply(ctx, o)
		if err != nil {
			done := make([]string, 0, i)
			for _, a := range out.Items {
				done = append(done, fmt.Sprintf("%s/%s/%s %s", a.Kind, a.Namespace, a.Name, a.Action))
			}
			if len(done) > 0 {
				err = fmt.Errorf("%w (already applied: %s)", err, strings.Join(done, ", "))
			}
			return nil, 0, withObject(o.GetKind(), o.GetMeta().Name, err)
		}
		out.Items = append(out.Items, res.ApplyResult)
	}
	return out, http.StatusOK, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}
