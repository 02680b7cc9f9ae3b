package nodeapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/autoscale/nodes"
	"github.com/capstan-dev/capstan/internal/cluster"
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
}

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

// apply parses every document and stores them all or none.
func apply(st *store.Store, now time.Time, docs []string) ([]applied, error) {
	recs := make([]*record, 0, len(docs))
	var errs []error
	for i, d := range docs {
		kind, err := kindOf([]byte(d))
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i+1, err))
			continue
		}
		r := &record{Manifest: d}
		switch kind {
		case KindNodePool:
			np, warn, err := nodes.ParseNodePool([]byte(d))
			if err != nil {
				errs = append(errs, fmt.Errorf("document %d (NodePool): %w", i+1, err))
				continue
			}
			r.Pool, r.Warnings = &np, warn
		case KindNodeClass:
			nc, warn, err := nodes.ParseNodeClass([]byte(d))
			if err != nil {
				errs = append(errs, fmt.Errorf("document %d (HyperpodNodeClass): %w", i+1, err))
				continue
			}
			r.Class, r.Warnings = &nc, warn
		}
		recs = append(recs, r)
	}
	if len(errs) > 0 {
		return nil, &invalidError{errors.Join(errs...)}
	}
	var out []applied
	err := st.Update(func(tx *store.Tx) error {
		out = out[:0]
		for _, r := range recs {
			action, err := put(tx, now, r)
			if err != nil {
				return err
			}
			out = append(out, applied{Kind: r.kind(), Name: r.name(), Action: action, Warnings: r.Warnings})
		}
		return nil
	})
	return out, err
}

// put stores r: unchanged when the same manifest is stored, configured when
// another is, created (within maxObjects) when none is.
func put(tx *store.Tx, now time.Time, r *record) (string, error) {
	bucket := buckets[r.kind()]
	var old record
	found, err := tx.Get(bucket, r.name(), &old)
	if err != nil {
		return "", err
	}
	if found && old.Manifest == r.Manifest {
		return "unchanged", nil
	}
	action := "configured"
	r.Created, r.Generation = old.Created, old.Generation+1
	if !found {
		n := 0
		if err := tx.Each(bucket, func(string, []byte) error { n++; return nil }); err != nil {
			return "", err
		}
		if n >= maxObjects {
			return "", &invalidError{fmt.Errorf("%s %s: at most %d %s objects may exist", r.kind(), r.name(), maxObjects, r.kind())}
		}
		action, r.Created = "created", now
	}
	return action, tx.Put(bucket, r.name(), r)
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
