package hyperpod

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

func TestNewNamesMissingOptions(t *testing.T) {
	_, err := New(Options{})
	if err == nil {
		t.Fatal("New with no options succeeded")
	}
	for _, name := range []string{"Store", "Clock", "Catalog", "Capacity", "Plans", "PlanNodes", "Pool"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

// TestCreateLifecycle: Creating with Pending nodes, then after the launch
// time Running in the pool and the cluster InService.
func TestCreateLifecycle(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 2, "b": 2}}, nil)
	c, err := e.svc.CreateCluster(ctx, spec("ml-cluster", group("workers", g5, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != StatusCreating || c.NodeRecovery != RecoveryAutomatic || !regexp.MustCompile(`^[a-z0-9]{12}$`).MatchString(c.ID) {
		t.Fatalf("created %+v", c)
	}
	if arn := e.svc.ARN(c); arn != "arn:aws:sagemaker:us-east-1:000000000000:cluster/"+c.ID {
		t.Fatalf("ARN %s", arn)
	}
	if byArn, _, err := e.svc.Cluster(ctx, e.svc.ARN(c)); err != nil || byArn.Name != c.Name {
		t.Fatalf("by ARN: %+v, %v", byArn, err)
	}
	ns := e.nodes("ml-cluster")
	if len(ns) != 3 || countStatus(ns, NodePending) != 3 {
		t.Fatalf("nodes %+v", ns)
	}
	idRe := regexp.MustCompile(`^i-[0-9a-f]{17}$`)
	zones := map[string]int{}
	for _, n := range ns {
		if !idRe.MatchString(n.ID) || n.PricePerHour != 3.06 || n.CapacityType != CapacityOnDemand {
			t.Fatalf("node %+v", n)
		}
		zones[n.Zone]++
	}
	if zones["a"] != 2 || zones["b"] != 1 {
		t.Fatalf("zones %v, want the holding's a:2 b:1", zones)
	}
	if h := heldOf(e.held("ml-cluster"), g5); h != 3 {
		t.Fatalf("held %d, want 3", h)
	}
	e.step(29 * time.Second)
	if got := countStatus(e.nodes("ml-cluster"), NodeRunning); got != 0 {
		t.Fatalf("%d Running before the launch time", got)
	}
	e.step(time.Second)
	ns = e.nodes("ml-cluster")
	if countStatus(ns, NodeRunning) != 3 || len(e.poolNodes("ml-cluster")) != 3 {
		t.Fatalf("after launch: %+v, pool %d", ns, len(e.poolNodes("ml-cluster")))
	}
	c, views, err := e.svc.Cluster(ctx, "ml-cluster")
	if err != nil || c.Status != StatusInService || views[0].Current != 3 || views[0].Status != GroupInService {
		t.Fatalf("cluster %+v %+v %v", c, views, err)
	}
	if !hasEvent(e.events("ml-cluster", ns[0].Name()), "NodeReady") {
		t.Fatal("no NodeReady event")
	}
	if got := testutil.ToFloat64(e.svc.metrics.nodes.WithLabelValues("ml-cluster", "workers", "on-demand", "Running")); got != 3 {
		t.Fatalf("gauge %v", got)
	}
	e.step(time.Hour)
	if got := testutil.ToFloat64(e.svc.metrics.hours.WithLabelValues("ml-cluster", "workers", "on-demand")); got < 2.99 || got > 3.01 {
		t.Fatalf("node hours %v, want 3", got)
	}
	if got := testutil.ToFloat64(e.svc.metrics.cost.WithLabelValues("ml-cluster", "workers", "on-demand")); got < 9.17 || got > 9.19 {
		t.Fatalf("cost %v, want 9.18", got)
	}
	// A steady cluster writes nothing.
	changed := 0
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys := e.st.Watch(wctx)
	e.step(time.Second)
	for len(keys) > 0 {
		<-keys
		changed++
	}
	if changed != 0 {
		t.Fatalf("a steady reconcile wrote %d keys", changed)
	}
	if _, err := e.svc.CreateCluster(ctx, spec("ml-cluster", group("w", g5, 0))); !errors.As(err, new(*ExistsError)) {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestValidation(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}, p5: {"a": 4}}, nil)
	ended := e.buyPlan("old-plan", 1, placement.TargetHyperPodCluster)
	e.clk.Set(ended.End)
	epPlan := e.buyPlan("ep-plan", 1, placement.TargetEndpoint)
	okPlan := e.buyPlan("ok-plan", 2, placement.TargetHyperPodCluster)
	good := func() ClusterSpec { return spec("c1", group("g", g5, 1)) }
	tests := []struct {
		name  string
		mod   func(*ClusterSpec)
		field string
	}{
		{"bad cluster name", func(s *ClusterSpec) { s.Name = "-bad" }, "ClusterName"},
		{"long cluster name", func(s *ClusterSpec) { s.Name = strings.Repeat("a", 64) }, "ClusterName"},
		{"no groups", func(s *ClusterSpec) { s.Groups = nil }, "InstanceGroups"},
		{"too many groups", func(s *ClusterSpec) {
			for i := range 101 {
				s.Groups = append(s.Groups, group("g"+strings.Repeat("x", i%5)+string(rune('a'+i%26)), g5, 0))
			}
		}, "InstanceGroups"},
		{"duplicate group", func(s *ClusterSpec) { s.Groups = append(s.Groups, group("g", g5, 0)) }, "InstanceGroups[1].InstanceGroupName"},
		{"bad group name", func(s *ClusterSpec) { s.Groups[0].Name = "a_b" }, "InstanceGroups[0].InstanceGroupName"},
		{"unknown type", func(s *ClusterSpec) { s.Groups[0].InstanceType = "ml.nope" }, "InstanceGroups[0].InstanceType"},
		{"negative count", func(s *ClusterSpec) { s.Groups[0].Count = -1 }, "InstanceGroups[0].InstanceCount"},
		{"huge count", func(s *ClusterSpec) { s.Groups[0].Count = MaxNodesPerGroup + 1 }, "InstanceGroups[0].InstanceCount"},
		{"min above count", func(s *ClusterSpec) { s.Groups[0].MinCount = 2 }, "InstanceGroups[0].MinInstanceCount"},
		{"no role", func(s *ClusterSpec) { s.Groups[0].ExecutionRole = "" }, "InstanceGroups[0].ExecutionRole"},
		{"threads", func(s *ClusterSpec) { s.Groups[0].ThreadsPerCore = 3 }, "InstanceGroups[0].ThreadsPerCore"},
		{"recovery", func(s *ClusterSpec) { s.NodeRecovery = "Sometimes" }, "NodeRecovery"},
		{"autoscaling mode", func(s *ClusterSpec) { s.AutoScaling.Mode = "On" }, "AutoScaling.Mode"},
		{"autoscaler type", func(s *ClusterSpec) { s.AutoScaling.AutoScalerType = "CA" }, "AutoScaling.AutoScalerType"},
		{"karpenter without role", func(s *ClusterSpec) { s.AutoScaling = AutoScaling{Mode: "Enable", AutoScalerType: "Karpenter"} }, "ClusterRole"},
		{"too many tags", func(s *ClusterSpec) { s.Tags = make([]Tag, MaxTags+1) }, "Tags"},
		{"unknown plan", func(s *ClusterSpec) { s.Groups[0].Plan = placement.PlanNamed("nope") }, "InstanceGroups[0].TrainingPlanArn"},
		{"ended plan", func(s *ClusterSpec) { s.Groups[0].Plan = placement.PlanNamed(ended.Name) }, "InstanceGroups[0].TrainingPlanArn"},
		{"endpoint plan", func(s *ClusterSpec) { s.Groups[0].Plan = placement.PlanNamed(epPlan.Name) }, "InstanceGroups[0].TrainingPlanArn"},
		{"plan type differs", func(s *ClusterSpec) { s.Groups[0].Plan = placement.PlanNamed(okPlan.Name) }, "InstanceGroups[0].InstanceType"},
		{"above the plan", func(s *ClusterSpec) {
			s.Groups[0] = InstanceGroupSpec{Name: "r", Count: 3, ExecutionRole: "r", PlanArn: "arn:aws:sagemaker:us-east-1:0:training-plan/" + okPlan.Name}
		}, "InstanceGroups[0].InstanceCount"},
		{"spot on a plan", func(s *ClusterSpec) {
			s.Groups[0] = InstanceGroupSpec{Name: "r", Count: 1, ExecutionRole: "r", Plan: placement.PlanNamed(okPlan.Name), Spot: true}
		}, "InstanceGroups[0].CapacityRequirements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good()
			tt.mod(&s)
			_, err := e.svc.CreateCluster(ctx, s)
			if fe := asField(t, err); fe.Field != tt.field {
				t.Fatalf("field %q (%v), want %q", fe.Field, err, tt.field)
			}
			if cs, _ := e.svc.Clusters(ctx); len(cs) != 0 {
				t.Fatalf("stored %+v", cs)
			}
			if ns := e.nodes(""); len(ns) != 0 {
				t.Fatalf("stored nodes %+v", ns)
			}
		})
	}
	// The plan's type is taken when the group names none.
	c, err := e.svc.CreateCluster(ctx, spec("c1", InstanceGroupSpec{Name: "r", Count: 2, ExecutionRole: "r", Plan: placement.PlanNamed(okPlan.Name)}))
	if err != nil || c.Groups[0].InstanceType != p5 {
		t.Fatalf("reserved group: %+v, %v", c, err)
	}
}

