package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/modelsource"
	"github.com/capstan-dev/capstan/internal/store"
)

// bucket holds every manifest record, keyed "Kind/namespace/name".
const bucket = "deployments"

// MaxObjects bounds how many manifests (of both kinds) the server keeps.
const MaxObjects = 1000

// ErrTooMany: creating the object would exceed MaxObjects.
var ErrTooMany = fmt.Errorf("too many manifests; the limit is %d", MaxObjects)

// Errors the API layer maps.
var (
	// ErrUnknownKind: the kind is neither InferenceEndpointConfig nor JumpStartModel.
	ErrUnknownKind = errors.New("unknown kind")
	// ErrBeingDeleted: the object is being deleted; apply it again once it is gone.
	ErrBeingDeleted = errors.New("object is being deleted")
	// errConflict: the record changed under the controller; it re-reads.
	errConflict = errors.New("record changed concurrently")
)

// record is one stored manifest plus the controller's durable bookkeeping.
type record struct {
	IEC *manifest.InferenceEndpointConfig `json:"iec,omitempty"`
	JSM *manifest.JumpStartModel          `json:"jsm,omitempty"`
	// Version is bumped by every write of the record: the controller's
	// optimistic concurrency.
	Version int64 `json:"version"`
	// RV is the object's resourceVersion: the store-wide counter at its
	// last write (nextResourceVersion), so versions order every write of
	// every manifest, as a watch from a list's version needs. Records
	// written before it existed use Version.
	RV       int64 `json:"rv,omitempty"`
	Deleting bool  `json:"deleting,omitempty"`
	// Revision numbers replica templates; Template is the current one's hash.
	Revision int    `json:"revision"`
	Template string `json:"template,omitempty"`
	// NextIndex numbers replicas within a revision.
	NextIndex int `json:"nextIndex"`
	// Replicas are every replica the deployment should have (current and
	// not yet retired old revisions), recorded before they are started.
	Replicas []replicaRec `json:"replicas,omitempty"`
	// Desired is the autoscaler's replica count; nil means spec.replicas.
	Desired *int `json:"desired,omitempty"`
	// DeployStart is when the current rollout began (zero once complete).
	DeployStart time.Time `json:"deployStart,omitzero"`
	// StepAt is when the replica set last took a rollout step (a batch
	// started or old replicas retired): a batch's wait counts from it.
	StepAt time.Time `json:"stepAt,omitzero"`
	// Registered is the SageMaker endpoint name this object holds.
	Registered string `json:"registered,omitempty"`
	// Activated is when the activator last brought the deployment up from
	// zero (for the scale-to-zero guard and the cold-start metric).
	Activated time.Time `json:"activated,omitzero"`
}

type replicaRec struct {
	ID       string `json:"id"`
	Revision int    `json:"revision"`
}

func (r *record) obj() manifest.Object {
	if r.IEC != nil {
		return r.IEC
	}
	return r.JSM
}

func (r *record) set(o manifest.Object) {
	switch v := o.(type) {
	case *manifest.InferenceEndpointConfig:
		r.IEC, r.JSM = v, nil
	case *manifest.JumpStartModel:
		r.IEC, r.JSM = nil, v
	}
}

