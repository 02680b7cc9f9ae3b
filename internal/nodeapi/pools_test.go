package nodeapi

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/store"
)

const (
	nodeClass = `apiVersion: karpenter.sagemaker.amazonaws.com/v1
kind: HyperpodNodeClass
metadata: {name: groups}
spec:
  instanceGroups: [a, b]
`
	nodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: np}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.sagemaker.amazonaws.com, kind: HyperpodNodeClass, name: groups}
  disruption: {consolidateAfter: 30s}
`
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "capstan.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestApplyAndPools(t *testing.T) {
	st := openStore(t)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	actions := func(docs ...string) []string {
		t.Helper()
		res, err := apply(st, now, docs, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res {
			out = append(out, r.Kind+"/"+r.Name+" "+r.Action)
		}
		return out
	}
	// A pool before its class: stored, and it offers no group.
	if got := actions(nodePool); !slices.Equal(got, []string{"NodePool/np created"}) {
		t.Fatalf("apply = %v", got)
	}
	ps, err := Pools(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Cluster != cluster.DefaultName || !slices.Equal(ps[0].InstanceGroups, []string{missingClassGroup}) {
		t.Fatalf("pools without the class: %+v", ps)
	}
	if got := actions(nodeClass, nodePool); !slices.Equal(got, []string{"HyperpodNodeClass/groups created", "NodePool/np unchanged"}) {
		t.Fatalf("apply = %v", got)
	}
	ps, _ = Pools(st)
	if len(ps) != 1 || !slices.Equal(ps[0].InstanceGroups, []string{"a", "b"}) || ps[0].Disruption.ConsolidateAfter != 30*time.Second {
		t.Fatalf("pools: %+v", ps)
	}
	changed := strings.Replace(nodePool, "30s", "1m", 1)
	if got := actions(changed); !slices.Equal(got, []string{"NodePool/np configured"}) {
		t.Fatalf("apply changed = %v", got)
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	st := openStore(t)
	bad := strings.Replace(nodePool, "consolidateAfter: 30s", "consolidateAfter: soon", 1)
	tests := []struct {
		name string
		docs []string
		want string
	}{
		{"bad field", []string{nodeClass, bad}, "consolidateAfter"},
		{"wrong kind", []string{nodeClass, "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: x}\n"}, `kind "NodeClaim"`},
		{"kind of another API", []string{"apiVersion: inference.sagemaker.aws.amazon.com/v1\nkind: JumpStartModel\nmetadata: {name: x}\n"}, "this API takes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := apply(st, time.Now(), tc.docs, nil)
			var inv *invalidError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("apply: %v, want an invalid error naming %q", err, tc.want)
			}
			ps, err := Pools(st)
			if err != nil || len(ps) != 0 {
				t.Fatalf("a refused apply stored %+v (%v)", ps, err)
			}
			if err := st.View(func(tx *store.Tx) error {
				if tx.Exists(buckets[KindNodeClass], "groups") {
					return errors.New("the valid class of a refused apply was stored")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestIsNodeDocument(t *testing.T) {
	for doc, want := range map[string]bool{
		nodePool:  true,
		nodeClass: true,
		"apiVersion: inference.sagemaker.aws.amazon.com/v1\nkind: JumpStartModel\n": false,
		"not: [yaml": false,
	} {
		if got := IsNodeDocument([]byte(doc)); got != want {
			t.Errorf("IsNodeDocument(%q) = %v, want %v", doc, got, want)
		}
	}
}

// TestPutVersions: a spec change bumps the generation, a label or a field
// manager alone only the resourceVersion; the same content however written
// is unchanged; a write without managedFields keeps the stored ones; and
// the preconditions of Kubernetes' writes hold.
func TestPutVersions(t *testing.T) {
	st := openStore(t)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	type want struct {
		action         string
		generation, rv int64
		managers       int
	}
	write := func(doc string, managed []metav1.ManagedFieldsEntry, pre manifest.Preconditions) (want, error) {
		r, err := parseRecord(doc)
		if err != nil {
			t.Fatal(err)
		}
		r.ManagedFields = managed
		var action string
		err = st.Update(func(tx *store.Tx) error {
			var err error
			action, err = put(tx, now, r, pre)
			return err
		})
		var stored record
		_ = st.View(func(tx *store.Tx) error { _, err := tx.Get(buckets[KindNodePool], "np", &stored); return err })
		return want{action, stored.Generation, stored.resourceVersion(), len(stored.ManagedFields)}, err
	}
	labelled := strings.Replace(nodePool, "metadata: {name: np}", "metadata: {name: np, labels: {team: a}}", 1)
	asJSON := `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"np","labels":{"team":"a"}},"spec":{"template":{"spec":{"nodeClassRef":{"group":"karpenter.sagemaker.amazonaws.com","kind":"HyperpodNodeClass","name":"groups"}}},"disruption":{"consolidateAfter":"30s"}}}`
	manager := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	for _, step := range []struct {
		name    string
		doc     string
		managed []metav1.ManagedFieldsEntry
		pre     manifest.Preconditions
		want    want
		err     error
	}{
		{"create", nodePool, nil, manifest.Preconditions{Create: true}, want{"created", 1, 1, 0}, nil},
		{"create again", nodePool, nil, manifest.Preconditions{Create: true}, want{"", 1, 1, 0}, manifest.ErrAlreadyExists},
		{"a label", labelled, nil, manifest.Preconditions{}, want{"configured", 1, 2, 0}, nil},
		{"the same, as JSON", asJSON, nil, manifest.Preconditions{}, want{"unchanged", 1, 2, 0}, nil},
		{"a field manager", asJSON, manager, manifest.Preconditions{ResourceVersion: "2"}, want{"configured", 1, 3, 1}, nil},
		{"a stale update", asJSON, manager, manifest.Preconditions{ResourceVersion: "2"}, want{"", 1, 3, 1}, manifest.ErrConflict},
		{"a spec change without managers keeps them", strings.Replace(labelled, "30s", "60s", 1), nil, manifest.Preconditions{}, want{"configured", 2, 4, 1}, nil},
	} {
		got, err := write(step.doc, step.managed, step.pre)
		if !errors.Is(err, step.err) || (err == nil && got != step.want) || (err != nil && (got.generation != step.want.generation || got.rv != step.want.rv)) {
			t.Fatalf("%s: %+v, %v; want %+v, %v", step.name, got, err, step.want, step.err)
		}
	}
}
