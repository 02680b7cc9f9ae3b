package manifestapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// applyPatch is server-side apply's media type (kubectl apply --server-side).
const applyPatch = "application/apply-patch+yaml"

// fieldManagers are server-side apply's field managers, one per kind,
// typed by the operator's CRD schemas (deploy/operator/crds), as the API
// server builds them for a custom resource: the same structured-merge-diff
// rules decide who owns which field, what an apply removes and what
// conflicts.
type fieldManagers map[string]*managedfields.FieldManager

func newFieldManagers(defs []apiextv1.CustomResourceDefinition) (fieldManagers, error) {
	schemas := map[string]*spec.Schema{}
	var kinds []schema.GroupVersionKind
	for _, crd := range defs {
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			b, err := json.Marshal(v.Schema.OpenAPIV3Schema)
			if err != nil {
				return nil, err
			}
			var s spec.Schema
			if err := json.Unmarshal(b, &s); err != nil {
				return nil, fmt.Errorf("manifestapi: the %s schema: %w", gvk.Kind, err)
			}
			s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}})
			schemas[gvk.Group+"."+gvk.Version+"."+gvk.Kind] = &s
			kinds = append(kinds, gvk)
		}
	}
	tc, err := managedfields.NewTypeConverter(schemas, false)
	if err != nil {
		return nil, fmt.Errorf("manifestapi: field manager types: %w", err)
	}
	out := fieldManagers{}
	for _, gvk := range kinds {
		fm, err := managedfields.NewDefaultCRDFieldManager(tc, unstructuredConverter{}, unstructuredDefaulter{}, unstructuredCreater{},
			gvk, gvk.GroupVersion(), "", nil)
		if err != nil {
			return nil, fmt.Errorf("manifestapi: field manager of %s: %w", gvk.Kind, err)
		}
		out[gvk.Kind] = fm
	}
	return out, nil
}

