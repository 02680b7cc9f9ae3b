package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/testutil"
)

const (
	hpRole     = "arn:aws:iam::000000000000:role/hyperpod-exec"
	hpEks      = "arn:aws:eks:us-east-1:000000000000:cluster/inf"
	hpLaunch   = 30 * time.Second
	hpNotFound = "i-0123456789abcdef0"
)

// clusterConfig is a small world: a fleet of 4 ml.g5.8xlarge and 6
// ml.p5.48xlarge, the default cluster with one ml.g5.8xlarge node, a 30 s
// launch, no spot interruptions, on a clock the test moves.
func clusterConfig() config.Config {
	return config.Config{DevClock: true,
		Fleet: map[string]map[string]int{"ml.g5.8xlarge": {"us-east-1a": 4}, "ml.p5.48xlarge": {"us-east-1a": 6}},
		Cluster: config.Cluster{InstanceGroups: []config.InstanceGroup{{Name: "g5", InstanceType: "ml.g5.8xlarge", Count: 1}},
			LaunchTime: config.Duration{Duration: hpLaunch},
			Spot:       config.Spot{MeanTimeToInterruption: config.Duration{Duration: -time.Second}}}}
}

// buyClusterPlan buys count × ml.p5.48xlarge for a week, for target
// ("hyperpod-cluster" or "endpoint"), starting after now.
func (h *harness) buyClusterPlan(t *testing.T, name, target string, count int32, now time.Time) string {
	t.Helper()
	ctx := context.Background()
	s, err := h.sm.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
		TargetResources: []smtypes.SageMakerResourceName{smtypes.SageMakerResourceName(target)}, InstanceType: "ml.p5.48xlarge",
		InstanceCount: aws.Int32(count), DurationHours: aws.Int64(168), StartTimeAfter: aws.Time(now),
		EndTimeBefore: aws.Time(now.Add(30 * 24 * time.Hour))})
	if err != nil || len(s.TrainingPlanOfferings) == 0 {
		t.Fatalf("search %s: %+v %v", target, s, err)
	}
	out, err := h.sm.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name),
		TrainingPlanOfferingId: s.TrainingPlanOfferings[0].TrainingPlanOfferingId})
	if err != nil {
		t.Fatalf("create plan %s: %v", name, err)
	}
	return aws.ToString(out.TrainingPlanArn)
}

func hpGroup(name, typ string, count int32, plan string) smtypes.ClusterInstanceGroupSpecification {
	g := smtypes.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String(name), InstanceType: smtypes.ClusterInstanceType(typ),
		InstanceCount: aws.Int32(count), ExecutionRole: aws.String(hpRole),
		LifeCycleConfig: &smtypes.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://bucket/lifecycle"), OnCreate: aws.String("on_create.sh")}}
	if plan != "" {
		g.TrainingPlanArn = aws.String(plan)
	}
	return g
}

func (h *harness) createCluster(name string, recovery smtypes.ClusterNodeRecovery, groups ...smtypes.ClusterInstanceGroupSpecification) error {
	_, err := h.sm.CreateCluster(context.Background(), &sm.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: groups,
		Orchestrator: &smtypes.ClusterOrchestrator{Eks: &smtypes.ClusterOrchestratorEksConfig{ClusterArn: aws.String(hpEks)}},
		NodeRecovery: recovery})
	return err
}

func (h *harness) describeCluster(t *testing.T, name string) *sm.DescribeClusterOutput {
	t.Helper()
	d, err := h.sm.DescribeCluster(context.Background(), &sm.DescribeClusterInput{ClusterName: aws.String(name)})
	if err != nil {
		t.Fatalf("describe %s: %v", name, err)
	}
	return d
}

func (h *harness) waitCluster(t *testing.T, name string, want smtypes.ClusterStatus) *sm.DescribeClusterOutput {
	t.Helper()
	var d *sm.DescribeClusterOutput
	testutil.EventuallyErr(t, 20*time.Second, "the cluster's status", func() error {
		d = h.describeCluster(t, name)
		if d.ClusterStatus != want {
			return fmt.Errorf("%s is %s, want %s", name, d.ClusterStatus, want)
		}
		return nil
	})
	return d
}

// clusterNodes lists every node of a cluster through the SDK paginator.
func (h *harness) clusterNodes(t *testing.T, in *sm.ListClusterNodesInput) []smtypes.ClusterNodeSummary {
	t.Helper()
	var out []smtypes.ClusterNodeSummary
	p := sm.NewListClusterNodesPaginator(h.sm, in)
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list nodes of %s: %v", aws.ToString(in.ClusterName), err)
		}
		out = append(out, page.ClusterNodeSummaries...)
	}
	return out
}

func nodeIDs(ns []smtypes.ClusterNodeSummary) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = aws.ToString(n.InstanceId)
	}
	return out
}

func nodeStatuses(ns []smtypes.ClusterNodeSummary, group string) map[smtypes.ClusterInstanceStatus]int {
	out := map[smtypes.ClusterInstanceStatus]int{}
	for _, n := range ns {
		if group == "" || aws.ToString(n.InstanceGroupName) == group {
			out[n.InstanceStatus.Status]++
		}
	}
	return out
}