// TestCapacityShortage: a create the fleet cannot hold fails with a
// CapacityError naming the group, and stores nothing.
func TestCapacityShortage(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 2}}, nil)
	_, err := e.svc.CreateCluster(ctx, spec("c1", group("ok", p5, 0), group("big", g5, 3)))
	var ce *CapacityError
	var fl *fleet.LimitError
	if !errors.As(err, &ce) || ce.Group != "big" || !errors.As(err, &fl) || fl.Available != 2 {
		t.Fatalf("err = %v", err)
	}
	if cs, _ := e.svc.Clusters(ctx); len(cs) != 0 {
		t.Fatalf("stored %+v", cs)
	}
	if ns := e.nodes(""); len(ns) != 0 {
		t.Fatalf("stored nodes %+v", ns)
	}
	if h := e.held("c1"); len(h.Instances) != 0 {
		t.Fatalf("held %+v", h)
	}
	// AddNodes past the fleet is refused the same way, writing nothing.
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("big", g5, 2))); err != nil {
		t.Fatal(err)
	}
	e.step(time.Minute)
	if _, err := e.svc.AddNodes(ctx, "c1", "big", 1, ""); !errors.As(err, &ce) {
		t.Fatalf("AddNodes: %v", err)
	}
	if c := e.cluster("c1"); c.Groups[0].Target != 2 || len(e.nodes("c1")) != 2 {
		t.Fatalf("after refused add: %+v", c)
	}
}