func key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func splitKey(k string) (kind, namespace, name string, ok bool) {
	parts := strings.SplitN(k, "/", 3)
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

func checkKind(kind string) error {
	if kind != manifest.KindInferenceEndpointConfig && kind != manifest.KindJumpStartModel {
		return fmt.Errorf("%w %q (want %s or %s)", ErrUnknownKind, kind, manifest.KindInferenceEndpointConfig, manifest.KindJumpStartModel)
	}
	return nil
}

// clone deep-copies an object through JSON, so callers never share memory
// with the store's view.
func clone(o manifest.Object) (manifest.Object, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var out manifest.Object
	switch o.(type) {
	case *manifest.InferenceEndpointConfig:
		out = &manifest.InferenceEndpointConfig{}
	case *manifest.JumpStartModel:
		out = &manifest.JumpStartModel{}
	default:
		return nil, fmt.Errorf("%w: %T", ErrUnknownKind, o)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

func specOf(o manifest.Object) any {
	switch v := o.(type) {
	case *manifest.InferenceEndpointConfig:
		return v.Spec
	case *manifest.JumpStartModel:
		return v.Spec
	}
	return nil
}

func sameSpec(a, b manifest.Object) bool {
	ja, err1 := json.Marshal(specOf(a))
	jb, err2 := json.Marshal(specOf(b))
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// Apply creates or updates obj, which manifest.Load has already decoded,
// defaulted and validated. Re-applying an unchanged manifest writes nothing
// and returns ActionUnchanged; a spec change bumps metadata.generation (and
// the controller rolls it out); a label or annotation change alone is
// "configured" without a new generation. Status on input is ignored.
func (s *Service) Apply(ctx context.Context, obj manifest.Object) (manifest.ApplyResult, error) {
	return s.ApplyWith(ctx, obj, manifest.Preconditions{})
}

// ApplyWith is Apply under pre, checked in the same transaction as the
// write: manifest.ErrAlreadyExists when pre.Create finds the object,
// manifest.ErrNotFound when pre.ResourceVersion is set and there is none,
// manifest.ErrConflict when it is not the stored object's.
func (s *Service) ApplyWith(ctx context.Context, obj manifest.Object, pre manifest.Preconditions) (manifest.ApplyResult, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return manifest.ApplyResult{}, fmt.Errorf("apply: no object")
	}
	if err := checkKind(obj.GetKind()); err != nil {
		return manifest.ApplyResult{}, err
	}
	next, err := clone(obj)
	if err != nil {
		return manifest.ApplyResult{}, fmt.Errorf("apply: %w", err)
	}
	nm := next.GetMeta()
	if nm.Name == "" {
		return manifest.ApplyResult{}, fmt.Errorf("apply: metadata.name is required")
	}
	if nm.Namespace == "" {
		nm.Namespace = manifest.DefaultNamespace
	}
	if err := s.checkSource(next); err != nil {
		return manifest.ApplyResult{}, err
	}
	if err := s.checkEngine(next); err != nil {
		return manifest.ApplyResult{}, err
	}
	k := key(next.GetKind(), nm.Namespace, nm.Name)
	res := manifest.ApplyResult{Kind: next.GetKind(), Namespace: nm.Namespace, Name: nm.Name, Warnings: manifest.IgnoredFieldMessages(next)}
	now := s.clock.Now().UTC().Truncate(time.Second)
	err = s.store.Update(func(tx *store.Tx) error {
		var rec record
		found, err := tx.Get(bucket, k, &rec)
		if err != nil {
			return err
		}
		switch {
		case found && pre.Create:
			return fmt.Errorf("%s %s/%s: %w", next.GetKind(), nm.Namespace, nm.Name, manifest.ErrAlreadyExists)
		case !found && pre.ResourceVersion != "":
			return fmt.Errorf("%s %s/%s: %w", next.GetKind(), nm.Namespace, nm.Name, manifest.ErrNotFound)
		case found && pre.ResourceVersion != "" && rec.resourceVersion() != pre.ResourceVersion:
			return fmt.Errorf("%s %s/%s: %w", next.GetKind(), nm.Namespace, nm.Name, manifest.ErrConflict)
		}
		if !found {
			n := 0
			if err := tx.Each(bucket, func(string, []byte) error { n++; return nil }); err != nil {
				return err
			}
			if n >= MaxObjects {
				return fmt.Errorf("%s %s/%s: %w", next.GetKind(), nm.Namespace, nm.Name, ErrTooMany)
			}
			nm.UID = uuid.NewString()
			nm.CreationTimestamp = &now
			nm.Generation = 1
			*next.GetStatus() = manifest.Status{State: manifest.StateDeploymentPending}
			rec = record{Version: 1, DeployStart: now}
			rec.set(next)
			if err := stamp(tx, &rec); err != nil {
				return err
			}
			res.Action, res.Generation = manifest.ActionCreated, 1
			return tx.Put(bucket, k, &rec)
		}
		if rec.Deleting {
			return fmt.Errorf("%s %s/%s: %w", next.GetKind(), nm.Namespace, nm.Name, ErrBeingDeleted)
		}
		prev := rec.obj()
		if err := manifest.ValidateUpdate(prev, next); err != nil {
			return err
		}
		pm := prev.GetMeta()
		nm.UID, nm.CreationTimestamp, nm.Generation = pm.UID, pm.CreationTimestamp, pm.Generation
		if nm.ManagedFields == nil {
			// A write that does not speak of them keeps them, as in Kubernetes.
			nm.ManagedFields = pm.ManagedFields
		}
		*next.GetStatus() = *prev.GetStatus()
		specChanged := !sameSpec(prev, next)
		metaChanged := !reflect.DeepEqual(pm.Labels, nm.Labels) && !(len(pm.Labels) == 0 && len(nm.Labels) == 0) ||
			!reflect.DeepEqual(pm.Annotations, nm.Annotations) && !(len(pm.Annotations) == 0 && len(nm.Annotations) == 0) ||
			!reflect.DeepEqual(pm.ManagedFields, nm.ManagedFields) && !(len(pm.ManagedFields) == 0 && len(nm.ManagedFields) == 0)
		res.Generation = pm.Generation
		if !specChanged && !metaChanged {
			res.Action = manifest.ActionUnchanged
			return nil
		}
		if specChanged {
			nm.Generation++
			res.Generation = nm.Generation
		}
		rec.Version++
		rec.set(next)
		if err := stamp(tx, &rec); err != nil {
			return err
		}
		res.Action = manifest.ActionConfigured
		return tx.Put(bucket, k, &rec)
	})
	if err != nil {
		return manifest.ApplyResult{}, err
	}
	if res.Action != manifest.ActionUnchanged {
		what := "created"
		if res.Action == manifest.ActionConfigured {
			what = fmt.Sprintf("configured (generation %d)", res.Generation)
		}
		s.ctrl.event(k, manifest.EventNormal, "Applied", "manifest "+what)
		s.log.InfoContext(ctx, "manifest applied", "kind", res.Kind, "namespace", res.Namespace, "name", res.Name,
			"action", res.Action, "generation", res.Generation)
	}
	return res, nil
}

// checkEngine refuses, as a field error before anything is stored, a
// worker.image no engine serves here (no adapter, a configured binary
// missing, an engine the simulator cannot stand in for), and a GGUF engine
// without a model source to load its file from.
func (s *Service) checkEngine(obj manifest.Object) error {
	iec, ok := obj.(*manifest.InferenceEndpointConfig)
	if !ok || iec.Spec.Worker == nil {
		return nil
	}
	ch, err := s.ctrl.o.Engines.Choose(iec.Spec.Worker.Image)
	if err != nil {
		return manifest.ErrorList{{Path: "spec.worker.image", Message: err.Error()}}
	}
	if ch.Engine != engines.Sim && ch.Adapter.Format == engines.FormatGGUF {
		if _, err := modelsource.FromManifest(obj); err != nil || s.models == nil {
			return manifest.ErrorList{{Path: "spec.modelSourceConfig", Message: fmt.Sprintf(
				"%s loads a .gguf file: give a modelSourceConfig (s3Storage or fsxStorage) holding it", ch.Adapter.Title)}}
		}
	}
	return nil
}

// checkSource refuses a model source the server has no settings for (an s3
// source without an S3 endpoint) as a field error, before anything is
// stored or contacted. A source FromManifest cannot read is left to the
// controller, which reports it in the status as before.
func (s *Service) checkSource(obj manifest.Object) error {
	if s.models == nil {
		return nil
	}
	src, err := modelsource.FromManifest(obj)
	if err != nil {
		return nil
	}
	if err := s.models.Check(src); err != nil {
		msg := err.Error()
		var se *modelsource.SourceError
		if errors.As(err, &se) && se.Err != nil {
			msg = src.String() + ": " + se.Err.Error() // the path names the field
		}
		return manifest.ErrorList{{Path: src.Field, Message: msg}}
	}
	return nil
}

func (s *Service) load(k string) (record, bool, error) {
	var rec record
	var found bool
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		found, err = tx.Get(bucket, k, &rec)
		return err
	})
	return rec, found, err
}

func (rec *record) view() manifest.Object {
	o := rec.obj()
	o.GetMeta().ResourceVersion = rec.resourceVersion()
	return o
}

// resourceVersion is the object's metadata.resourceVersion.
func (rec *record) resourceVersion() string {
	if rec.RV > 0 {
		return strconv.FormatInt(rec.RV, 10)
	}
	return strconv.FormatInt(rec.Version, 10)
}

// rvBucket holds the store-wide resourceVersion counter of the manifests.
const rvBucket = "deployments.resourceversion"

// stamp gives rec the next store-wide resourceVersion, in tx, and writes
// it into the object's metadata. The counter starts above every version a
// record already has.
func stamp(tx *store.Tx, rec *record) error {
	var c struct{ N int64 }
	found, err := tx.Get(rvBucket, "counter", &c)
	if err != nil {
		return err
	}
	if !found {
		err := tx.Each(bucket, func(_ string, raw []byte) error {
			var r record
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			c.N = max(c.N, r.RV, r.Version)
			return nil
		})
		if err != nil {
			return err
		}
	}
	c.N++
	rec.RV = c.N
	rec.obj().GetMeta().ResourceVersion = strconv.FormatInt(c.N, 10)
	return tx.Put(rvBucket, "counter", &c)
}

// Get returns the object with its status; manifest.ErrNotFound when absent.
func (s *Service) Get(_ context.Context, kind, namespace, name string) (manifest.Object, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	if namespace == "" {
		namespace = manifest.DefaultNamespace
	}
	rec, found, err := s.load(key(kind, namespace, name))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
	}
	return rec.view(), nil
}

