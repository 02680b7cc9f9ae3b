package nodeapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

// oneNode is a cluster service with one node.
type oneNode struct{ n hyperpod.Node }

func (o oneNode) Clusters(context.Context) ([]hyperpod.Cluster, error) { return nil, nil }
func (o oneNode) Cluster(context.Context, string) (hyperpod.Cluster, []hyperpod.GroupView, error) {
	return hyperpod.Cluster{}, nil, nil
}
func (o oneNode) Nodes(context.Context, string) ([]hyperpod.Node, error) {
	return []hyperpod.Node{o.n}, nil
}
func (o oneNode) Node(_ context.Context, _, id string) (hyperpod.Node, error) {
	if id != o.n.Name() {
		return hyperpod.Node{}, &hyperpod.NotFoundError{Kind: "node", Name: id}
	}
	return o.n, nil
}
func (o oneNode) FailNode(context.Context, string) (hyperpod.Node, error) { return o.n, nil }
func (o oneNode) Events(context.Context, string, string) ([]hyperpod.Event, error) {
	return nil, nil
}
func (o oneNode) UpdateCluster(context.Context, string, hyperpod.ClusterUpdate) (hyperpod.Cluster, error) {
	return hyperpod.Cluster{}, nil
}
func (o oneNode) SetMetrics(context.Context, string, bool) (hyperpod.Cluster, error) {
	return hyperpod.Cluster{}, nil
}

// TestNodeViewSlices: a node's view carries its GPU partitions and who
// holds each slice, in the list and for one node.
func TestNodeViewSlices(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	pool := cluster.NewPool(clk)
	n := hyperpod.Node{ID: "i-0123456789abcdef0", Cluster: "c", Group: "mig", InstanceType: "ml.p5.48xlarge", Status: hyperpod.NodeRunning, MIGLayout: "mixed-1-3g.40gb-1-4g.40gb"}
	if err := pool.AddNode(cluster.NodeSpec{Name: n.Name(), Cluster: "c", InstanceGroup: "mig", InstanceType: n.InstanceType, GPU: "h100",
		Capacity: cluster.Resources{GPUs: 2, MilliCPU: 8000, MemoryBytes: 64 << 30}, Partitions: [][]string{{"3g.40gb", "4g.40gb"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Place("r1", "c", n.InstanceType, cluster.Resources{MIGProfile: "4g.40gb"}); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Store: openStore(t), Clusters: oneNode{n}, Pool: pool, Catalog: catalog.Default(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	check := func(v NodeView) {
		t.Helper()
		want := []cluster.Slice{{GPU: 0, Profile: "3g.40gb"}, {GPU: 0, Profile: "4g.40gb", ReplicaID: "r1"}}
		if len(v.Partitions) != 1 || len(v.Partitions[0]) != 2 || len(v.Slices) != 2 || v.Slices[0] != want[0] || v.Slices[1] != want[1] ||
			v.MIGLayout != n.MIGLayout {
			t.Fatalf("view %+v", v)
		}
	}
	get := func(path string, into any) {
		t.Helper()
		resp, err := http.Get(srv.URL + CapstanPath + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatal(err)
		}
	}
	var one NodeView
	get("nodes/"+n.Name(), &one)
	check(one)
	var list List[NodeView]
	get("nodes", &list)
	if len(list.Items) != 1 {
		t.Fatalf("items %+v", list.Items)
	}
	check(list.Items[0])
}
