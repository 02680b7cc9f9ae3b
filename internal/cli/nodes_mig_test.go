package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/nodeapi"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/server"
)

func TestGPUText(t *testing.T) {
	whole := nodeapi.NodeView{Capacity: cluster.Resources{GPUs: 8}, Allocated: cluster.Resources{GPUs: 3}}
	// Two GPUs of three split: GPU 0 with two held slices, GPU 1 all free.
	mig := nodeapi.NodeView{Node: hyperpod.Node{MIGLayout: "mixed-2-1g.10gb-1-3g.40gb"}, Capacity: cluster.Resources{GPUs: 3},
		Allocated: cluster.Resources{GPUs: 1}, Slices: []cluster.Slice{
			{GPU: 0, Profile: "1g.10gb", ReplicaID: "default/small-0"}, {GPU: 0, Profile: "1g.10gb"}, {GPU: 0, Profile: "3g.40gb", ReplicaID: "default/mid-0"},
			{GPU: 1, Profile: "1g.10gb"}, {GPU: 1, Profile: "1g.10gb"}, {GPU: 1, Profile: "3g.40gb"},
		}}
	tests := []struct {
		name   string
		n      nodeapi.NodeView
		column string
		gpus   string
	}{
		{"whole", whole, "3/8", "GPUs:\n  MIG layout: none (whole GPUs)\n  8 whole, 3 allocated\n"},
		{"no GPUs", nodeapi.NodeView{}, "0/0", "GPUs:\n  MIG layout: none (whole GPUs)\n  <none>\n"},
		{"MIG", mig, "1/3 (6 MIG slices: 2 used)", `GPUs:
  MIG layout: mixed-2-1g.10gb-1-3g.40gb
  GPU  SLICE        HOLDER
  0    1g.10gb      default/small-0
       3g.40gb      default/mid-0
       1g.10gb      <free>
  1    2 × 1g.10gb  <free>
       3g.40gb      <free>
  2    whole        -
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := gpuColumn(tc.n); got != tc.column {
				t.Errorf("GPUS column %q, want %q", got, tc.column)
			}
			var b bytes.Buffer
			writeGPUs(&b, tc.n)
			if b.String() != tc.gpus {
				t.Errorf("GPUs section\n%s\nwant\n%s", b.String(), tc.gpus)
			}
		})
	}
}

// TestMIGNodeFromConfig: a configured p5 group with migLayout seeds a node
// whose 8 GPUs are split seven ways; get nodes and describe node show it.
func TestMIGNodeFromConfig(t *testing.T) {
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"), DevClock: true,
		Cluster: config.Cluster{InstanceGroups: []config.InstanceGroup{{Name: "mig", InstanceType: "ml.p5.48xlarge", Count: 1, MIGLayout: "all-1g.10gb"}}}}
	cfg.Default()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Start(ctx, server.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Runtime:    func(clock.Clock, *slog.Logger, string) (runtime.Runtime, error) { return fake.New(), nil },
		RuntimeAPI: server.RuntimeAPI(cfg), Resync: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Stop(context.Background()) })
	e := &nodesEnv{srv: srv, url: "http://" + srv.Addr}
	node := e.defaultNode(t)
	r := rows(e.mustRun(t, "get", "nodes"))
	if len(r) != 2 || r[1][6] != "0/8 (56 MIG slices: 0 used)" {
		t.Fatalf("get nodes: %q", r)
	}
	out := e.mustRun(t, "describe", "node", node)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^GPUs:\n  MIG layout: all-1g.10gb\n  GPU\s+SLICE\s+HOLDER$`),
		regexp.MustCompile(`(?m)^  0\s+7 × 1g.10gb\s+<free>$`),
		regexp.MustCompile(`(?m)^  7\s+7 × 1g.10gb\s+<free>$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("describe node lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "whole") {
		t.Errorf("a GPU shows whole:\n%s", out)
	}
}