func (h *harness) clusterNames(t *testing.T, in *sm.ListClustersInput) []string {
	t.Helper()
	var out []string
	p := sm.NewListClustersPaginator(h.sm, in)
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list clusters: %v", err)
		}
		if in.MaxResults != nil && len(page.ClusterSummaries) > int(*in.MaxResults) {
			t.Fatalf("page of %d clusters, MaxResults %d", len(page.ClusterSummaries), *in.MaxResults)
		}
		for _, c := range page.ClusterSummaries {
			out = append(out, aws.ToString(c.ClusterName))
		}
	}
	return out
}

func groupDetails(d *sm.DescribeClusterOutput, name string) smtypes.ClusterInstanceGroupDetails {
	for _, g := range d.InstanceGroups {
		if aws.ToString(g.InstanceGroupName) == name {
			return g
		}
	}
	return smtypes.ClusterInstanceGroupDetails{}
}

// TestClusterLifecycleWithSDK drives every HyperPod cluster operation
// through the AWS SDK: refused creates that leave nothing behind, a create
// with a reserved and an on-demand group that comes InService after the
// launch time, the lists with their filters, orders and pages, updates
// that add and retire nodes, the batch node calls, and a delete that waits
// for the deployment running there.
func TestClusterLifecycleWithSDK(t *testing.T) {
	h := startHarness(t, clusterConfig())
	dev := h.srv.Clock.(*clock.Dev)
	ctx := context.Background()
	plan := h.buyClusterPlan(t, "hp-plan", "hyperpod-cluster", 1, dev.Now())
	eplan := h.buyClusterPlan(t, "ep-plan", "endpoint", 1, dev.Now())
	if err := dev.Advance(2 * time.Minute); err != nil { // both plans start
		t.Fatal(err)
	}
	defaultNodes := nodeIDs(h.clusterNodes(t, &sm.ListClusterNodesInput{ClusterName: aws.String("ml-cluster")}))
	if len(defaultNodes) != 1 {
		t.Fatalf("ml-cluster seeded with %v, want one node", defaultNodes)
	}

	t.Run("refused creates leave nothing", func(t *testing.T) {
		tests := []struct {
			name   string
			groups []smtypes.ClusterInstanceGroupSpecification
			code   string
			msg    string
		}{
			{"unknown instance type", []smtypes.ClusterInstanceGroupSpecification{hpGroup("a", "ml.nope.48xlarge", 1, "")},
				"ValidationException", "InstanceGroups[0].InstanceType"},
			{"count above the plan", []smtypes.ClusterInstanceGroupSpecification{hpGroup("ok", "ml.g5.8xlarge", 0, ""), hpGroup("r", "ml.p5.48xlarge", 2, plan)},
				"ValidationException", "InstanceGroups[1].InstanceCount' failed to satisfy constraint: 2 exceeds training plan hp-plan"},
			{"group on an endpoint plan", []smtypes.ClusterInstanceGroupSpecification{hpGroup("r", "ml.p5.48xlarge", 1, eplan)},
				"ValidationException", "InstanceGroups[0].TrainingPlanArn"},
			{"on-demand above the fleet", []smtypes.ClusterInstanceGroupSpecification{hpGroup("ok", "ml.g5.8xlarge", 1, ""), hpGroup("big", "ml.p5.48xlarge", 10, "")},
				"ResourceLimitExceeded", "'ml.p5.48xlarge for cluster usage' is 6 Instances"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				code, msg := apiCode(h.createCluster("bad-cluster", "", tc.groups...))
				if code != tc.code || !strings.Contains(msg, tc.msg) {
					t.Fatalf("got %s %q\nwant %s containing %q", code, msg, tc.code, tc.msg)
				}
				if got := h.clusterNames(t, &sm.ListClustersInput{}); !slices.Equal(got, []string{"ml-cluster"}) {
					t.Errorf("clusters after a refused create: %v", got)
				}
				if got := nodeIDs(h.clusterNodes(t, &sm.ListClusterNodesInput{ClusterName: aws.String("ml-cluster")})); !slices.Equal(got, defaultNodes) {
					t.Errorf("ml-cluster's nodes after a refused create: %v, want %v", got, defaultNodes)
				}
			})
		}
	})

	// Two groups, one on the hyperpod-cluster plan: Creating, then
	// InService once the launch time has passed.
	if err := h.createCluster("inf-cluster", smtypes.ClusterNodeRecoveryAutomatic,
		hpGroup("reserved", "ml.p5.48xlarge", 1, plan), hpGroup("on-demand", "ml.p5.48xlarge", 1, "")); err != nil {
		t.Fatal(err)
	}
	if d := h.describeCluster(t, "inf-cluster"); d.ClusterStatus != smtypes.ClusterStatusCreating {
		t.Fatalf("just created: %s, want Creating", d.ClusterStatus)
	}
	if err := dev.Advance(hpLaunch + time.Second); err != nil {
		t.Fatal(err)
	}
	d := h.waitCluster(t, "inf-cluster", smtypes.ClusterStatusInservice)

	t.Run("describe", func(t *testing.T) {
		if !strings.HasPrefix(aws.ToString(d.ClusterArn), "arn:aws:sagemaker:us-east-1:000000000000:cluster/") ||
			aws.ToString(d.ClusterName) != "inf-cluster" || d.CreationTime == nil || d.NodeRecovery != smtypes.ClusterNodeRecoveryAutomatic ||
			d.Orchestrator == nil || d.Orchestrator.Eks == nil || aws.ToString(d.Orchestrator.Eks.ClusterArn) != hpEks || d.AutoScaling != nil {
			t.Errorf("cluster: %+v", d)
		}
		tests := []struct {
			group, plan string
			onDemand    bool
		}{{"reserved", plan, false}, {"on-demand", "", true}}
		for _, tc := range tests {
			g := groupDetails(d, tc.group)
			if aws.ToInt32(g.CurrentCount) != 1 || aws.ToInt32(g.TargetCount) != 1 || g.InstanceType != "ml.p5.48xlarge" ||
				aws.ToString(g.TrainingPlanArn) != tc.plan || aws.ToString(g.ExecutionRole) != hpRole ||
				g.LifeCycleConfig == nil || aws.ToString(g.LifeCycleConfig.OnCreate) != "on_create.sh" || g.Status != smtypes.InstanceGroupStatusInservice ||
				(tc.onDemand != (g.CapacityRequirements != nil && g.CapacityRequirements.OnDemand != nil)) {
				t.Errorf("group %s: %+v", tc.group, g)
			}
		}
		if g := groupDetails(d, "reserved"); aws.ToString(g.TrainingPlanStatus) == "" {
			t.Errorf("reserved group has no TrainingPlanStatus")
		}
	})

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name string
			call func() error
			code string
			msg  string
		}{
			{"describe unknown", func() error {
				_, err := h.sm.DescribeCluster(ctx, &sm.DescribeClusterInput{ClusterName: aws.String("nope")})
				return err
			}, "ResourceNotFound", "nope"},
			{"nodes of unknown", func() error {
				_, err := h.sm.ListClusterNodes(ctx, &sm.ListClusterNodesInput{ClusterName: aws.String("nope")})
				return err
			}, "ResourceNotFound", "nope"},
			{"delete unknown", func() error {
				_, err := h.sm.DeleteCluster(ctx, &sm.DeleteClusterInput{ClusterName: aws.String("nope")})
				return err
			}, "ResourceNotFound", "nope"},
			{"duplicate name", func() error {
				return h.createCluster("inf-cluster", "", hpGroup("a", "ml.g5.8xlarge", 0, ""))
			}, "ResourceInUse", "inf-cluster already exists"},
			{"unknown node", func() error {
				_, err := h.sm.DescribeClusterNode(ctx, &sm.DescribeClusterNodeInput{ClusterName: aws.String("inf-cluster"), NodeId: aws.String(hpNotFound)})
				return err
			}, "ResourceNotFound", hpNotFound},
			{"autoscaling without a role", func() error {
				_, err := h.sm.UpdateCluster(ctx, &sm.UpdateClusterInput{ClusterName: aws.String("inf-cluster"),
					AutoScaling: &smtypes.ClusterAutoScalingConfig{Mode: smtypes.ClusterAutoScalingModeEnable}})
				return err
			}, "ValidationException", "ClusterRole"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				code, msg := apiCode(tc.call())
				if code != tc.code || !strings.Contains(msg, tc.msg) {
					t.Fatalf("got %s %q\nwant %s containing %q", code, msg, tc.code, tc.msg)
				}
			})
		}
	})

	// A third cluster, created later, makes the orders differ.
	if err := dev.Advance(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := h.createCluster("b-cluster", "", hpGroup("g5", "ml.g5.8xlarge", 0, "")); err != nil {
		t.Fatal(err)
	}
	t.Run("list clusters", func(t *testing.T) {
		tests := []struct {
			name string
			in   sm.ListClustersInput
			want []string
		}{
			{"default: creation time ascending", sm.ListClustersInput{}, []string{"ml-cluster", "inf-cluster", "b-cluster"}},
			{"name", sm.ListClustersInput{SortBy: smtypes.ClusterSortByName}, []string{"b-cluster", "inf-cluster", "ml-cluster"}},
			{"name descending", sm.ListClustersInput{SortBy: smtypes.ClusterSortByName, SortOrder: smtypes.SortOrderDescending},
				[]string{"ml-cluster", "inf-cluster", "b-cluster"}},
			{"creation time descending", sm.ListClustersInput{SortBy: smtypes.ClusterSortByCreationTime, SortOrder: smtypes.SortOrderDescending},
				[]string{"b-cluster", "inf-cluster", "ml-cluster"}},
			{"name contains, any case", sm.ListClustersInput{NameContains: aws.String("INF")}, []string{"inf-cluster"}},
			{"name contains none", sm.ListClustersInput{NameContains: aws.String("zzz")}, nil},
			{"pages of one", sm.ListClustersInput{MaxResults: aws.Int32(1), SortBy: smtypes.ClusterSortByName},
				[]string{"b-cluster", "inf-cluster", "ml-cluster"}},
			{"by training plan", sm.ListClustersInput{TrainingPlanArn: aws.String(plan)}, []string{"inf-cluster"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if got := h.clusterNames(t, &tc.in); !slices.Equal(got, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
		page, err := h.sm.ListClusters(ctx, &sm.ListClustersInput{MaxResults: aws.Int32(1), NameContains: aws.String("inf")})
		if err != nil || len(page.ClusterSummaries) != 1 || page.NextToken != nil ||
			!slices.Equal(page.ClusterSummaries[0].TrainingPlanArns, []string{plan}) || page.ClusterSummaries[0].ClusterStatus != smtypes.ClusterStatusInservice {
			t.Fatalf("one-cluster page: %+v %v", page, err)
		}
		_, err = h.sm.ListClusters(ctx, &sm.ListClustersInput{NextToken: aws.String("garbage")})
		if code, _ := apiCode(err); code != "ValidationException" {
			t.Fatalf("bad token: %v", err)
		}
	})

	t.Run("update counts", func(t *testing.T) {
		up := func(n int32) {
			t.Helper()
			if _, err := h.sm.UpdateCluster(ctx, &sm.UpdateClusterInput{ClusterName: aws.String("inf-cluster"),
				InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{hpGroup("on-demand", "ml.p5.48xlarge", n, "")}}); err != nil {
				t.Fatalf("update to %d: %v", n, err)
			}
		}
		in := &sm.ListClusterNodesInput{ClusterName: aws.String("inf-cluster"), InstanceGroupNameContains: aws.String("on-demand")}
		up(3)
		if got := nodeStatuses(h.clusterNodes(t, in), ""); got[smtypes.ClusterInstanceStatusPending] != 2 || got[smtypes.ClusterInstanceStatusRunning] != 1 {
			t.Fatalf("after count 1 → 3: %v, want 2 Pending and 1 Running", got)
		}
		if err := dev.Advance(hpLaunch + time.Second); err != nil {
			t.Fatal(err)
		}
		var got map[smtypes.ClusterInstanceStatus]int
		testutil.EventuallyErr(t, 20*time.Second, "the scale up", func() error {
			got = nodeStatuses(h.clusterNodes(t, in), "")
			if got[smtypes.ClusterInstanceStatusRunning] != 3 || len(got) != 1 {
				return fmt.Errorf("on-demand nodes %v, want 3 Running", got)
			}
			return nil
		})
		d := h.waitCluster(t, "inf-cluster", smtypes.ClusterStatusInservice)
		if g := groupDetails(d, "on-demand"); aws.ToInt32(g.CurrentCount) != 3 || aws.ToInt32(g.TargetCount) != 3 {
			t.Fatalf("after scale up: %+v", g)
		}
		up(1)
		testutil.EventuallyErr(t, 20*time.Second, "the scale down", func() error {
			_ = dev.Advance(time.Second) // drains and shutdowns run on the server's clock
			got = nodeStatuses(h.clusterNodes(t, in), "")
			if got[smtypes.ClusterInstanceStatusRunning] != 1 || len(got) != 1 {
				return fmt.Errorf("on-demand nodes %v, want 1", got)
			}
			return nil
		})
		d = h.waitCluster(t, "inf-cluster", smtypes.ClusterStatusInservice)
		if g := groupDetails(d, "on-demand"); aws.ToInt32(g.CurrentCount) != 1 || aws.ToInt32(g.TargetCount) != 1 {
			t.Fatalf("after scale down: %+v", g)
		}
	})

	t.Run("update settings", func(t *testing.T) {
		if _, err := h.sm.UpdateCluster(ctx, &sm.UpdateClusterInput{ClusterName: aws.String("b-cluster"), ClusterRole: aws.String(hpRole),
			AutoScaling: &smtypes.ClusterAutoScalingConfig{Mode: smtypes.ClusterAutoScalingModeEnable, AutoScalerType: smtypes.ClusterAutoScalerTypeKarpenter}}); err != nil {
			t.Fatal(err)
		}
		d := h.describeCluster(t, "b-cluster")
		if d.AutoScaling == nil || d.AutoScaling.Mode != smtypes.ClusterAutoScalingModeEnable || d.AutoScaling.AutoScalerType != smtypes.ClusterAutoScalerTypeKarpenter ||
			aws.ToString(d.ClusterRole) != hpRole {
			t.Fatalf("after enabling autoscaling: %+v %+v", d.AutoScaling, aws.ToString(d.ClusterRole))
		}
		if _, err := h.sm.UpdateCluster(ctx, &sm.UpdateClusterInput{ClusterName: aws.String("inf-cluster"), NodeRecovery: smtypes.ClusterNodeRecoveryNone}); err != nil {
			t.Fatal(err)
		}
		if d := h.describeCluster(t, "inf-cluster"); d.NodeRecovery != smtypes.ClusterNodeRecoveryNone {
			t.Fatalf("NodeRecovery %s, want None", d.NodeRecovery)
		}
	})

	t.Run("list and describe nodes", func(t *testing.T) {
		all := h.clusterNodes(t, &sm.ListClusterNodesInput{ClusterName: aws.String("inf-cluster")})
		if len(all) != 2 {
			t.Fatalf("inf-cluster nodes: %+v", all)
		}
		ids := nodeIDs(all)
		sorted := slices.Sorted(slices.Values(ids))
		tests := []struct {
			name string
			in   sm.ListClusterNodesInput
			want []string
		}{
			{"by name", sm.ListClusterNodesInput{SortBy: smtypes.ClusterSortByName}, sorted},
			{"by name descending, pages of one", sm.ListClusterNodesInput{SortBy: smtypes.ClusterSortByName, SortOrder: smtypes.SortOrderDescending, MaxResults: aws.Int32(1)},
				[]string{sorted[1], sorted[0]}},
			{"group filter", sm.ListClusterNodesInput{InstanceGroupNameContains: aws.String("reserved")}, nil},
			{"launched after now", sm.ListClusterNodesInput{CreationTimeAfter: aws.Time(dev.Now())}, nil},
		}
		for _, n := range all {
			if aws.ToString(n.InstanceGroupName) == "reserved" {
				tests[2].want = []string{aws.ToString(n.InstanceId)}
			}
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				tc.in.ClusterName = aws.String("inf-cluster")
				if got := nodeIDs(h.clusterNodes(t, &tc.in)); !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
		for _, n := range all {
			out, err := h.sm.DescribeClusterNode(ctx, &sm.DescribeClusterNodeInput{ClusterName: d.ClusterArn, NodeId: n.InstanceId})
			if err != nil {
				t.Fatal(err)
			}
			nd := out.NodeDetails
			wantCap := smtypes.ClusterCapacityType("")
			if aws.ToString(n.InstanceGroupName) == "on-demand" {
				wantCap = "OnDemand"
			}
			if aws.ToString(nd.InstanceId) != aws.ToString(n.InstanceId) || nd.InstanceGroupName == nil || nd.InstanceType != "ml.p5.48xlarge" ||
				nd.InstanceStatus == nil || nd.InstanceStatus.Status != smtypes.ClusterInstanceStatusRunning || nd.LaunchTime == nil ||
				!strings.HasPrefix(aws.ToString(nd.PrivatePrimaryIp), "10.") || !strings.HasSuffix(aws.ToString(nd.PrivateDnsHostname), ".us-east-1.compute.internal") ||
				nd.Placement == nil || aws.ToString(nd.Placement.AvailabilityZone) == "" || nd.CapacityType != wantCap ||
				nd.LifeCycleConfig == nil || aws.ToString(nd.LifeCycleConfig.SourceS3Uri) != "s3://bucket/lifecycle" {
				t.Errorf("node %s: %+v", aws.ToString(n.InstanceId), nd)
			}
		}
	})

	t.Run("batch add and delete", func(t *testing.T) {
		add, err := h.sm.BatchAddClusterNodes(ctx, &sm.BatchAddClusterNodesInput{ClusterName: aws.String("inf-cluster"),
			NodesToAdd: []smtypes.AddClusterNodeSpecification{
				{InstanceGroupName: aws.String("on-demand"), IncrementTargetCountBy: aws.Int32(1)},
				{InstanceGroupName: aws.String("ghost"), IncrementTargetCountBy: aws.Int32(2)}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(add.Successful) != 1 || aws.ToString(add.Successful[0].InstanceGroupName) != "on-demand" || add.Successful[0].Status != smtypes.ClusterInstanceStatusPending ||
			len(add.Failed) != 1 || aws.ToString(add.Failed[0].InstanceGroupName) != "ghost" ||
			add.Failed[0].ErrorCode != smtypes.BatchAddClusterNodesErrorCodeInstanceGroupNotFound || aws.ToInt32(add.Failed[0].FailedCount) != 2 {
			t.Fatalf("batch add: %+v", add)
		}
		added := aws.ToString(add.Successful[0].NodeLogicalId)
		if g := groupDetails(h.describeCluster(t, "inf-cluster"), "on-demand"); aws.ToInt32(g.TargetCount) != 2 {
			t.Fatalf("on-demand target after batch add: %d, want 2", aws.ToInt32(g.TargetCount))
		}
		// The SDK's ClientToken (the same one on a retry) makes the call
		// idempotent: the retry answers the same node and adds none.
		spec := []smtypes.AddClusterNodeSpecification{{InstanceGroupName: aws.String("on-demand"), IncrementTargetCountBy: aws.Int32(1)}}
		first, err := h.sm.BatchAddClusterNodes(ctx, &sm.BatchAddClusterNodesInput{ClusterName: aws.String("inf-cluster"),
			ClientToken: aws.String("retry-1"), NodesToAdd: spec})
		if err != nil {
			t.Fatal(err)
		}
		again, err := h.sm.BatchAddClusterNodes(ctx, &sm.BatchAddClusterNodesInput{ClusterName: aws.String("inf-cluster"),
			ClientToken: aws.String("retry-1"), NodesToAdd: spec})
		if err != nil || len(again.Successful) != 1 || aws.ToString(again.Successful[0].NodeLogicalId) != aws.ToString(first.Successful[0].NodeLogicalId) {
			t.Fatalf("retry with the same ClientToken: %+v, %v; want node %s again", again, err, aws.ToString(first.Successful[0].NodeLogicalId))
		}
		if g := groupDetails(h.describeCluster(t, "inf-cluster"), "on-demand"); aws.ToInt32(g.TargetCount) != 3 {
			t.Fatalf("on-demand target after a retried add: %d, want 3", aws.ToInt32(g.TargetCount))
		}
		spec[0].IncrementTargetCountBy = aws.Int32(2)
		_, err = h.sm.BatchAddClusterNodes(ctx, &sm.BatchAddClusterNodesInput{ClusterName: aws.String("inf-cluster"),
			ClientToken: aws.String("retry-1"), NodesToAdd: spec})
		if !strings.Contains(fmt.Sprint(err), "ClientToken retry-1 was already used with a different") {
			t.Fatalf("the token with another request: %v", err)
		}
		if _, err := h.sm.BatchDeleteClusterNodes(ctx, &sm.BatchDeleteClusterNodesInput{ClusterName: aws.String("inf-cluster"),
			NodeIds: []string{aws.ToString(first.Successful[0].NodeLogicalId)}}); err != nil {
			t.Fatal(err)
		}
		del, err := h.sm.BatchDeleteClusterNodes(ctx, &sm.BatchDeleteClusterNodesInput{ClusterName: aws.String("inf-cluster"),
			NodeIds: []string{added, hpNotFound}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(del.Successful, []string{added}) || len(del.Failed) != 1 || aws.ToString(del.Failed[0].NodeId) != hpNotFound ||
			del.Failed[0].Code != smtypes.BatchDeleteClusterNodesErrorCodeNodeIdNotFound || aws.ToString(del.Failed[0].Message) == "" {
			t.Fatalf("batch delete: %+v", del)
		}
		var ids []string
		testutil.EventuallyErr(t, 20*time.Second, "the deleted node to go", func() error {
			_ = dev.Advance(time.Second)
			ids = nodeIDs(h.clusterNodes(t, &sm.ListClusterNodesInput{ClusterName: aws.String("inf-cluster")}))
			if slices.Contains(ids, added) {
				return fmt.Errorf("%s still listed in %v", added, ids)
			}
			return nil
		})
	})

	t.Run("delete waits for the deployment there", func(t *testing.T) {
		h.applyJSM(t, "on-inf", "inf-cluster", "ml.p5.48xlarge")
		_, err := h.sm.DeleteCluster(ctx, &sm.DeleteClusterInput{ClusterName: aws.String("inf-cluster")})
		if code, msg := apiCode(err); code != "ConflictException" || !strings.Contains(msg, "on-inf") {
			t.Fatalf("delete with a deployment there: %s %q, want ConflictException naming on-inf", code, msg)
		}
		if err := h.srv.Deployments.Delete(ctx, manifest.KindJumpStartModel, "default", "on-inf"); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyErr(t, 20*time.Second, "the delete to be accepted", func() error {
			_, err = h.sm.DeleteCluster(ctx, &sm.DeleteClusterInput{ClusterName: aws.String("inf-cluster")})
			if err != nil {
				return fmt.Errorf("delete still refused: %v", err)
			}
			return nil
		})
		var names []string
		testutil.EventuallyErr(t, 20*time.Second, "the cluster to go", func() error {
			_ = dev.Advance(time.Second)
			names = h.clusterNames(t, &sm.ListClustersInput{})
			if slices.Contains(names, "inf-cluster") {
				return fmt.Errorf("clusters %v", names)
			}
			return nil
		})
		_, err = h.sm.DescribeCluster(ctx, &sm.DescribeClusterInput{ClusterName: aws.String("inf-cluster")})
		if code, _ := apiCode(err); code != "ResourceNotFound" {
			t.Fatalf("describe after delete: %v", err)
		}
	})
}

// clusterJSM is a one-replica JumpStartModel placed on cluster.
func clusterJSM(name, cluster, instanceType string) string {
	return `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata:
  name: ` + name + `
  namespace: default
  annotations: {capstan.dev/cluster: ` + cluster + `}
spec:
  model:
    modelHubName: SageMakerPublicHub
    modelId: deepseek-llm-r1-distill-qwen-1-5b
  server:
    instanceType: ` + instanceType + `
`
}

// applyJSM applies clusterJSM(name, cluster, instanceType) through the
// deployment service and returns a reader of its ready replicas.
func (h *harness) applyJSM(t *testing.T, name, cluster, instanceType string) (ready func() int) {
	t.Helper()
	ctx := context.Background()
	objs, err := manifest.Load([]byte(clusterJSM(name, cluster, instanceType)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.Deployments.Apply(ctx, objs[0]); err != nil {
		t.Fatal(err)
	}
	return func() int {
		o, err := h.srv.Deployments.Get(ctx, manifest.KindJumpStartModel, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		return int(o.GetStatus().ReadyReplicas)
	}
}

// oneNodeCluster creates cluster name with one ml.g5.8xlarge node, moves the
// dev clock past its launch and waits until it is InService.
func (h *harness) oneNodeCluster(t *testing.T, name string, recovery smtypes.ClusterNodeRecovery) {
	t.Helper()
	if err := h.createCluster(name, recovery, hpGroup("one", "ml.g5.8xlarge", 1, "")); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Clock.(*clock.Dev).Advance(hpLaunch + time.Second); err != nil {
		t.Fatal(err)
	}
	h.waitCluster(t, name, smtypes.ClusterStatusInservice)
}

// nodeAPI is a node as GET /apis/capstan.dev/v1/nodes answers it.
type nodeAPI struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Replicas []string `json:"replicas"`
}

func (h *harness) apiNodes(t *testing.T, cluster string) []nodeAPI {
	t.Helper()
	resp, err := http.Get(h.url + "/apis/capstan.dev/v1/nodes?cluster=" + cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct{ Items []nodeAPI }
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET nodes: %d %v", resp.StatusCode, err)
	}
	return l.Items
}

// TestClusterNodeFailureMovesReplicas fails the only node of a deployment's
// cluster through the node API: with NodeRecovery Automatic the node is
// replaced and the replica runs again on the new one; with None the node
// stays in Failure and the replica waits for a node.
func TestClusterNodeFailureMovesReplicas(t *testing.T) {
	tests := []struct {
		recovery smtypes.ClusterNodeRecovery
		replaced bool
	}{
		{smtypes.ClusterNodeRecoveryAutomatic, true},
		{smtypes.ClusterNodeRecoveryNone, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.recovery), func(t *testing.T) {
			h := startHarness(t, clusterConfig())
			dev := h.srv.Clock.(*clock.Dev)
			ctx := context.Background()
			h.oneNodeCluster(t, "rec-cluster", tc.recovery)
			ready := h.applyJSM(t, "mover", "rec-cluster", "ml.g5.8xlarge")
			var ns []nodeAPI
			testutil.EventuallyErr(t, 20*time.Second, "the replica to be placed", func() error {
				ns = h.apiNodes(t, "rec-cluster")
				if len(ns) != 1 || len(ns[0].Replicas) != 1 {
					return fmt.Errorf("replica not placed: %+v", ns)
				}
				return nil
			})
			first := ns[0].Name
			testutil.Eventually(t, 20*time.Second, "the replica to be ready", func() bool { return ready() == 1 })

			resp, err := http.Post(h.url+"/apis/capstan.dev/v1/nodes/"+first+"/fail", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			var failed nodeAPI
			_ = json.NewDecoder(resp.Body).Decode(&failed)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || failed.Status != "Failure" {
				t.Fatalf("fail %s: %d %+v", first, resp.StatusCode, failed)
			}
			if tc.replaced {
				testutil.EventuallyErr(t, 20*time.Second, "a replacement node", func() error {
					_ = dev.Advance(time.Second)
					ns = h.apiNodes(t, "rec-cluster")
					if len(ns) != 1 || ns[0].Name == first || ns[0].Status != "Running" || len(ns[0].Replicas) != 1 {
						return fmt.Errorf("no replacement running the replica: %+v", ns)
					}
					return nil
				})
				testutil.Eventually(t, 20*time.Second, "the replica to be ready again", func() bool { return ready() == 1 })
				return
			}
			if err := dev.Advance(2 * hpLaunch); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 20*time.Second, "the replica to stop counting as ready", func() bool { return ready() == 0 })
			time.Sleep(200 * time.Millisecond) // a few resync passes: nothing may replace the node
			ns = h.apiNodes(t, "rec-cluster")
			if len(ns) != 1 || ns[0].Name != first || ns[0].Status != "Failure" || len(ns[0].Replicas) != 0 {
				t.Fatalf("with NodeRecovery None: %+v, want %s alone, in Failure, empty", ns, first)
			}
			evs, err := h.srv.Deployments.Events(ctx, manifest.KindJumpStartModel, "default", "mover")
			if err != nil {
				t.Fatal(err)
			}
			var text []string
			for _, e := range evs {
				text = append(text, e.Reason+": "+e.Message)
			}
			if !strings.Contains(strings.Join(text, "\n"), first) && !slices.ContainsFunc(text, func(s string) bool { return strings.Contains(strings.ToLower(s), "pending") }) {
				t.Errorf("events say nothing of the lost node or the pending replica:\n%s", strings.Join(text, "\n"))
			}
		})
	}
}

// TestLeavingReplicaServesWhileANodeIsAdded: on a cluster with node
// autoscaling on, BatchDeleteClusterNodes on a deployment's only node
// cordons it; with no room elsewhere the replica keeps serving while the
// autoscaler launches a node for its replacement, and moves once that node
// is up. (Without node autoscaling it would stop at once.)
func TestLeavingReplicaServesWhileANodeIsAdded(t *testing.T) {
	h := startHarness(t, clusterConfig())
	dev := h.srv.Clock.(*clock.Dev)
	ctx := context.Background()
	h.oneNodeCluster(t, "mv-cluster", smtypes.ClusterNodeRecoveryAutomatic)
	if _, err := h.sm.UpdateCluster(ctx, &sm.UpdateClusterInput{ClusterName: aws.String("mv-cluster"), ClusterRole: aws.String(hpRole),
		AutoScaling: &smtypes.ClusterAutoScalingConfig{Mode: smtypes.ClusterAutoScalingModeEnable, AutoScalerType: smtypes.ClusterAutoScalerTypeKarpenter}}); err != nil {
		t.Fatal(err)
	}
	ready := h.applyJSM(t, "mover", "mv-cluster", "ml.g5.8xlarge")
	var ns []nodeAPI
	testutil.EventuallyErr(t, 20*time.Second, "the replica to be ready", func() error {
		ns = h.apiNodes(t, "mv-cluster")
		if len(ns) != 1 || len(ns[0].Replicas) != 1 || ready() != 1 {
			return fmt.Errorf("replica not ready: %+v", ns)
		}
		return nil
	})
	first, replica := ns[0].Name, ns[0].Replicas[0]
	if _, err := h.sm.BatchDeleteClusterNodes(ctx, &sm.BatchDeleteClusterNodesInput{ClusterName: aws.String("mv-cluster"),
		NodeIds: []string{strings.TrimPrefix(first, "hyperpod-")}}); err != nil {
		t.Fatal(err)
	}

	// The autoscaler's batch closes a second after the replacement is
	// pending; the new node then launches for hpLaunch, and all that time
	// the leaving replica serves.
	var added string
	testutil.EventuallyErr(t, 20*time.Second, "a node for the replacement", func() error {
		_ = dev.Advance(200 * time.Millisecond)
		ns = h.apiNodes(t, "mv-cluster")
		for _, n := range ns {
			if n.Name != first {
				added = n.Name
			}
		}
		if added == "" {
			return fmt.Errorf("no node launched for the replacement: %+v", ns)
		}
		return nil
	})
	for range 3 {
		time.Sleep(100 * time.Millisecond) // resync passes: the leaving replica must not stop
		ns = h.apiNodes(t, "mv-cluster")
		i := slices.IndexFunc(ns, func(n nodeAPI) bool { return n.Name == first })
		if i < 0 || !slices.Equal(ns[i].Replicas, []string{replica}) || ready() != 1 {
			t.Fatalf("while %s launches: nodes %+v, ready %d; want %s still on %s and serving", added, ns, ready(), replica, first)
		}
	}
	testutil.EventuallyErr(t, 20*time.Second, "the replacement to take over", func() error {
		_ = dev.Advance(time.Second)
		ns = h.apiNodes(t, "mv-cluster")
		if len(ns) != 1 || ns[0].Name != added || ns[0].Status != "Running" || len(ns[0].Replicas) != 1 || ready() != 1 {
			return fmt.Errorf("the replacement did not take over on %s: %+v", added, ns)
		}
		return nil
	})
}

// TestDefaultClusterIsEksOrchestrated: the ml-cluster capstan serve seeds
// shows an EKS orchestrator, as a one-click HyperPod cluster always does,
// in the configured account and region.
func TestDefaultClusterIsEksOrchestrated(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Config
		want string
	}{
		{"defaults", config.Config{}, "arn:aws:eks:us-east-1:000000000000:cluster/ml-cluster"},
		{"configured account and region", config.Config{AccountID: "123456789012", Region: "eu-west-1"},
			"arn:aws:eks:eu-west-1:123456789012:cluster/ml-cluster"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := startHarness(t, tc.cfg).describeCluster(t, "ml-cluster")
			if d.Orchestrator == nil || d.Orchestrator.Eks == nil || aws.ToString(d.Orchestrator.Eks.ClusterArn) != tc.want {
				t.Fatalf("Orchestrator %+v, want Eks.ClusterArn %s", d.Orchestrator, tc.want)
			}
		})
	}
}

// TestPendingOnAGroupScaledToZero: a deployment on an instance group that
// exists with 0 nodes says so, and that with autoscaling off nothing will
// add one, not that the cluster has no group of the type.
func TestPendingOnAGroupScaledToZero(t *testing.T) {
	cfg := clusterConfig()
	cfg.Cluster.InstanceGroups = []config.InstanceGroup{{Name: "g5", InstanceType: "ml.g5.8xlarge", Count: 0}}
	h := startHarness(t, cfg)
	h.applyJSM(t, "zero", "ml-cluster", "ml.g5.8xlarge")
	const want = "instance group g5 (ml.g5.8xlarge) has 0 nodes, and cluster ml-cluster does not autoscale, so nothing will add one: " +
		"raise InstanceCount (aws sagemaker update-cluster) or enable autoscaling (update-cluster --auto-scaling)"
	var got string
	testutil.EventuallyErr(t, 20*time.Second, "the Degraded message", func() error {
		o, err := h.srv.Deployments.Get(context.Background(), manifest.KindJumpStartModel, "default", "zero")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range o.GetStatus().Conditions {
			if c.Type == manifest.ConditionDegraded {
				got = c.Message
			}
		}
		if got != want {
			return fmt.Errorf("Degraded message %q, want %q", got, want)
		}
		return nil
	})
}
