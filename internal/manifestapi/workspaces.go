package manifestapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	spacesmanifests "github.com/capstan-dev/capstan/deploy/spaces"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/workspace"
)

// WorkspaceBasePath is the path prefix of the spaces' kinds.
const WorkspaceBasePath = "/apis/" + workspace.Group + "/" + workspace.Version

// WorkspaceApplyPath is the multi-document apply of the spaces' kinds.
const WorkspaceApplyPath = WorkspaceBasePath + "/apply"

// WorkspaceResources are the spaces' kinds, with the names the CLI accepts.
var WorkspaceResources = []Resource{
	{Kind: workspace.KindWorkspace, Plural: "workspaces", Singular: "workspace", APIGroup: workspace.Group, ShortNames: []string{"ws", "space", "spaces"}, Status: true},
	{Kind: workspace.KindWorkspaceTemplate, Plural: "workspacetemplates", Singular: "workspacetemplate", APIGroup: workspace.Group, ShortNames: []string{"wst"}},
}

// ResolveWorkspaceKind finds a spaces kind by any name a user types.
func ResolveWorkspaceKind(s string) (Resource, bool) {
	return resolveIn(WorkspaceResources, workspace.Group, workspace.Version, s)
}

// WorkspaceCollectionPath and WorkspaceObjectPath are the URLs of the
// spaces' kinds.
func WorkspaceCollectionPath(r Resource, namespace string) string {
	if namespace == "" {
		return WorkspaceBasePath + "/" + r.Plural
	}
	return WorkspaceBasePath + "/namespaces/" + namespace + "/" + r.Plural
}

func WorkspaceObjectPath(r Resource, namespace, name string) string {
	return WorkspaceCollectionPath(r, namespace) + "/" + url.PathEscape(name)
}

// WorkspaceStore keeps spaces and their templates: internal/spaces'
// Service. Its error contract is Store's, with spaces.ErrTooMany and
// spaces.ErrInUse in place of deployment's.
type WorkspaceStore interface {
	// Check runs what Apply would refuse, storing nothing.
	// Templates in pending are applied in the same request and count.
	Check(ctx context.Context, obj workspace.Object, pending []*workspace.WorkspaceTemplate) error
	Apply(ctx context.Context, obj workspace.Object) (manifest.ApplyResult, error)
	// ApplyWith is Apply under Kubernetes' create and update
	// preconditions (manifest.ErrAlreadyExists, manifest.ErrConflict).
	ApplyWith(ctx context.Context, obj workspace.Object, pre manifest.Preconditions) (manifest.ApplyResult, error)
	Get(ctx context.Context, kind, namespace, name string) (workspace.Object, error)
	List(ctx context.Context, kind, namespace string) ([]workspace.Object, error)
	Delete(ctx context.Context, kind, namespace, name string) error
	Events(ctx context.Context, kind, namespace, name string) ([]manifest.Event, error)
}

// WorkspaceHandler serves the spaces' kinds under WorkspaceBasePath, in the
// same shapes as Handler.
type WorkspaceHandler struct {
	store WorkspaceStore
	log   *slog.Logger
	body  *Handler // body limits and JSON writing
	// kube are Kubernetes' write verbs over the store (kube.go).
	kube *kubeVerbs
}