// TestScaleUpDown: UpdateCluster and AddNodes raise targets; scaling down
// retires empty nodes first, newest next; a leaving node with replicas is
// cordoned and leaves once empty, or after DrainTimeout.
func TestScaleUpDown(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 8}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("w", g5, 2))); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	c, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{group("w", g5, 4)}})
	if err != nil || c.Status != StatusUpdating || c.Groups[0].Target != 4 {
		t.Fatalf("update: %+v %v", c, err)
	}
	if ns := e.nodes("c1"); len(ns) != 4 || countStatus(ns, NodePending) != 2 {
		t.Fatalf("pending nodes written with the target: %+v", ns)
	}
	if _, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{}); !errors.As(err, new(*ConflictError)) {
		t.Fatalf("update while Updating: %v", err)
	}
	e.step(30 * time.Second)
	if c := e.cluster("c1"); c.Status != StatusInService {
		t.Fatalf("status %s", c.Status)
	}
	added, err := e.svc.AddNodes(ctx, "c1", "w", 1, "provisioner: 1 pending replica")
	if err != nil || len(added) != 1 || added[0].Reason != "provisioner: 1 pending replica" {
		t.Fatalf("AddNodes %+v %v", added, err)
	}
	e.step(30 * time.Second)
	ns := e.nodes("c1")
	if countStatus(ns, NodeRunning) != 5 {
		t.Fatalf("nodes %+v", ns)
	}
	// One replica fills a node (one GPU): the four oldest are busy.
	for i := range 4 {
		if _, err := e.pool.Place("r"+string(rune('0'+i)), "c1", g5, cluster.Resources{GPUs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	newest := ns[4]
	// Down to 3: the empty node goes at once, then the newest busy one
	// drains.
	if _, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{group("w", g5, 3)}}); err != nil {
		t.Fatal(err)
	}
	ns = e.nodes("c1")
	if len(ns) != 4 || countStatus(ns, NodeShuttingDown) != 1 {
		t.Fatalf("after scale-in: %+v", ns)
	}
	for _, n := range ns {
		if n.ID == newest.ID {
			t.Fatal("the empty node did not leave first")
		}
	}
	var leaving Node
	for _, n := range ns {
		if n.Status == NodeShuttingDown {
			leaving = n
		}
	}
	if leaving.ID != ns[3].ID {
		t.Fatalf("leaving %s, want the newest busy %s", leaving.ID, ns[3].ID)
	}
	if pn := nodeInPool(e, leaving.Name()); pn == nil || !pn.Cordoned {
		t.Fatalf("leaving node not cordoned: %+v", pn)
	}
	e.step(time.Minute)
	if _, err := e.svc.Node(ctx, "c1", leaving.ID); err != nil {
		t.Fatalf("left before empty or the drain timeout: %v", err)
	}
	// Its replica moves (released): it leaves.
	for _, r := range nodeInPool(e, leaving.Name()).Replicas {
		e.pool.Release(r)
	}
	e.step(time.Second)
	if _, err := e.svc.Node(ctx, "c1", leaving.ID); !errors.As(err, new(*NotFoundError)) {
		t.Fatalf("empty leaving node still there: %v", err)
	}
	if !hasEvent(e.events("c1", leaving.ID), "NodeTerminated") {
		t.Fatal("no NodeTerminated event")
	}
	if h := heldOf(e.held("c1"), g5); h != 3 {
		t.Fatalf("held %d, want 3", h)
	}
	// DeleteNodes on a busy node: it drains until DrainTimeout.
	busy := e.nodes("c1")[0]
	del, failed, err := e.svc.DeleteNodes(ctx, "c1", []string{busy.Name(), "i-00000000000000000", busy.ID}, "")
	if err != nil || len(del) != 1 || len(failed) != 2 || failed[0].Reason != NodeNotFound || failed[1].Reason != NodeNotDeletable {
		t.Fatalf("DeleteNodes %v %+v %v", del, failed, err)
	}
	if c := e.cluster("c1"); c.Groups[0].Target != 2 {
		t.Fatalf("target %d", c.Groups[0].Target)
	}
	e.step(119 * time.Second)
	if _, err := e.svc.Node(ctx, "", busy.ID); err != nil {
		t.Fatalf("left before the drain timeout: %v", err)
	}
	e.step(time.Second)
	if _, err := e.svc.Node(ctx, "", busy.ID); err == nil {
		t.Fatal("still there after the drain timeout")
	}
	if nodeInPool(e, busy.Name()) != nil {
		t.Fatal("still in the pool")
	}
	if ns := e.nodes("c1"); len(ns) != 2 || countStatus(ns, NodeRunning) != 2 {
		t.Fatalf("final nodes %+v", ns)
	}
}

