package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/server"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// nodesEnv is a whole capstan server (server.Start, as capstan serve runs
// it, on the fake runtime) whose default cluster has one ml.g5.8xlarge
// node, and a way to run CLI commands against it.
type nodesEnv struct {
	srv *server.Server
	url string
}

func newNodesEnv(t *testing.T) *nodesEnv {
	t.Helper()
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"), DevClock: true,
		Cluster: config.Cluster{InstanceGroups: []config.InstanceGroup{{Name: "g5", InstanceType: "ml.g5.8xlarge", Count: 1}},
			Spot: config.Spot{MeanTimeToInterruption: config.Duration{Duration: -time.Second}}}}
	cfg.Default()
	rt := fake.New()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Start(ctx, server.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Runtime:    func(clock.Clock, *slog.Logger, string) (runtime.Runtime, error) { return rt, nil },
		RuntimeAPI: server.RuntimeAPI(cfg), Resync: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Stop(context.Background()) })
	return &nodesEnv{srv: srv, url: "http://" + srv.Addr}
}

// run executes one command line with the commands that touch nodes.
func (e *nodesEnv) run(args ...string) (string, string, error) {
	g := &globalOptions{}
	root := &cobra.Command{Use: "capstan", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVar(&g.server, "server", "", "")
	for _, mk := range []func(*manifestsOptions) *cobra.Command{applyCommand, getCommand, describeCommand, deleteCommand, nodeCommand} {
		root.AddCommand(mk(newManifestsOptions(g, e.srv.Clock)))
	}
	var out, errb bytes.Buffer
	root.SetArgs(append([]string{"--server", e.url}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func (e *nodesEnv) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := e.run(args...)
	if err != nil {
		t.Fatalf("capstan %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// rows splits a table into its header's and rows' columns (split on runs
// of 2+ spaces, as tabwriter pads with 3).
func rows(table string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
		out = append(out, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1))
	}
	return out
}

// defaultNode waits until the default cluster's node is Running and
// returns its name.
func (e *nodesEnv) defaultNode(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var l struct {
			Items []struct{ Name, Status string }
		}
		if err := json.Unmarshal([]byte(e.mustRun(t, "get", "nodes", "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 1 && l.Items[0].Status == "Running" {
			return l.Items[0].Name
		}
		if time.Now().After(deadline) {
			t.Fatalf("default node not Running: %+v", l.Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var reAge = regexp.MustCompile(`^(\d+[smhd])+$`)

func TestGetNodesAndClusters(t *testing.T) {
	e := newNodesEnv(t)
	node := e.defaultNode(t)
	tests := []struct {
		name   string
		args   []string
		header []string
		row    []string // every column but AGE
	}{
		{"nodes", []string{"get", "nodes"},
			[]string{"NAME", "CLUSTER", "GROUP", "INSTANCE TYPE", "CAPACITY", "STATUS", "GPUS", "REPLICAS", "PRICE/H", "AGE"},
			[]string{node, "ml-cluster", "g5", "ml.g5.8xlarge", "on-demand", "Running", "0/1", "0"}},
		{"nodes of a cluster", []string{"get", "no", "--cluster", "ml-cluster"}, nil, []string{node, "ml-cluster", "g5"}},
		{"one node", []string{"get", "node", node}, nil, []string{node, "ml-cluster", "g5"}},
		{"clusters", []string{"get", "clusters"},
			[]string{"NAME", "STATUS", "NODES", "GROUPS", "AUTOSCALING", "NODE RECOVERY", "AGE"},
			[]string{"ml-cluster", "InService", "1/1", "g5(on-demand 1/1)", "Disabled", "Automatic"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rows(e.mustRun(t, tc.args...))
			if len(r) != 2 {
				t.Fatalf("want a header and one row: %q", r)
			}
			if tc.header != nil && strings.Join(r[0], "|") != strings.Join(tc.header, "|") {
				t.Errorf("header %q, want %q", r[0], tc.header)
			}
			if len(r[1]) != len(r[0]) || !reAge.MatchString(r[1][len(r[1])-1]) {
				t.Errorf("row %q does not fill the header %q with an age last", r[1], r[0])
			}
			for i, want := range tc.row {
				if i >= len(r[1]) || r[1][i] != want {
					t.Errorf("column %s = %q, want %q (row %q)", r[0][min(i, len(r[0])-1)], r[1], want, r[1])
					break
				}
			}
		})
	}
	t.Run("price column", func(t *testing.T) {
		r := rows(e.mustRun(t, "get", "nodes"))
		if !regexp.MustCompile(`^\$\d+\.\d\d$`).MatchString(r[1][8]) || r[1][8] == "$0.00" {
			t.Errorf("PRICE/H %q", r[1][8])
		}
	})
	t.Run("get cluster NAME is refused", func(t *testing.T) {
		_, _, err := e.run("get", "cluster", "ml-cluster")
		if err == nil || !strings.Contains(err.Error(), "describe-cluster") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unknown node", func(t *testing.T) {
		_, _, err := e.run("get", "node", "hyperpod-i-0123456789abcdef0")
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestDescribeAndFailNode(t *testing.T) {
	e := newNodesEnv(t)
	node := e.defaultNode(t)
	out := e.mustRun(t, "describe", "node", node)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Name:\s+` + node + `$`),
		regexp.MustCompile(`(?m)^Instance ID:\s+` + strings.TrimPrefix(node, "hyperpod-") + `$`),
		regexp.MustCompile(`(?m)^Cluster:\s+ml-cluster$`),
		regexp.MustCompile(`(?m)^Instance Group:\s+g5$`),
		regexp.MustCompile(`(?m)^Instance Type:\s+ml.g5.8xlarge$`),
		regexp.MustCompile(`(?m)^Capacity Type:\s+on-demand$`),
		regexp.MustCompile(`(?m)^Status:\s+Running`),
		regexp.MustCompile(`(?m)^Price:\s+\$\d+\.\d{4}/hour$`),
		regexp.MustCompile(`(?m)^Why:\s+\S`),
		regexp.MustCompile(`(?m)^Capacity:\s+gpu=1 `),
		regexp.MustCompile(`(?m)^Replicas:\s+<none>$`),
		regexp.MustCompile(`(?m)^Events:$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("describe node lacks %s:\n%s", want, out)
		}
	}

	// With NodeRecovery None the failed node stays (Automatic would
	// replace it within a resync), so what describe shows is stable.
	smc := sm.New(sm.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	if _, err := smc.UpdateCluster(context.Background(), &sm.UpdateClusterInput{ClusterName: aws.String("ml-cluster"),
		NodeRecovery: smtypes.ClusterNodeRecoveryNone}); err != nil {
		t.Fatal(err)
	}
	if got := e.mustRun(t, "node", "fail", node); got != "node/"+node+" failed (cluster ml-cluster, status Failure)\n" {
		t.Fatalf("node fail: %q", got)
	}
	out = e.mustRun(t, "describe", "node", node)
	if !regexp.MustCompile(`(?m)^Status:\s+Failure \(failed its health check\)$`).MatchString(out) || !strings.Contains(out, "NodeFailed") {
		t.Errorf("describe after fail:\n%s", out)
	}
	tests := []struct {
		name, arg, want string
	}{
		{"twice", node, "Failure"},
		{"unknown", "hyperpod-i-0123456789abcdef0", "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.run("node", "fail", tc.arg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestApplyNodeDocuments(t *testing.T) {
	e := newNodesEnv(t)
	out, errOut, err := e.run("apply", "-f", filepath.Join("testdata", "nodes-mixed.yaml"))
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, errOut)
	}
	for _, want := range []string{
		"hyperpodnodeclass.karpenter.sagemaker.amazonaws.com/g5-groups created\n",
		"nodepool.karpenter.sh/g5-pool created\n",
		"jumpstartmodel.inference.sagemaker.aws.amazon.com/mixed-jsm created\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"Warning: NodePool g5-pool: ", "topology.kubernetes.io/zone has no effect", "expireAfter",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("apply warnings lack %q:\n%s", want, errOut)
		}
	}

	t.Run("get nodepools", func(t *testing.T) {
		r := rows(e.mustRun(t, "get", "nodepools"))
		want := [][]string{{"NAME", "CLUSTER", "NODECLASS", "NODES", "READY", "CONSOLIDATION", "LIMITS", "AGE"},
			{"g5-pool", "ml-cluster", "g5-groups", "1", "true", "WhenEmpty after 30s", "nodes=3,gpus=8"}}
		if len(r) != 2 || strings.Join(r[0], "|") != strings.Join(want[0], "|") ||
			strings.Join(r[1][:len(r[1])-1], "|") != strings.Join(want[1], "|") || !reAge.MatchString(r[1][len(r[1])-1]) {
			t.Fatalf("got %q\nwant %q and an age", r, want)
		}
	})
	t.Run("get hyperpodnodeclasses", func(t *testing.T) {
		r := rows(e.mustRun(t, "get", "nodeclasses"))
		if len(r) != 2 || strings.Join(r[0], "|") != "NAME|INSTANCE GROUPS|NODES|AGE" || r[1][0] != "g5-groups" || r[1][1] != "g5" {
			t.Fatalf("got %q", r)
		}
	})
	t.Run("reapply unchanged", func(t *testing.T) {
		out := e.mustRun(t, "apply", "-f", filepath.Join("testdata", "nodes-mixed.yaml"))
		if !strings.Contains(out, "nodepool.karpenter.sh/g5-pool unchanged\n") {
			t.Fatalf("reapply: %q", out)
		}
	})

	// capstan delete takes the node kinds by name and from files.
	t.Run("delete nodepool", func(t *testing.T) {
		if out := e.mustRun(t, "delete", "nodepool", "g5-pool"); out != "nodepool.karpenter.sh \"g5-pool\" deleted\n" {
			t.Fatalf("delete nodepool: %q", out)
		}
		if _, _, err := e.run("delete", "nodepool", "g5-pool"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("deleting it again: %v", err)
		}
		out, errOut, err := e.run("get", "nodepools")
		if err != nil || out != "" || errOut != "No resources found\n" {
			t.Fatalf("get after delete: %q %q %v", out, errOut, err)
		}
		if _, _, err := e.run("get", "nodepool", "g5-pool"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("get the deleted pool: %v", err)
		}
	})

	bad := []struct {
		name, doc, want string
	}{
		{"bad consolidation policy", `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad}
spec:
  template: {spec: {nodeClassRef: {group: karpenter.sagemaker.amazonaws.com, kind: HyperpodNodeClass, name: g5-groups}}}
  disruption: {consolidationPolicy: Sometimes}
`, "consolidationPolicy"},
		{"unknown capacity type", `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.sagemaker.amazonaws.com, kind: HyperpodNodeClass, name: g5-groups}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [cheap]}]
`, "values[0]"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(f, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := e.run("apply", "-f", f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
			if _, _, err := e.run("get", "nodepool", "bad"); err == nil {
				t.Fatal("a refused NodePool was stored")
			}
		})
	}

	t.Run("delete -f the mixed file", func(t *testing.T) {
		out := e.mustRun(t, "delete", "-f", filepath.Join("testdata", "nodes-mixed.yaml"), "--ignore-not-found")
		for _, want := range []string{`hyperpodnodeclass.karpenter.sagemaker.amazonaws.com "g5-groups" deleted`,
			`jumpstartmodel.inference.sagemaker.aws.amazon.com "`} {
			if !strings.Contains(out, want) {
				t.Fatalf("delete -f printed %q, want %q", out, want)
			}
		}
		if _, _, err := e.run("get", "hyperpodnodeclass", "g5-groups"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("the class is still there: %v", err)
		}
	})
}
