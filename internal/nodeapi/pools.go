package nodeapi

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/autoscale/nodes"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/store"
)

// Kinds and API versions of the node manifests.
const (
	KindNodePool        = "NodePool"
	KindNodeClass       = "HyperpodNodeClass"
	APIVersionNodePool  = "karpenter.sh/v1"
	APIVersionNodeClass = "karpenter.sagemaker.amazonaws.com/v1"
)

// Limits: how many of each kind may exist.
const maxObjects = 100

var buckets = map[string]string{KindNodePool: "nodepool", KindNodeClass: "nodeclass"}

// record is a stored NodePool (Pool set) or HyperpodNodeClass (Class set):
// what was applied, parsed.
type record struct {
	Pool       *nodes.NodePool  `json:"pool,omitempty"`
	Class      *nodes.NodeClass `json:"class,omitempty"`
	Warnings   []string         `json:"warnings,omitempty"`
	Manifest   string           `json:"manifest"`
	Generation int64            `json:"generation"`
	Created    time.Time        `json:"created"`
	// The Kubernetes metadata the server keeps beside the manifest (absent
	// from records written before kubectl could write these kinds: their
	// uid is derived, their resourceVersion is their generation).
	UID             string                      `json:"uid,omitempty"`
	ResourceVersion int64                       `json:"resourceVersion,omitempty"`
	ManagedFields   []metav1.ManagedFieldsEntry `json:"managedFields,omitempty"`
	Updated         time.Time                   `json:"updated,omitzero"`
}

// resourceVersion is the record's metadata.resourceVersion.
func (r *record) resourceVersion() int64 { return max(r.ResourceVersion, r.Generation) }

func (r *record) kind() string {
	if r.Pool != nil {
		return KindNodePool
	}
	return KindNodeClass
}

func (r *record) name() string {
	if r.Pool != nil {
		return r.Pool.Name
	}
	return r.Class.Name
}

// Pools is the NodePools the node autoscaler works with: every stored pool
// with its node class's instance groups, in the default cluster when it
// names none. A pool whose class is missing offers no groups and so
// provisions nothing (`capstan get nodepools` shows it not ready).
func Pools(st *store.Store) ([]nodes.NodePool, error) {
	var out []nodes.NodePool
	err := st.View(func(tx *store.Tx) error {
		ps, err := store.List[record](tx, buckets[KindNodePool])
		if err != nil {
			return err
		}
		for _, p := range ps {
			np := *p.Pool
			if np.Cluster == "" {
				np.Cluster = cluster.DefaultName
			}
			var c record
			found, err := tx.Get(buckets[KindNodeClass], np.NodeClass, &c)
			if err != nil {
				return err
			}
			np.InstanceGroups = []string{missingClassGroup}
			if found {
				np.InstanceGroups = slices.Clone(c.Class.InstanceGroups)
			}
			out = append(out, np)
		}
		return nil
	})
	return out, err
}

// missingClassGroup matches no instance group (group names never hold a
// space).
const missingClassGroup = "(missing nodeclass)"

// applied is the result of applying one document.
type applied struct {
	Kind     string   `json:"kind"`
	Name     string   `json:"name"`
	Action   string   `json:"action"` // created | configured | unchanged
	Warnings []string `json:"warnings,omitempty"`
}

// apply parses every document and stores them all or none; track, when
// set, records each one's field manager.
func apply(st *store.Store, now time.Time, docs []string, track func(*record) error) ([]applied, error) {
	recs := make([]*record, 0, len(docs))
	var errs []error
	for i, d := range docs {
		r, err := parseRecord(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d%s: %w", i+1, kindLabel(d), err))
			continue
		}
		recs = append(recs, r)
	}
	if len(errs) > 0 {
		return nil, &invalidError{errors.Join(errs...)}
	}
	if track != nil {
		for _, r := range recs {
			if err := track(r); err != nil {
				return nil, err
			}
		}
	}
	var out []applied
	err := st.Update(func(tx *store.Tx) error {
		out = out[:0]
		for _, r := range recs {
			action, err := put(tx, now, r, manifest.Preconditions{})
			if err != nil {
				return err
			}
			out = append(out, applied{Kind: r.kind(), Name: r.name(), Action: action, Warnings: r.Warnings})
		}
		return nil
	})
	return out, err
}

// parseRecord parses one document into the record that stores it.
func parseRecord(doc string) (*record, error) {
	kind, err := kindOf([]byte(doc))
	if err != nil {
		return nil, err
	}
	r := &record{Manifest: doc}
	switch kind {
	case KindNodePool:
		np, warn, err := nodes.ParseNodePool([]byte(doc))
		if err != nil {
			return nil, err
		}
		r.Pool, r.Warnings = &np, warn
	case KindNodeClass:
		nc, warn, err := nodes.ParseNodeClass([]byte(doc))
		if err != nil {
			return nil, err
		}
		r.Class, r.Warnings = &nc, warn
	}
	return r, nil
}