func nodeInPool(e *env, name string) *cluster.Node {
	for _, n := range e.pool.Nodes() {
		if n.Name == name {
			return &n
		}
	}
	return nil
}

// TestUpdateGroups: a new group is added, a deleted group's nodes leave and
// the group goes; bad updates name their field.
func TestUpdateGroups(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}, p5: {"a": 2}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("a", g5, 1))); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	for _, tt := range []struct {
		name  string
		u     ClusterUpdate
		field string
	}{
		{"unknown group to delete", ClusterUpdate{GroupsToDelete: []string{"zz"}}, "InstanceGroupsToDelete[0]"},
		{"type change", ClusterUpdate{Groups: []InstanceGroupSpec{group("a", p5, 1)}}, "InstanceGroups[0].InstanceType"},
		{"karpenter without role", ClusterUpdate{AutoScaling: &AutoScaling{Mode: "Enable"}}, "ClusterRole"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.UpdateCluster(ctx, "c1", tt.u)
			if fe := asField(t, err); fe.Field != tt.field {
				t.Fatalf("field %s, want %s", fe.Field, tt.field)
			}
		})
	}
	if _, err := e.pool.Place("r", "c1", g5, cluster.Resources{GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	c, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{group("b", p5, 1)}, GroupsToDelete: []string{"a"},
		AutoScaling: &AutoScaling{Mode: "Enable", AutoScalerType: "Karpenter"}, ClusterRole: "arn:aws:iam::000000000000:role/autoscaler", NodeRecovery: RecoveryNone})
	if err != nil || len(c.Groups) != 2 || c.Groups[0].Status != GroupDeleting || !c.AutoScaling.Enabled() || c.NodeRecovery != RecoveryNone {
		t.Fatalf("update %+v %v", c, err)
	}
	if _, err := e.svc.AddNodes(ctx, "c1", "a", 1, ""); !errors.As(err, new(*NotFoundError)) {
		t.Fatalf("AddNodes to a deleting group: %v", err)
	}
	e.step(30 * time.Second)
	if c := e.cluster("c1"); c.Status != StatusUpdating || len(c.Groups) != 2 {
		t.Fatalf("while group a drains: %+v", c)
	}
	e.pool.Release("r")
	e.step(time.Second)
	c = e.cluster("c1")
	if c.Status != StatusInService || len(c.Groups) != 1 || c.Groups[0].Name != "b" {
		t.Fatalf("after update %+v", c)
	}
	ns := e.nodes("c1")
	if len(ns) != 1 || ns[0].Group != "b" || ns[0].Status != NodeRunning {
		t.Fatalf("nodes %+v", ns)
	}
	if h := e.held("c1"); heldOf(h, g5) != 0 || heldOf(h, p5) != 1 {
		t.Fatalf("held %+v", h)
	}
}