// serverSideApply applies body, a partial object, as fieldManager's intent
// (PATCH with application/apply-patch+yaml): the fields it sets become the
// manager's, fields the manager set before and left out are removed, and a
// field another manager owns with another value is a conflict unless force
// is true. A missing object is created. The result goes through the same
// decoding, validation and update rules as any apply.
func (v *kubeVerbs) serverSideApply(r *http.Request, res Resource, ns, name string) (any, int, error) {
	ctx := r.Context()
	q := r.URL.Query()
	manager := q.Get("fieldManager")
	if manager == "" {
		return nil, 0, withObject(res.Kind, name, fail(errBadRequest, "PATCH with %s requires the fieldManager query parameter", applyPatch))
	}
	if len(manager) > 128 {
		return nil, 0, withObject(res.Kind, name, fail(errBadRequest, "fieldManager is %d bytes; the limit is 128", len(manager)))
	}
	force := q.Get("force") == "true"
	fm := v.fieldManagers[res.Kind]
	if fm == nil {
		return nil, 0, withObject(res.Kind, name, fail(errUnsupportedMediaType, "%s has no server-side apply here", res.Kind))
	}
	body, err := readBody(r, v.maxBody)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	applied := &unstructured.Unstructured{}
	raw, err := yaml.YAMLToJSON(body)
	if err == nil {
		err = applied.UnmarshalJSON(raw)
	}
	if err != nil {
		return nil, 0, withObject(res.Kind, name, fail(errBadRequest, "the applied configuration: %v", err))
	}
	// Unknown fields and wrong types get capstan's field errors, as in
	// every other write, before the field manager types the object.
	if err := v.kinds.Decode(raw); err != nil {
		if len(manifest.FieldErrors(err)) == 0 {
			err = fail(errBadRequest, "%v", err)
		}
		return nil, 0, withObject(res.Kind, name, err)
	}
	switch {
	case applied.GetKind() != res.Kind:
		return nil, 0, withObject(res.Kind, name, fail(errBadRequest, "the body is a %s but the URL is for %s", applied.GetKind(), res.Plural))
	case applied.GetName() != name:
		return nil, 0, withObject(res.Kind, name, fail(errBadRequest, "the name of the object (%s) does not match the name on the URL (%s)", applied.GetName(), name))
	case applied.GetNamespace() != "" && applied.GetNamespace() != ns:
		return nil, 0, withObject(res.Kind, name, fail(errBadRequest, "the namespace of the object (%s) does not match the namespace on the URL (%s)", applied.GetNamespace(), ns))
	}
	applied.SetNamespace(ns)
	for attempt := 0; ; attempt++ {
		live, cur, pre, err := v.liveObject(ctx, res, ns, name)
		if err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
		out, err := fm.Apply(live, applied.DeepCopy(), manager, force)
		if _, conflict := conflictStatus(err); err != nil && !conflict {
			err = fail(errBadRequest, "server-side apply: %v", err)
		}
		if err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
		if u, ok := out.(*unstructured.Unstructured); ok {
			u.SetManagedFields(stamp(live.(*unstructured.Unstructured).GetManagedFields(), u.GetManagedFields(), v.clock.Now()))
		}
		next, err := json.Marshal(out)
		if err != nil {
			return nil, 0, err
		}
		objs, err := v.kinds.Load(next, ns)
		if err == nil {
			err = v.matchesURL(http.MethodPatch, objs, res, ns, name)
		}
		if err == nil && cur != nil {
			err = v.kinds.CheckUpdate(cur, objs[0])
		}
		if err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
		ar, err := v.kinds.ApplyWith(ctx, objs[0], pre)
		if (errors.Is(err, manifest.ErrConflict) || errors.Is(err, manifest.ErrAlreadyExists)) && attempt < maxPatchRetries {
			continue
		}
		if err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
		stored, err := v.kinds.Get(ctx, res, ns, name)
		if err != nil {
			return nil, 0, withObject(res.Kind, name, err)
		}
		code := http.StatusOK
		if ar.Action == manifest.ActionCreated {
			code = http.StatusCreated
		}
		return stored, code, nil
	}
}

// liveObject is the stored object as server-side apply reads it (and as
// it is, nil when there is none), with the preconditions its write needs:
// an update of the version read, or a create of an empty object when there
// is none.
func (v *kubeVerbs) liveObject(ctx context.Context, res Resource, ns, name string) (runtime.Object, KubeObject, manifest.Preconditions, error) {
	cur, err := v.kinds.Get(ctx, res, ns, name)
	if errors.Is(err, errNotFound) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(v.apiVersion)
		u.SetKind(res.Kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u, nil, manifest.Preconditions{Create: true}, nil
	}
	if err != nil {
		return nil, nil, manifest.Preconditions{}, err
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return nil, nil, manifest.Preconditions{}, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, nil, manifest.Preconditions{}, err
	}
	return u, cur, manifest.Preconditions{ResourceVersion: cur.GetMeta().ResourceVersion}, nil
}

// The conversions server-side apply needs for a custom resource that has
// one version: none.
type unstructuredConverter struct{}

func (unstructuredConverter) Convert(in, out, _ any) error {
	u, ok1 := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("manifestapi: cannot convert %T to %T", in, out)
	}
	o.Object = runtime.DeepCopyJSON(u.Object)
	return nil
}

func (unstructuredConverter) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	out := in.DeepCopyObject()
	if gvk, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{in.GetObjectKind().GroupVersionKind()}); ok {
		out.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return out, nil
}

func (unstructuredConverter) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type unstructuredDefaulter struct{}

func (unstructuredDefaulter) Default(runtime.Object) {}

