//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// nodeLaunch is the configured launch time: long enough to kill the server
// while nodes are Pending, short enough to wait for a few launches.
const nodeLaunch = 20 * time.Second

const (
	nodeCluster = "chaos-nodes"
	nodeGroup   = "workers"
	nodeType    = smtypes.ClusterInstanceTypeMlG5Xlarge
	nodeRole    = "arn:aws:iam::000000000000:role/hyperpod-exec"
)

// TestNodeScaleUpResumesAfterKill: `capstan serve` killed with SIGKILL while
// a HyperPod group's new nodes are Pending (after UpdateCluster, after
// BatchAddClusterNodes, and killed for longer than a launch) comes back with
// exactly the nodes it had launched, all Running: none leaked, none launched
// twice. Scaling down afterwards removes exactly the extra nodes, and a kill
// while nodes are ShuttingDown (draining replicas) still ends at the lower
// count with no node left behind.
func TestNodeScaleUpResumesAfterKill(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "capstan.yaml")
	yaml := fmt.Sprintf("cluster:\n  launchTime: %s\n  drainTimeout: 1m\n  spot: {meanTimeToInterruption: -1s}\n", nodeLaunch)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, capstanBinary(t), dir)
	srv.args = []string{"--config", cfg}
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	c := newClients(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	restart := func() {
		t.Helper()
		srv.kill()
		must("restart", srv.start())
	}

	_, err := c.sm.CreateCluster(ctx, &sm.CreateClusterInput{ClusterName: aws.String(nodeCluster),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String(nodeGroup),
			InstanceType: nodeType, InstanceCount: aws.Int32(0), ExecutionRole: aws.String(nodeRole)}}}, c.at())
	must("CreateCluster", err)
	waitNodesSettled(ctx, t, c, nil, time.Minute)

	// Each step raises the target, checks that the new nodes are Pending,
	// kills the server at a point of their launch and restarts it on the
	// same data dir (after down, for the last one: longer than a launch).
	type step struct {
		name        string
		add         int32
		batch       bool          // BatchAddClusterNodes; else UpdateCluster to the new count
		killAfter   time.Duration // after the scale-up is acknowledged
		down        time.Duration // how long the server stays dead
		pendingKill int           // Pending nodes seen just before the kill
		settle      time.Duration
	}
	steps := []*step{
		{name: "UpdateCluster 0→3, kill at once", add: 3},
		{name: "BatchAddClusterNodes +2, kill mid-launch", add: 2, batch: true, killAfter: nodeLaunch / 2},
		{name: "UpdateCluster 5→6, dead for longer than a launch", add: 1, killAfter: nodeLaunch / 4, down: nodeLaunch + 2*time.Second},
	}
	var before []string // instance ids acknowledged so far, every one must survive
	var firstIDs []string
	target := int32(0)
	for _, s := range steps {
		target += s.add
		if s.batch {
			_, err = c.sm.BatchAddClusterNodes(ctx, &sm.BatchAddClusterNodesInput{ClusterName: aws.String(nodeCluster),
				NodesToAdd: []smtypes.AddClusterNodeSpecification{{InstanceGroupName: aws.String(nodeGroup), IncrementTargetCountBy: aws.Int32(s.add)}}}, c.at())
			must(s.name, err)
		} else {
			must(s.name, updateGroupCount(ctx, c, target))
		}
		acked := time.Now()
		ns := listNodes(ctx, t, c)
		if int32(len(ns)) != target {
			t.Fatalf("%s: %d nodes right after the scale-up, want %d: %v", s.name, len(ns), target, ns)
		}
		// The scale-up wrote its Pending nodes with the new target: every
		// earlier node is kept and exactly s.add are new.
		ids := slices.Sorted(maps.Keys(ns))
		for _, id := range before {
			if _, ok := ns[id]; !ok {
				t.Fatalf("%s: node %s is gone after the scale-up: %v", s.name, id, ns)
			}
		}
		time.Sleep(time.Until(acked.Add(s.killAfter)))
		ns = listNodes(ctx, t, c)
		for _, st := range ns {
			if st == smtypes.ClusterInstanceStatusPending {
				s.pendingKill++
			}
		}
		if s.pendingKill != int(s.add) {
			t.Fatalf("%s: %d nodes Pending before the kill, want the %d new ones: %v", s.name, s.pendingKill, s.add, ns)
		}
		srv.kill()
		time.Sleep(s.down)
		must("restart", srv.start())
		start := time.Now()
		waitNodesSettled(ctx, t, c, ids, 2*nodeLaunch)
		s.settle = time.Since(start)
		before = ids
		if firstIDs == nil {
			firstIDs = ids
		}
	}

	// Scaling in to the first step's count removes exactly the later nodes:
	// all are empty, so the newest go.
	must("UpdateCluster 6→3", updateGroupCount(ctx, c, int32(len(firstIDs))))
	waitNodesSettled(ctx, t, c, firstIDs, time.Minute)

	// A kill while nodes are ShuttingDown: a deployment with a replica on
	// each node keeps the leaving nodes draining until its replicas move.
	sdIDs, sdSeen := scaleDownKill(ctx, t, c, srv, firstIDs)
	waitNodesSettled(ctx, t, c, sdIDs, 2*time.Minute)
	restart() // and once more with nothing in flight: still the same node
	waitNodesSettled(ctx, t, c, sdIDs, time.Minute)

	var parts []string
	for _, s := range steps {
		parts = append(parts, fmt.Sprintf("+%d(pending_at_kill=%d down=%s settle=%s)", s.add, s.pendingKill, s.down.Round(time.Second), s.settle.Round(100*time.Millisecond)))
	}
	t.Logf("nodes: kills=%d scale_ups=[%s] peak=%d after_scale_in=%d shutting_down_at_kill=%d final=%d",
		len(steps)+2, strings.Join(parts, " "), target, len(firstIDs), sdSeen, len(sdIDs))
}