// TestReservedGroup: a reserved group waits for its plan, runs while it is
// active and loses its nodes at its end (Degraded, target kept).
func TestReservedGroup(t *testing.T) {
	e := newEnv(t, fleet.Capacity{p5: {"z1": 2}}, nil)
	plan := e.buyPlan("hp-plan", 2, placement.TargetHyperPodCluster)
	c, err := e.svc.CreateCluster(ctx, spec("c1", InstanceGroupSpec{Name: "r", Count: 2, ExecutionRole: "r",
		PlanArn: "arn:aws:sagemaker:us-east-1:000000000000:training-plan/hp-plan"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Groups[0].CapacityType() != CapacityReserved {
		t.Fatalf("group %+v", c.Groups[0])
	}
	// The plan is fully held: another cluster gets a CapacityError, and
	// growing past the plan is a field error.
	_, err = e.svc.CreateCluster(ctx, spec("c2", InstanceGroupSpec{Name: "r", Count: 1, ExecutionRole: "r", Plan: placement.PlanNamed("hp-plan")}))
	var ce *CapacityError
	var le *placement.LimitError
	if !errors.As(err, &ce) || ce.Group != "r" || !errors.As(err, &le) || le.Available != 0 {
		t.Fatalf("second cluster on a full plan: %v", err)
	}
	e.step(time.Minute)
	_, err = e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{{Name: "r", Count: 3, ExecutionRole: "r", Plan: placement.PlanNamed("hp-plan")}}})
	if fe := asField(t, err); fe.Field != "InstanceGroups[0].InstanceCount" {
		t.Fatalf("field %s", fe.Field)
	}
	ns := e.nodes("c1")
	if countStatus(ns, NodePending) != 2 || ns[0].Message != "waiting for training plan hp-plan to start" || ns[0].PricePerHour != 0 {
		t.Fatalf("before the plan: %+v", ns)
	}
	if c := e.cluster("c1"); c.Status != StatusInService {
		t.Fatalf("a cluster waiting only for its plan is %s", c.Status)
	}
	e.clk.Set(plan.Start)
	e.step(30 * time.Second)
	ns = e.nodes("c1")
	if countStatus(ns, NodeRunning) != 2 || ns[0].Zone != "z1" || len(e.poolNodes("c1")) != 2 {
		t.Fatalf("during the plan: %+v", ns)
	}
	if g := e.cluster("c1").Groups[0]; g.Status != GroupInService {
		t.Fatalf("group %+v", g)
	}
	if h := e.held("c1"); h.Plans["hp-plan"] != 2 {
		t.Fatalf("held %+v", h)
	}
	e.clk.Set(plan.End)
	e.step(0)
	if ns := e.nodes("c1"); len(ns) != 0 || len(e.poolNodes("c1")) != 0 {
		t.Fatalf("after the plan: %+v", ns)
	}
	c = e.cluster("c1")
	if c.Groups[0].Status != GroupDegraded || c.Groups[0].Target != 2 {
		t.Fatalf("group after the plan %+v", c.Groups[0])
	}
	evs := e.events("c1", "")
	if !hasEvent(evs, "TrainingPlanEnded") {
		t.Fatalf("events %+v", evs)
	}
	for _, ev := range evs {
		if ev.Reason == "TrainingPlanEnded" && ev.Type != "Warning" {
			t.Fatalf("event %+v", ev)
		}
	}
	if h := e.held("c1"); len(h.Plans) != 0 {
		t.Fatalf("still holds %+v", h)
	}
	e.step(time.Hour)
	if ns := e.nodes("c1"); len(ns) != 0 {
		t.Fatalf("relaunched after the plan: %+v", ns)
	}
}

// TestSpotInterruption: a spot node is warned and cordoned two minutes
// before its interruption, then replaced; the draws replay for a seed.
func TestSpotInterruption(t *testing.T) {
	run := func() (first Node, replacement Node, evs []Event) {
		e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, func(o *Options) { o.Spot.MeanTimeToInterruption = time.Hour })
		g := group("s", g5, 1)
		g.Spot = true
		if _, err := e.svc.CreateCluster(ctx, spec("c1", g)); err != nil {
			t.Fatal(err)
		}
		e.step(30 * time.Second)
		first = e.nodes("c1")[0]
		if first.CapacityType != CapacitySpot || first.PricePerHour != 3.06*0.35 || first.InterruptAt.IsZero() {
			t.Fatalf("spot node %+v", first)
		}
		if first.InterruptAt.Before(first.Launched.Add(SpotNotice + 30*time.Second)) {
			t.Fatalf("seed 7 draws an interruption too early for this test: %v", first.InterruptAt)
		}
		e.clk.Set(first.InterruptAt.Add(-SpotNotice - time.Second))
		e.step(0)
		if pn := nodeInPool(e, first.Name()); pn == nil || pn.Cordoned {
			t.Fatalf("cordoned early: %+v", pn)
		}
		e.step(time.Second)
		if pn := nodeInPool(e, first.Name()); pn == nil || !pn.Cordoned {
			t.Fatalf("not cordoned at the notice: %+v", pn)
		}
		if !hasEvent(e.events("c1", first.ID), "SpotInterruptionWarning") {
			t.Fatal("no warning")
		}
		e.step(SpotNotice - time.Second)
		if _, err := e.svc.Node(ctx, "c1", first.ID); err != nil {
			t.Fatalf("gone before its interruption: %v", err)
		}
		e.step(time.Second)
		if _, err := e.svc.Node(ctx, "c1", first.ID); err == nil || nodeInPool(e, first.Name()) != nil {
			t.Fatal("not interrupted")
		}
		ns := e.nodes("c1")
		if len(ns) != 1 || ns[0].Reason != "replaces "+first.ID || ns[0].Status != NodePending {
			t.Fatalf("replacement %+v", ns)
		}
		return first, ns[0], e.events("c1", "")
	}
	a1, r1, evs := run()
	if !hasEvent(evs, "SpotInterrupted") {
		t.Fatal("no SpotInterrupted event")
	}
	a2, r2, _ := run()
	if a1.ID != a2.ID || !a1.InterruptAt.Equal(a2.InterruptAt) || r1.ID != r2.ID || !r1.InterruptAt.Equal(r2.InterruptAt) {
		t.Fatalf("not deterministic: %v %v / %v %v", a1.InterruptAt, a2.InterruptAt, r1.InterruptAt, r2.InterruptAt)
	}
}