// List returns every object of kind in namespace ("" = all), sorted by
// namespace and name.
func (s *Service) List(_ context.Context, kind, namespace string) ([]manifest.Object, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	recs, err := s.all()
	if err != nil {
		return nil, err
	}
	var out []manifest.Object
	for _, r := range recs {
		o := r.obj()
		if o.GetKind() != kind || namespace != "" && o.GetMeta().Namespace != namespace {
			continue
		}
		out = append(out, r.view())
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GetMeta(), out[j].GetMeta()
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

func (s *Service) all() ([]record, error) {
	var recs []record
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		recs, err = store.List[record](tx, bucket)
		return err
	})
	return recs, err
}

// Delete starts deleting the object: its state becomes DeletionPending and
// the controller drains and stops its replicas, removes its route and
// SageMaker endpoint, and then the record. Deleting an object already being
// deleted is not an error.
func (s *Service) Delete(ctx context.Context, kind, namespace, name string) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if namespace == "" {
		namespace = manifest.DefaultNamespace
	}
	k := key(kind, namespace, name)
	err := s.store.Update(func(tx *store.Tx) error {
		var rec record
		found, err := tx.Get(bucket, k, &rec)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
		}
		if rec.Deleting {
			return nil
		}
		rec.Deleting = true
		rec.Version++
		st := rec.obj().GetStatus()
		st.State = manifest.StateDeletionPending
		if err := stamp(tx, &rec); err != nil {
			return err
		}
		return tx.Put(bucket, k, &rec)
	})
	if err != nil {
		return err
	}
	s.ctrl.event(k, manifest.EventNormal, "Deleting", "deletion requested")
	s.log.InfoContext(ctx, "manifest deletion requested", "kind", kind, "namespace", namespace, "name", name)
	return nil
}

// Events returns the object's recent events, oldest first.
func (s *Service) Events(_ context.Context, kind, namespace, name string) ([]manifest.Event, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	if namespace == "" {
		namespace = manifest.DefaultNamespace
	}
	k := key(kind, namespace, name)
	_, found, err := s.load(k)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
	}
	return s.ctrl.events(k), nil
}

// InCluster names the objects that run on HyperPod cluster name
// ("Kind namespace/name"), sorted: a cluster is not deleted under them.
func (s *Service) InCluster(name string) ([]string, error) {
	recs, err := s.all()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		o := r.obj()
		m := o.GetMeta()
		c := manifest.ClusterOf(m)
		if c == "" {
			c = cluster.DefaultName
		}
		if c == name {
			out = append(out, fmt.Sprintf("%s %s/%s", o.GetKind(), m.Namespace, m.Name))
		}
	}
	sort.Strings(out)
	return out, nil
}
