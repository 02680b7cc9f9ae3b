package manifestapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// The verbs kubectl and client-go write with, beside capstan's own apply:
// create (POST to a collection), patch (JSON merge patch and JSON patch on
// an object) and the scale subresource. Each goes through the same
// decoding, validation and update rules as an apply, and answers the
// stored object, as a Kubernetes API server does.

// Patch media types a custom resource takes.
const (
	mergePatch = "application/merge-patch+json"
	jsonPatch  = "application/json-patch+json"
)

// maxPatchRetries bounds how often a patch is recomputed when the object
// changes between its read and its write.
const maxPatchRetries = 5

// create stores one new object (POST to the namespace's collection);
// manifest.ErrAlreadyExists when it exists.
func (h *Handler) create(r *http.Request, res Resource, ns string) (any, int, error) {
	body, err := h.readBody(r)
	if err != nil {
		return nil, 0, err
	}
	objs, err := h.load(body, ns)
	if err != nil {
		return nil, 0, err
	}
	if len(objs) != 1 {
		return nil, 0, fail(errBadRequest, "POST takes exactly one manifest, got %d; POST %s takes several", len(objs), ApplyPath)
	}
	o, m := objs[0], objs[0].GetMeta()
	switch {
	case o.GetKind() != res.Kind:
		return nil, 0, fail(errBadRequest, "the body is a %s but the URL is for %s", o.GetKind(), res.Plural)
	case m.Namespace != ns:
		return nil, 0, fail(errBadRequest, "the namespace of the object (%s) does not match the namespace on the URL (%s)", m.Namespace, ns)
	}
	if err := h.track(r, nil, o); err != nil {
		return nil, 0, withObject(res.Kind, m.Name, err)
	}
	if _, err := h.applyWith(r.Context(), o, manifest.Preconditions{Create: true}); err != nil {
		return nil, 0, withObject(res.Kind, m.Name, err)
	}
	stored, err := h.store.Get(r.Context(), res.Kind, ns, m.Name)
	if err != nil {
		return nil, 0, withObject(res.Kind, m.Name, storeErr(res, ns, m.Name, "get", err))
	}
	return stored, http.StatusCreated, nil
}

// patch applies a JSON merge patch or a JSON patch to the stored object and
// stores the result as an update of the version it read: the object as
// patched is decoded, defaulted and validated like any apply, and a
// concurrent write makes it read again.
func (h *Handler) patch(r *http.Request, res Resource, ns, name string) (any, int, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == applyPatch {
		return h.serverSideApply(r, res, ns, name)
	}
	if ct != mergePatch && ct != jsonPatch {
		return nil, 0, withObject(res.Kind, name, fail(errUnsupportedMediaType,
			"the body of the request was in an unknown format %q - accepted media types include: %s, %s, %s", ct, jsonPatch, mergePatch, applyPatch))
	}
	body, err := h.readBody(r)
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	stored, err := h.patchWith(r, res, ns, name, func(doc []byte) ([]byte, error) {
		if ct == mergePatch {
			return jsonpatch.MergePatch(doc, body)
		}
		p, err := jsonpatch.DecodePatch(body)
		if err != nil {
			return nil, err
		}
		opts := jsonpatch.NewApplyOptions()
		opts.AccumulatedCopySizeLimit = h.maxBody // copies cannot grow the object past a body's size
		return p.ApplyWithOptions(doc, opts)
	})
	if err != nil {
		return nil, 0, withObject(res.Kind, name, err)
	}
	return stored, http.StatusOK, nil
}

// patchWith stores change(the stored object's JSON) as an update of the
// version read, reading again when another write came first.
func (h *Handler) patchWith(r *http.Request, res Resource, ns, name string, change func([]byte) ([]byte, error)) (manifest.Object, error) {
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		cur, err := h.store.Get(ctx, res.Kind, ns, name)
		if err != nil {
			return nil, storeErr(res, ns, name, "get", err)
		}
		doc, err := json.Marshal(cur)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s/%s: %w", res.Kind, ns, name, err)
		}
		patched, err := change(doc)
		if err != nil {
			return nil, fail(errBadRequest, "the patch does not apply: %v", err)
		}
		objs, err := h.load(patched, ns)
		if err != nil {
			return nil, err
		}
		if err := putMatchesURL(len(objs), ApplyPath, res, ns, name, func() (string, *manifest.ObjectMeta) {
			return objs[0].GetKind(), objs[0].GetMeta()
		}); err != nil {
			return nil, err
		}
		if err := manifest.ValidateUpdate(cur, objs[0]); err != nil {
			return nil, err
		}
		if err := h.track(r, cur, objs[0]); err != nil {
			return nil, err
		}
		_, err = h.applyWith(ctx, objs[0], manifest.Preconditions{ResourceVersion: cur.GetMeta().ResourceVersion})
		if errors.Is(err, manifest.ErrConflict) && attempt < maxPatchRetries {
			continue
		}
		if err != nil {
			return nil, err
		}
		stored, err := h.store.Get(ctx, res.Kind, ns, name)
		if err != nil {
			return nil, storeErr(res, ns, name, "get", err)
		}
		return stored, nil
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
	stored, err := h.patchWith(r, res, ns, name, func(doc []byte) ([]byte, error) {
		var cur map[string]any
		if err := json.Unmarshal(doc, &cur); err != nil {
			return nil, err
		}
		replicas, err := scaledReplicas(r.Method, ct, body, doc, h.maxBody)
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
	return scaleOf(stored), http.StatusOK, nil
}

// scaledReplicas reads the replicas a scale write asks for: a PUT's Scale,
// or the Scale of doc (the object's JSON) as the patch leaves it.
func scaledReplicas(method, ct string, body, doc []byte, maxBody int64) (int32, error) {
	objs, err := manifest.Decode(doc)
	if err != nil || len(objs) != 1 {
		return 0, fmt.Errorf("read the object: %v", err)
	}
	cur, err := json.Marshal(scaleOf(objs[0]))
	if err != nil {
		return 0, err
	}
	next := body
	switch {
	case method == http.MethodPatch && ct == mergePatch:
		next, err = jsonpatch.MergePatch(cur, body)
	case method == http.MethodPatch:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(body); err == nil {
			opts := jsonpatch.NewApplyOptions()
			opts.AccumulatedCopySizeLimit = maxBody
			next, err = p.ApplyWithOptions(cur, opts)
		}
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