func TestFailNode(t *testing.T) {
	for _, tt := range []struct {
		recovery string
		replaced bool
	}{{RecoveryAutomatic, true}, {RecoveryNone, false}} {
		t.Run(tt.recovery, func(t *testing.T) {
			e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, nil)
			s := spec("c1", group("w", g5, 2))
			s.NodeRecovery = tt.recovery
			if _, err := e.svc.CreateCluster(ctx, s); err != nil {
				t.Fatal(err)
			}
			e.step(30 * time.Second)
			victim := e.nodes("c1")[0]
			if _, err := e.pool.Place("rep", "c1", g5, cluster.Resources{GPUs: 1}); err != nil {
				t.Fatal(err)
			}
			n, err := e.svc.FailNode(ctx, victim.Name())
			if err != nil || n.Status != NodeFailure || n.Message != "failed its health check" {
				t.Fatalf("FailNode %+v %v", n, err)
			}
			if nodeInPool(e, victim.Name()) != nil {
				t.Fatal("failed node still in the pool")
			}
			e.step(time.Second)
			ns := e.nodes("c1")
			g := e.cluster("c1").Groups[0]
			if tt.replaced {
				if _, err := e.svc.Node(ctx, "", victim.ID); err == nil {
					t.Fatal("failed node not terminated")
				}
				if len(ns) != 2 || !strings.Contains(ns[1].Reason, "replaces "+victim.ID+" (node recovery)") {
					t.Fatalf("nodes %+v", ns)
				}
				if !hasEvent(e.events("c1", victim.ID), "NodeRecovery") {
					t.Fatal("no NodeRecovery event")
				}
				e.step(30 * time.Second)
				if g := e.cluster("c1").Groups[0]; g.Status != GroupInService || countStatus(e.nodes("c1"), NodeRunning) != 2 {
					t.Fatalf("after recovery %+v", g)
				}
				return
			}
			if len(ns) != 2 || countStatus(ns, NodeFailure) != 1 || g.Status != GroupDegraded {
				t.Fatalf("nodes %+v group %+v", ns, g)
			}
			if !hasEvent(e.events("c1", victim.ID), "NodeFailed") {
				t.Fatal("no NodeFailed event")
			}
		})
	}
}