// kindLabel is " (Kind)" for a document of a kind this API takes, for
// errors about it.
func kindLabel(doc string) string {
	if kind, err := kindOf([]byte(doc)); err == nil {
		return " (" + kind + ")"
	}
	return ""
}

// put stores r under Kubernetes' preconditions pre: unchanged when what is
// stored has the same spec, labels, annotations and field managers,
// configured when it differs, created (within maxObjects) when there is
// none. A write without managedFields (capstan apply) keeps the stored ones.
func put(tx *store.Tx, now time.Time, r *record, pre manifest.Preconditions) (string, error) {
	bucket := buckets[r.kind()]
	var old record
	found, err := tx.Get(bucket, r.name(), &old)
	if err != nil {
		return "", err
	}
	key := r.kind() + " " + r.name()
	switch {
	case found && pre.Create:
		return "", fmt.Errorf("%s: %w", key, manifest.ErrAlreadyExists)
	case !found && pre.ResourceVersion != "":
		return "", fmt.Errorf("%s: %w", key, manifest.ErrNotFound)
	case found && pre.ResourceVersion != "" && strconv.FormatInt(old.resourceVersion(), 10) != pre.ResourceVersion:
		return "", fmt.Errorf("%s: %w", key, manifest.ErrConflict)
	}
	r.Updated = now
	if found {
		if r.ManagedFields == nil {
			r.ManagedFields = old.ManagedFields
		}
		if sameContent(old.Manifest, r.Manifest) && (len(old.ManagedFields) == 0 && len(r.ManagedFields) == 0 || reflect.DeepEqual(old.ManagedFields, r.ManagedFields)) {
			r.Generation = old.Generation
			return manifest.ActionUnchanged, nil
		}
		r.UID, r.Created = old.UID, old.Created
		r.Generation, r.ResourceVersion = old.Generation, old.resourceVersion()+1
		if !sameSpec(old.Manifest, r.Manifest) {
			r.Generation++ // as in Kubernetes: metadata alone keeps the generation
		}
		return manifest.ActionConfigured, tx.Put(bucket, r.name(), r)
	}
	n := 0
	if err := tx.Each(bucket, func(string, []byte) error { n++; return nil }); err != nil {
		return "", err
	}
	if n >= maxObjects {
		return "", &invalidError{fmt.Errorf("%s %s: at most %d %s objects may exist", r.kind(), r.name(), maxObjects, r.kind())}
	}
	r.UID, r.Created, r.Generation, r.ResourceVersion = uuid.NewString(), now, 1, 1
	return manifest.ActionCreated, tx.Put(bucket, r.name(), r)
}

// sameContent reports whether two manifests have the same spec, labels and
// annotations, however they are written.
func sameContent(a, b string) bool {
	ca, okA := contentOf(a)
	cb, okB := contentOf(b)
	return okA && okB && reflect.DeepEqual(ca, cb)
}

// sameSpec reports whether two manifests have the same spec.
func sameSpec(a, b string) bool {
	ca, okA := contentOf(a)
	cb, okB := contentOf(b)
	return okA && okB && reflect.DeepEqual(ca.Spec, cb.Spec)
}

// content is what a manifest says, beside its identity.
type content struct {
	Labels, Annotations map[string]string
	Spec                any
}

func contentOf(doc string) (content, bool) {
	var m struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return content{}, false
	}
	c := content{Spec: m.Spec}
	if len(m.Metadata.Labels) > 0 {
		c.Labels = m.Metadata.Labels
	}
	if len(m.Metadata.Annotations) > 0 {
		c.Annotations = m.Metadata.Annotations
	}
	return c, true
}

// kindOf reads a document's apiVersion and kind and checks they go together.
func kindOf(doc []byte) (string, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", err
	}
	switch {
	case tm.Kind == KindNodePool && tm.APIVersion == APIVersionNodePool:
	case tm.Kind == KindNodeClass && tm.APIVersion == APIVersionNodeClass:
	default:
		return "", fmt.Errorf("apiVersion %q kind %q: this API takes %s %s and %s %s", tm.APIVersion, tm.Kind,
			APIVersionNodePool, KindNodePool, APIVersionNodeClass, KindNodeClass)
	}
	return tm.Kind, nil
}

// IsNodeDocument reports whether a manifest document is for this API (the
// CLI sends those here and the rest to the manifests API).
func IsNodeDocument(doc []byte) bool {
	var tm struct {
		APIVersion string `json:"apiVersion"`
	}
	if yaml.Unmarshal(doc, &tm) != nil {
		return false
	}
	return strings.HasPrefix(tm.APIVersion, "karpenter.sh/") || strings.HasPrefix(tm.APIVersion, "karpenter.sagemaker.amazonaws.com/")
}

// invalidError is input this API refuses (422).
type invalidError struct{ err error }

func (e *invalidError) Error() string { return e.err.Error() }
func (e *invalidError) Unwrap() error { return e.err }
