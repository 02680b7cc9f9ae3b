package nodeapi

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/operator"
)

// TestOperatorNodePoolsApply applies what `capstan operator nodepools`
// prints: every document is accepted, and each pool grows exactly its
// group, in its cluster, within its limits.
func TestOperatorNodePoolsApply(t *testing.T) {
	c, err := operator.ParseNodePoolCluster([]byte(`name: ml
groups:
  - {name: a10g, instanceType: ml.g5.12xlarge, count: 1, maxCount: 4}
  - {name: h200, instanceType: ml.p5en.48xlarge, count: 2, migLayout: all-4g.71gb, spot: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := operator.WriteNodePools(&b, c, catalog.Default()); err != nil {
		t.Fatal(err)
	}
	var docs []string
	for d := range strings.SplitSeq(b.String(), "---\n") {
		if strings.TrimSpace(d) != "" {
			if !IsNodeDocument([]byte(d)) {
				t.Errorf("not a node document:\n%s", d)
			}
			docs = append(docs, d)
		}
	}
	st := openStore(t)
	res, err := apply(st, time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), docs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Kind+"/"+r.Name+" "+r.Action)
	}
	want := []string{"HyperpodNodeClass/ml-a10g created", "NodePool/ml-a10g created", "HyperpodNodeClass/ml-h200 created", "NodePool/ml-h200 created"}
	if !slices.Equal(got, want) {
		t.Errorf("apply = %v, want %v", got, want)
	}
	pools, err := Pools(st)
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		groups      string
		nodes, gpus int
	}
	seen := map[string]view{}
	for _, p := range pools {
		if p.Cluster != "ml" {
			t.Errorf("pool %s in cluster %q, want ml", p.Name, p.Cluster)
		}
		seen[p.Name] = view{strings.Join(p.InstanceGroups, ","), p.Limits.Nodes, p.Limits.GPUs}
	}
	if seen["ml-a10g"] != (view{"a10g", 4, 16}) || seen["ml-h200"] != (view{"h200", 2, 16}) {
		t.Errorf("pools = %+v", seen)
	}
}