func TestDeleteCluster(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("ml-cluster", group("w", g5, 2))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.DeleteCluster(ctx, "ml-cluster"); !errors.As(err, new(*ConflictError)) {
		t.Fatalf("delete while Creating: %v", err)
	}
	e.step(30 * time.Second)
	e.work["ml-cluster"] = []string{"default/jsm-a"}
	_, err := e.svc.DeleteCluster(ctx, "ml-cluster")
	if err == nil || err.Error() != "cluster ml-cluster still runs deployments: default/jsm-a; delete them first" {
		t.Fatalf("delete with workloads: %v", err)
	}
	delete(e.work, "ml-cluster")
	c, err := e.svc.DeleteCluster(ctx, "ml-cluster")
	if err != nil || c.Status != StatusDeleting {
		t.Fatalf("delete: %+v %v", c, err)
	}
	e.step(time.Second)
	if _, _, err := e.svc.Cluster(ctx, "ml-cluster"); !errors.As(err, new(*NotFoundError)) {
		t.Fatalf("after delete: %v", err)
	}
	if len(e.nodes("")) != 0 || len(e.pool.Nodes()) != 0 {
		t.Fatal("nodes left")
	}
	if h := e.held("ml-cluster"); h.Owner != "" {
		t.Fatalf("holding left: %+v", h)
	}
}