type unstructuredCreater struct{}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// conflictStatus is the wire Status of a server-side apply conflict:
// apierrors' own, whose causes name each field and its manager.
func conflictStatus(err error) (*Status, bool) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Reason != "Conflict" {
		return nil, false
	}
	s := se.Status()
	st := &Status{Kind: "Status", APIVersion: "v1", Status: StatusFailure, Message: s.Message, Reason: ReasonConflict, Code: http.StatusConflict}
	if d := s.Details; d != nil {
		st.Details = &StatusDetails{Name: d.Name, Group: d.Group, Kind: d.Kind}
		for _, c := range d.Causes {
			st.Details.Causes = append(st.Details.Causes, StatusCause{Reason: string(c.Type), Message: c.Message, Field: c.Field})
		}
	}
	return st, true
}

// track records, in next's managedFields, the fields a write that is not
// an apply (create, update, patch, scale) sets, under the request's field
// manager (its fieldManager parameter, else its User-Agent's product, as
// the API server names it), so a later server-side apply sees who owns
// what. live is the stored object, nil for a create.
func (v *kubeVerbs) track(r *http.Request, live, next KubeObject) error {
	manager, _, _ := strings.Cut(r.UserAgent(), "/")
	return v.trackAs(r, manager, live, next)
}

// ApplyManager is the field manager of capstan's multi-document apply
// (capstan apply, the console), as kubectl's client-side apply has its own.
const ApplyManager = "capstan-apply"

// trackApply records the fields a document of capstan's multi-document
// apply sets, under ApplyManager unless the request names a fieldManager,
// against what is stored.
func (v *kubeVerbs) trackApply(r *http.Request, res Resource, next KubeObject) error {
	m := next.GetMeta()
	live, err := v.kinds.Get(r.Context(), res, m.Namespace, m.Name)
	switch {
	case errors.Is(err, errNotFound):
		live = nil
	case err != nil:
		return err
	}
	return v.trackAs(r, ApplyManager, live, next)
}

// trackAs is track with fallback as the manager when the request names
// none.
func (v *kubeVerbs) trackAs(r *http.Request, fallback string, live, next KubeObject) error {
	fm := v.fieldManagers[next.GetKind()]
	if fm == nil {
		return nil
	}
	manager := r.URL.Query().Get("fieldManager")
	if manager == "" {
		manager = fallback
	}
	if manager == "" {
		manager = "unknown"
	}
	if len(manager) > 128 {
		return fail(errBadRequest, "fieldManager is %d bytes; the limit is 128", len(manager))
	}
	toUnstructured := func(o KubeObject) (*unstructured.Unstructured, error) {
		b, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		return u, u.UnmarshalJSON(b)
	}
	nu, err := toUnstructured(next)
	if err != nil {
		return err
	}
	var lu *unstructured.Unstructured
	if live != nil {
		if lu, err = toUnstructured(live); err != nil {
			return err
		}
	} else {
		lu = &unstructured.Unstructured{}
		lu.SetGroupVersionKind(nu.GroupVersionKind())
		lu.SetNamespace(nu.GetNamespace())
		lu.SetName(nu.GetName())
	}
	out, err := fm.Update(lu, nu, manager)
	if err != nil {
		return err
	}
	acc, ok := out.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("manifestapi: the field manager answered a %T", out)
	}
	var prev []metav1.ManagedFieldsEntry
	if live != nil {
		prev = live.GetMeta().ManagedFields
	}
	next.GetMeta().ManagedFields = stamp(prev, acc.GetManagedFields(), v.clock.Now())
	return nil
}

// stamp dates the entries a write changed with the server's clock (the
// field manager would use the wall clock); an entry the write left as it
// was keeps its time.
func stamp(prev, next []metav1.ManagedFieldsEntry, now time.Time) []metav1.ManagedFieldsEntry {
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	for i := range next {
		e := next[i]
		kept := false
		for _, p := range prev {
			a, b := e, p
			a.Time, b.Time = nil, nil
			if reflect.DeepEqual(a, b) {
				next[i].Time, kept = p.Time, true
				break
			}
		}
		if !kept {
			next[i].Time = &t
		}
	}
	return next
}