// NewWorkspaces returns the spaces' API over store; clk stamps
// managedFields entries (nil: the wall clock).
func NewWorkspaces(store WorkspaceStore, log *slog.Logger, clk clock.Clock) (*WorkspaceHandler, error) {
	if store == nil {
		return nil, errors.New("manifestapi: the workspace store is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	defs, err := spacesmanifests.CRDs()
	if err != nil {
		return nil, err
	}
	fms, err := newFieldManagers(defs)
	if err != nil {
		return nil, err
	}
	h := &WorkspaceHandler{store: store, log: log, body: &Handler{maxBody: manifest.MaxManifestBytes, maxDocs: manifest.MaxDocuments, log: log}}
	h.kube = &kubeVerbs{kinds: workspaceKinds{h}, apiVersion: workspace.APIVersion, applyPath: WorkspaceApplyPath,
		maxBody: manifest.MaxManifestBytes, fieldManagers: fms, clock: clk}
	return h, nil
}

// workspaceKinds are the spaces' kinds as the Kubernetes verbs see them.
type workspaceKinds struct{ h *WorkspaceHandler }

func (k workspaceKinds) Get(ctx context.Context, res Resource, ns, name string) (KubeObject, error) {
	o, err := k.h.store.Get(ctx, res.Kind, ns, name)
	if err != nil {
		return nil, wsStoreErr(res, ns, name, err)
	}
	return o, nil
}

func (k workspaceKinds) Load(body []byte, ns string) ([]KubeObject, error) {
	objs, _, err := k.h.load(body, ns)
	return kubeObjects(objs), err
}

func (workspaceKinds) Decode(raw []byte) error {
	_, err := workspace.Decode(raw)
	return err
}

// checkUpdate has nothing to compare: the store checks a workspace against
// its template and cluster as it applies it.
func (workspaceKinds) CheckUpdate(_, _ KubeObject) error { return nil }

func (k workspaceKinds) Delete(ctx context.Context, res Resource, ns, name string) error {
	if err := k.h.store.Delete(ctx, res.Kind, ns, name); err != nil {
		return wsStoreErr(res, ns, name, err)
	}
	k.h.log.InfoContext(ctx, "workspace object deleted", "kind", res.Kind, "namespace", ns, "name", name)
	return nil
}

func (k workspaceKinds) ApplyWith(ctx context.Context, o KubeObject, pre manifest.Preconditions) (manifest.ApplyResult, error) {
	ar, err := k.h.store.ApplyWith(ctx, o.(workspace.Object), pre)
	if err != nil {
		return manifest.ApplyResult{}, err
	}
	k.h.log.InfoContext(ctx, "workspace object applied", "kind", ar.Kind, "namespace", ar.Namespace, "name", ar.Name, "action", ar.Action)
	return ar, nil
}

func (h *WorkspaceHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, code, err := h.route(r)
	if err != nil {
		st := statusFor(err)
		code, v = st.Code, st
		if code >= 500 {
			h.log.ErrorContext(r.Context(), "workspace API request failed", "path", r.URL.Path, "error", st.Message)
		}
	}
	writeJSON(w, code, v)
}

func workspaceResource(plural string) (Resource, error) {
	for _, r := range WorkspaceResources {
		if r.Plural == plural {
			return r, nil
		}
	}
	return Resource{}, fail(errNotFound, "the server does not serve resource %q in %s/%s (served: workspaces, workspacetemplates)", plural, workspace.Group, workspace.Version)
}

func (h *WorkspaceHandler) route(r *http.Request) (any, int, error) {
	ctx := r.Context()
	t, err := parseTarget(r.URL.Path, WorkspaceBasePath, workspaceResource)
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
		return ResourceList(workspace.APIVersion, WorkspaceResources), http.StatusOK, nil
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
	if t.sub == "status" {
		return h.kube.status(r, res, ns, name)
	}
	if t.sub != "" {
		if t.sub != "events" {
			return nil, 0, fail(errNotFound, "the server could not find the requested resource %s", r.URL.Path)
		}
		if err := allow(r, http.MethodGet); err != nil {
			return nil, 0, err
		}
		evs, err := h.store.Events(ctx, res.Kind, ns, name)
		if err != nil {
			return nil, 0, withObject(res.Kind, name, wsStoreErr(res, ns, name, err))
		}
		if evs == nil {
			evs = []manifest.Event{}
		}
		return &EventList{APIVersion: workspace.APIVersion, Kind: "EventList", Items: evs}, http.StatusOK, nil
	}
	return h.kube.serveObject(r, res, ns, name)
}

func wsStoreErr(res Resource, ns, name string, err error) error {
	if errors.Is(err, manifest.ErrNotFound) {
		return NotFound(res, ns, name)
	}
	return err
}

func (h *WorkspaceHandler) list(ctx context.Context, res Resource, ns string) (any, int, error) {
	objs, err := h.store.List(ctx, res.Kind, ns)
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", res.Plural, err)
	}
	if objs == nil {
		objs = []workspace.Object{}
	}
	return &struct {
		APIVersion string             `json:"apiVersion"`
		Kind       string             `json:"kind"`
		Metadata   struct{}           `json:"metadata"`
		Items      []workspace.Object `json:"items"`
	}{APIVersion: workspace.APIVersion, Kind: res.Kind + "List", Items: objs}, http.StatusOK, nil
}

// load decodes, defaults and validates every document of body; a document
// without a namespace takes defaultNS. Server-set fields are dropped.
func (h *WorkspaceHandler) load(body []byte, defaultNS string) ([]workspace.Object, []Document, error) {
	docs := SplitDocuments(body)
	if len(docs) == 0 {
		return nil, nil, fail(errBadRequest, "the body holds no manifest")
	}
	if len(docs) > h.body.maxDocs {
		return nil, nil, fail(errTooLarge, "the body holds %d documents; the limit is %d", len(docs), h.body.maxDocs)
	}
	var objs []workspace.Object
	var errs []error
	for i, d := range docs {
		o, err := workspace.Decode(d.Text)
		if err != nil {
			errs = append(errs, &manifest.DocumentError{Index: i, Line: d.Line, Err: err})
			continue
		}
		m := o.GetMeta()
		if m.Namespace == "" {
			m.Namespace = defaultNS
		}
		m.UID, m.ResourceVersion, m.Generation, m.CreationTimestamp = "", "", 0, nil
		if ws, ok := o.(*workspace.Workspace); ok {
			ws.Status = workspace.WorkspaceStatus{}
		}
		o.Default()
		if err := o.Validate(); err != nil {
			errs = append(errs, &manifest.DocumentError{Index: i, Line: d.Line, Kind: o.GetKind(), Name: m.Name, Err: err})
			continue
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	seen := map[string]int{}
	for i, o := range objs {
		k := o.GetKind() + "/" + o.GetMeta().Namespace + "/" + o.GetMeta().Name
		if j, dup := seen[k]; dup {
			errs = append(errs, &manifest.DocumentError{Index: i, Line: docs[i].Line, Kind: o.GetKind(), Name: o.GetMeta().Name,
				Err: manifest.ErrorList{{Path: "metadata.name", Message: fmt.Sprintf("%s %q appears twice in the body (also document %d)", o.GetKind(), o.GetMeta().Name, j)}}})
		}
		seen[k] = i
	}
	return objs, docs, errors.Join(errs...)
}

func (h *WorkspaceHandler) applyMany(r *http.Request) (any, int, error) {
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = manifest.DefaultNamespace
	} else if err := checkLabel("namespace", ns); err != nil {
		return nil, 0, err
	}
	body, err := h.body.readBody(r)
	if err != nil {
		return nil, 0, err
	}
	objs, docs, err := h.load(body, ns)
	if err != nil {
		return nil, 0, err
	}
	// Templates first, so a file may hold a template and the workspaces
	// that name it.
	order := make([]int, 0, len(objs))
	for pass := 0; pass < 2; pass++ {
		for i, o := range objs {
			if (o.GetKind() == workspace.KindWorkspaceTemplate) == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	// Everything is checked before anything is stored, the body's own
	// templates counting as stored.
	var pending []*workspace.WorkspaceTemplate
	for _, o := range objs {
		if t, ok := o.(*workspace.WorkspaceTemplate); ok {
			pending = append(pending, t)
		}
	}
	var errs []error
	for i, o := range objs {
		if err := h.store.Check(r.Context(), o, pending); err != nil {
			if len(manifest.FieldErrors(err)) == 0 {
				return nil, 0, withObject(o.GetKind(), o.GetMeta().Name, err)
			}
			errs = append(errs, &manifest.DocumentError{Index: i, Line: docs[i].Line, Kind: o.GetKind(), Name: o.GetMeta().Name, Err: err})
		}
	}
	if len(errs) > 0 {
		return nil, 0, errors.Join(errs...)
	}
	for _, o := range objs {
		res, _ := ResolveWorkspaceKind(o.GetKind())
		if err := h.kube.trackApply(r, res, o); err != nil {
			return nil, 0, withObject(o.GetKind(), o.GetMeta().Name, err)
		}
	}
	out := &ApplyResultList{APIVersion: workspace.APIVersion, Kind: "ApplyResultList", Items: make([]manifest.ApplyResult, len(objs))}
	var done []string
	for _, i := range order {
		o := objs[i]
		ar, err := h.store.Apply(r.Context(), o)
		if err != nil {
			if len(manifest.FieldErrors(err)) > 0 {
				err = &manifest.DocumentError{Index: i, Line: docs[i].Line, Kind: o.GetKind(), Name: o.GetMeta().Name, Err: err}
			}
			if len(done) > 0 {
				err = fmt.Errorf("%w (already applied: %s)", err, strings.Join(done, ", "))
			}
			return nil, 0, withObject(o.GetKind(), o.GetMeta().Name, err)
		}
		h.log.InfoContext(r.Context(), "workspace object applied", "kind", ar.Kind, "namespace", ar.Namespace, "name", ar.Name, "action", ar.Action)
		out.Items[i] = ar
		done = append(done, fmt.Sprintf("%s/%s/%s %s", ar.Kind, ar.Namespace, ar.Name, ar.Action))
	}
	return out, http.StatusOK, nil
}