// TestCrashReopen: a restart (fresh store handle, pool and service over the
// same file) keeps every node, launches none twice and leaks no capacity.
func TestCrashReopen(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 6}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("w", g5, 3))); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	if _, err := e.svc.AddNodes(ctx, "c1", "w", 2, ""); err != nil {
		t.Fatal(err)
	}
	before := e.nodes("c1")
	e.reopen() // killed right after the target change
	if got := len(e.poolNodes("c1")); got != 3 {
		t.Fatalf("primed pool has %d nodes, want 3", got)
	}
	e.step(30 * time.Second)
	after := e.nodes("c1")
	if len(after) != 5 || countStatus(after, NodeRunning) != 5 || len(e.poolNodes("c1")) != 5 {
		t.Fatalf("after restart: %d nodes %+v", len(after), after)
	}
	for i := range before {
		if before[i].ID != after[i].ID {
			t.Fatalf("node %d: %s became %s", i, before[i].ID, after[i].ID)
		}
	}
	if h := heldOf(e.held("c1"), g5); h != 5 {
		t.Fatalf("held %d, want 5", h)
	}
	// Scale in and restart before the drain completes: the node still
	// leaves, exactly once.
	if _, err := e.pool.Place("r", "c1", g5, cluster.Resources{GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.UpdateCluster(ctx, "c1", ClusterUpdate{Groups: []InstanceGroupSpec{group("w", g5, 1)}}); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	e.step(DefaultDrain)
	if ns := e.nodes("c1"); len(ns) != 1 || len(e.poolNodes("c1")) != 1 || heldOf(e.held("c1"), g5) != 1 {
		t.Fatalf("after restart mid-drain: %+v, held %d", ns, heldOf(e.held("c1"), g5))
	}
}

const DefaultDrain = 2 * time.Minute

// TestOfferings: per group, what it may still launch and at what price.
func TestOfferings(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 5}, p5: {"a": 2}}, nil)
	e.buyPlan("hp-plan", 2, placement.TargetHyperPodCluster)
	sp := group("spot", g5, 1)
	sp.Spot = true
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("od", g5, 2), sp,
		InstanceGroupSpec{Name: "res", Count: 1, ExecutionRole: "r", Plan: placement.PlanNamed("hp-plan")})); err != nil {
		t.Fatal(err)
	}
	offs, err := e.svc.Offerings(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Offering{
		{Cluster: "c1", Group: "od", InstanceType: g5, CapacityType: CapacityOnDemand, PricePerHour: 3.06, Available: 2},
		{Cluster: "c1", Group: "spot", InstanceType: g5, CapacityType: CapacitySpot, PricePerHour: 3.06 * 0.35, Available: 2},
		{Cluster: "c1", Group: "res", InstanceType: p5, CapacityType: CapacityReserved, PricePerHour: 0, Available: 1},
	}
	if len(offs) != len(want) {
		t.Fatalf("offerings %+v", offs)
	}
	for i := range want {
		if !reflect.DeepEqual(offs[i], want[i]) {
			t.Errorf("offering %d = %+v, want %+v", i, offs[i], want[i])
		}
	}
	// Available is what AddNodes then grants.
	e.step(30 * time.Second)
	if _, err := e.svc.AddNodes(ctx, "c1", "od", 2, ""); err != nil {
		t.Fatal(err)
	}
	if offs, _ := e.svc.Offerings(ctx, "c1"); offs[0].Available != 0 {
		t.Fatalf("after adding: %+v", offs[0])
	}
}

// TestSeed: the default cluster starts InService with Running nodes in the
// pool; a second Seed leaves it as it is.
func TestSeed(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, nil)
	c, err := e.svc.Seed(ctx, spec(cluster.DefaultName, InstanceGroupSpec{Name: "w", InstanceType: g5, Count: 2}))
	if err != nil || c.Status != StatusInService || c.Groups[0].ExecutionRole != e.svc.DefaultExecutionRole() {
		t.Fatalf("seed %+v %v", c, err)
	}
	if ns := e.nodes(""); countStatus(ns, NodeRunning) != 2 || len(e.poolNodes(cluster.DefaultName)) != 2 {
		t.Fatalf("seeded nodes %+v", ns)
	}
	c2, err := e.svc.Seed(ctx, spec(cluster.DefaultName, group("w", g5, 4)))
	if err != nil || c2.ID != c.ID || c2.Groups[0].Target != 2 {
		t.Fatalf("reseed %+v %v", c2, err)
	}
	e.reopen()
	if len(e.poolNodes(cluster.DefaultName)) != 2 {
		t.Fatal("prime lost seeded nodes")
	}
}

// TestEventsBounded: a cluster keeps only the newest MaxEvents events.
func TestEventsBounded(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("w", g5, 1))); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	for range 70 {
		n := e.nodes("c1")[0]
		if _, err := e.svc.FailNode(ctx, n.ID); err != nil {
			t.Fatal(err)
		}
		e.step(30 * time.Second)
		e.step(30 * time.Second)
	}
	evs := e.events("c1", "")
	if len(evs) != MaxEvents || evs[len(evs)-1].Time.Before(evs[0].Time) {
		t.Fatalf("%d events", len(evs))
	}
	var log eventLog
	if err := e.st.View(func(tx *store.Tx) error { _, err := tx.Get(KindEvents, "c1", &log); return err }); err != nil {
		t.Fatal(err)
	}
	if len(log.Events) != MaxEvents {
		t.Fatalf("stored %d", len(log.Events))
	}
}