// scaleDownKill places a replica on each of ids' nodes, scales the group in
// to one node, kills the server while the others are ShuttingDown and
// restarts it. It returns the node that must remain and how many were
// ShuttingDown at the kill.
func scaleDownKill(ctx context.Context, t *testing.T, c *clients, srv *server, ids []string) ([]string, int) {
	t.Helper()
	n := len(ids)
	manifest := fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: on-nodes, namespace: default, annotations: {capstan.dev/cluster: %s}}
spec:
  sageMakerEndpoint: {name: on-nodes}
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: %s}
  replicas: %d
`, nodeCluster, nodeType, n)
	if _, err := c.do(ctx, http.MethodPut, manifestBase+"on-nodes", []byte(manifest)); err != nil {
		t.Fatalf("apply on-nodes: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := c.do(ctx, http.MethodGet, manifestBase+"on-nodes", nil)
		var o struct {
			Status struct {
				State         string `json:"state"`
				ReadyReplicas int    `json:"readyReplicas"`
			} `json:"status"`
		}
		if err == nil {
			err = json.Unmarshal(b, &o)
		}
		if err == nil && o.Status.State == "DeploymentComplete" && o.Status.ReadyReplicas == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("on-nodes not ready with %d replicas within a minute: %+v %v", n, o.Status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every node holds a replica, so the newest go: the oldest stays.
	keep := ids[:1]
	if err := updateGroupCount(ctx, c, 1); err != nil {
		t.Fatalf("UpdateCluster %d→1: %v", n, err)
	}
	seen := 0
	deadline = time.Now().Add(30 * time.Second)
	for seen == 0 {
		ns := listNodes(ctx, t, c)
		for _, st := range ns {
			if st == smtypes.ClusterInstanceStatusShuttingDown {
				seen++
			}
		}
		if seen == 0 && (len(ns) == 1 || time.Now().After(deadline)) {
			t.Fatalf("the scale-in finished before a kill during it: %v", ns)
		}
		if seen == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	srv.kill()
	if err := srv.start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	return keep, seen
}

// updateGroupCount sets the group's InstanceCount with UpdateCluster.
func updateGroupCount(ctx context.Context, c *clients, count int32) error {
	_, err := c.sm.UpdateCluster(ctx, &sm.UpdateClusterInput{ClusterName: aws.String(nodeCluster),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String(nodeGroup),
			InstanceType: nodeType, InstanceCount: aws.Int32(count), ExecutionRole: aws.String(nodeRole)}}}, c.at())
	return err
}

// listNodes returns the cluster's nodes (every page): instance id → status.
func listNodes(ctx context.Context, t *testing.T, c *clients) map[string]smtypes.ClusterInstanceStatus {
	t.Helper()
	out := map[string]smtypes.ClusterInstanceStatus{}
	var token *string
	for {
		page, err := c.sm.ListClusterNodes(ctx, &sm.ListClusterNodesInput{ClusterName: aws.String(nodeCluster), NextToken: token}, c.at())
		if err != nil {
			t.Fatalf("ListClusterNodes: %v", err)
		}
		for _, n := range page.ClusterNodeSummaries {
			var st smtypes.ClusterInstanceStatus
			if n.InstanceStatus != nil {
				st = n.InstanceStatus.Status
			}
			out[aws.ToString(n.InstanceId)] = st
		}
		if token = page.NextToken; token == nil || *token == "" {
			return out
		}
	}
}

// waitNodesSettled waits, within bound, for the cluster to be InService
// with exactly ids (sorted) as its nodes, all Running, and its group's
// CurrentCount and TargetCount both len(ids). Anything else at the bound
// fails: a missing node was lost, an extra one leaked or launched twice.
func waitNodesSettled(ctx context.Context, t *testing.T, c *clients, ids []string, bound time.Duration) {
	t.Helper()
	want := len(ids)
	deadline := time.Now().Add(bound)
	for {
		var why string
		out, err := c.sm.DescribeCluster(ctx, &sm.DescribeClusterInput{ClusterName: aws.String(nodeCluster)}, c.at())
		ns := listNodes(ctx, t, c)
		switch {
		case err != nil:
			why = err.Error()
		case out.ClusterStatus != smtypes.ClusterStatusInservice:
			why = fmt.Sprintf("cluster %s", out.ClusterStatus)
		case len(out.InstanceGroups) != 1:
			why = fmt.Sprintf("%d instance groups", len(out.InstanceGroups))
		case aws.ToInt32(out.InstanceGroups[0].CurrentCount) != int32(want) || aws.ToInt32(out.InstanceGroups[0].TargetCount) != int32(want):
			why = fmt.Sprintf("CurrentCount %d TargetCount %d, want %d", aws.ToInt32(out.InstanceGroups[0].CurrentCount),
				aws.ToInt32(out.InstanceGroups[0].TargetCount), want)
		case !slices.Equal(slices.Sorted(maps.Keys(ns)), ids):
			why = fmt.Sprintf("nodes %v, want %v", ns, ids)
		default:
			for id, st := range ns {
				if st != smtypes.ClusterInstanceStatusRunning {
					why = fmt.Sprintf("node %s %s", id, st)
				}
			}
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled at %d nodes within %v: %s", want, bound, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
