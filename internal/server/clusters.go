package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/autoscale/nodes"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/nodeapi"
	"github.com/capstan-dev/capstan/internal/spaces"
	"github.com/capstan-dev/capstan/internal/store"
)

// clusters is the HyperPod half of capstan: the clusters and their nodes,
// the node pool deployments are placed on, and the node autoscaler.
type clusters struct {
	pool       *cluster.Cluster
	svc        *hyperpod.Service
	autoscaler *nodes.Controller
	workloads  *workloadsAdapter
}

// newClusters builds the cluster service over the calendar fl and seeds the
// default cluster from the config at first start. The deployment service is
// set on the returned workloads adapter once it exists.
func newClusters(ctx context.Context, cfg config.Config, st *store.Store, fl *capacity.Calendar, cat *catalog.Catalog,
	clk clock.Clock, log *slog.Logger, reg prometheus.Registerer, resync time.Duration) (*clusters, error) {
	pool := cluster.NewPool(clk)
	wl := &workloadsAdapter{}
	cc := cfg.Cluster
	launch := func(instanceType string) time.Duration {
		if d, ok := cc.LaunchTimes[instanceType]; ok {
			return d.Duration
		}
		return cc.LaunchTime.Duration
	}
	svc, err := hyperpod.New(hyperpod.Options{Store: st, Clock: clk, Logger: log, Registerer: reg, Catalog: cat,
		Capacity: fl, Plans: fl, PlanNodes: fl, Pool: pool, Workloads: wl, LaunchTime: launch,
		Spot: hyperpod.SpotOptions{Seed: cc.Spot.Seed, MeanTimeToInterruption: cc.Spot.MeanTimeToInterruption.Duration,
			PriceFactor: cc.Spot.PriceFactor},
		DrainTimeout: cc.DrainTimeout.Duration, Resync: resync, Region: cfg.Region, AccountID: cfg.AccountID})
	if err != nil {
		return nil, err
	}
	if _, err := svc.Seed(ctx, seedSpec(cfg, cat)); err != nil {
		return nil, fmt.Errorf("cluster %s (from cluster.instanceGroups): %w", cluster.DefaultName, err)
	}
	if err := svc.Prime(ctx); err != nil {
		return nil, err
	}
	// The autoscaler looks as often as its idle window is short, so a batch
	// is provisioned when it is ready, not at the next whole second.
	interval := nodes.DefaultInterval
	if idle := cc.Autoscaler.BatchIdle.Duration; idle > 0 && idle < interval {
		interval = idle
	}
	as, err := nodes.New(nodes.Options{State: &autoscalerState{svc: svc, pool: pool, store: st, cat: cat}, Interval: interval,
		Actuator: autoscalerActuator{svc}, Clock: clk, Logger: log, Registerer: reg,
		BatchIdle: cc.Autoscaler.BatchIdle.Duration, BatchMax: cc.Autoscaler.BatchMax.Duration})
	if err != nil {
		return nil, err
	}
	return &clusters{pool: pool, svc: svc, autoscaler: as, workloads: wl}, nil
}

// seedSpec is the default cluster as the config describes it. Without
// configured groups it is the default groups, each cut to what the fleet
// has of its type (a fleet configured for other types seeds fewer nodes,
// down to empty groups, instead of failing the start); configured groups are taken as
// written, and a shortage is an error that names them.
func seedSpec(cfg config.Config, cat *catalog.Catalog) hyperpod.ClusterSpec {
	var groups []config.InstanceGroup
	if gs := cfg.Cluster.InstanceGroups; len(gs) > 0 {
		groups = gs
	} else {
		fleet := cfg.FleetCapacity(cat)
		for _, g := range cluster.DefaultInstanceGroups() {
			total := 0
			for _, n := range fleet[g.InstanceType] {
				total += max(n, 0)
			}
			groups = append(groups, config.InstanceGroup{Name: g.Name, InstanceType: g.InstanceType, Count: min(g.Count, total)})
		}
	}
	role := fmt.Sprintf("arn:aws:iam::%s:role/capstan-default-cluster", cfg.AccountID)
	// EKS-orchestrated, as every cluster HyperPod's one-click setup makes.
	spec := hyperpod.ClusterSpec{Name: cluster.DefaultName, NodeRecovery: hyperpod.RecoveryAutomatic,
		EksClusterArn: defaultEksClusterArn(cfg)}
	for _, g := range groups {
		spec.Groups = append(spec.Groups, hyperpod.InstanceGroupSpec{Name: g.Name, InstanceType: g.InstanceType, Count: g.Count,
			ExecutionRole: role, MIGLayout: g.MIGLayout})
	}
	return spec
}

// defaultEksClusterArn is the EKS cluster the default cluster is
// orchestrated by (Orchestrator.Eks.ClusterArn in DescribeCluster): one of
// its name, in the configured account and region.
func defaultEksClusterArn(cfg config.Config) string {
	return fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", cfg.Region, cfg.AccountID, cluster.DefaultName)
}

func (c *clusters) handler(st *store.Store, cat *catalog.Catalog, clk clock.Clock, log *slog.Logger) (*nodeapi.Handler, error) {
	return nodeapi.New(nodeapi.Options{Store: st, Clusters: c.svc, Pool: c.pool, Catalog: cat, Clock: clk, Logger: log})
}

// workloadsAdapter tells the cluster service what runs on a cluster: the
// manifests' deployments and the spaces placed there.
type workloadsAdapter struct {
	dep    atomic.Pointer[deployment.Service]
	spaces atomic.Pointer[spaces.Service]
}

func (w *workloadsAdapter) InCluster(name string) []string {
	var out []string
	if d := w.dep.Load(); d != nil {
		names, err := d.InCluster(name)
		if err != nil {
			// Refuse the delete rather than lose track of what runs there.
			return []string{"(unknown: " + err.Error() + ")"}
		}
		out = append(out, names...)
	}
	if s := w.spaces.Load(); s != nil {
		names, err := s.InCluster(name)
		if err != nil {
			return []string{"(unknown: " + err.Error() + ")"}
		}
		out = append(out, names...)
	}
	return out
}

// autoscalerState is what the node autoscaler reads: the pool's pending
// replicas and nodes, the clusters that autoscale, their offerings and the
// applied NodePools.
type autoscalerState struct {
	svc   *hyperpod.Service
	pool  *cluster.Cluster
	store *store.Store
	cat   *catalog.Catalog
}

// Pending is the pool's pending replicas, MIG slices included: the
// provisioner launches nodes of a group whose layout has the slice.
func (s *autoscalerState) Pending() []nodes.PendingReplica {
	ps := s.pool.Pending()
	out := make([]nodes.PendingReplica, 0, len(ps))
	for _, p := range ps {
		out = append(out, nodes.PendingReplica{ID: p.ReplicaID, Cluster: p.Cluster, InstanceTypes: p.InstanceTypes, Request: p.Request, Since: p.Since})
	}
	return out
}

// Nodes joins the cluster service's nodes (every status but the gone) with
// the pool's view of the running ones.
func (s *autoscalerState) Nodes() []nodes.NodeState {
	hs, err := s.svc.Nodes(context.Background(), "")
	if err != nil {
		return nil
	}
	pool := map[string]cluster.Node{}
	for _, n := range s.pool.Nodes() {
		pool[n.Name] = n
	}
	out := make([]nodes.NodeState, 0, len(hs))
	for _, h := range hs {
		if h.Status == hyperpod.NodeFailure {
			continue
		}
		// Every node of an autoscaled cluster is the autoscaler's to
		// consolidate, as HyperPod's Karpenter scales instance groups that
		// start above zero down to zero.
		ns := nodes.NodeState{Name: h.Name(), Cluster: h.Cluster, Group: h.Group, InstanceType: h.InstanceType,
			CapacityType: h.CapacityType, PricePerHour: h.PricePerHour, Launching: h.Status == hyperpod.NodePending,
			Deleting: h.Status == hyperpod.NodeShuttingDown, Managed: true, Since: h.Ready}
		if it, err := s.cat.InstanceType(h.InstanceType); err == nil {
			ns.Capacity = cluster.CapacityOf(it)
		}
		if pn, ok := pool[ns.Name]; ok {
			ns.Deleting = ns.Deleting || pn.Cordoned
			ns.Allocated, ns.Since = pn.Allocated, pn.Since
			// GPUs split into MIG slices take no whole-GPU replica.
			partitioned, _ := nodes.MIGRoom(pn.Partitions)
			ns.Capacity.GPUs -= partitioned
			ns.Slices = pn.Slices
			for _, p := range pn.Placed {
				ns.Replicas = append(ns.Replicas, nodes.PlacedReplica{ID: p.ReplicaID, Request: p.Request, InstanceType: p.InstanceType})
			}
		} else if parts, err := s.svc.Partitions(h.InstanceType, h.MIGLayout); err == nil {
			// Launching: every slice of its layout will be free.
			partitioned, _ := nodes.MIGRoom(parts)
			ns.Capacity.GPUs -= partitioned
			for gpu, profiles := range parts {
				for _, p := range profiles {
					ns.Slices = append(ns.Slices, cluster.Slice{GPU: gpu, Profile: p})
				}
			}
		}
		out = append(out, ns)
	}
	return out
}

func (s *autoscalerState) AutoScaled() []string {
	cs, err := s.svc.Clusters(context.Background())
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range cs {
		if autoScaled(c) {
			out = append(out, c.Name)
		}
	}
	return out
}

// autoScaled says whether the node autoscaler adds nodes to c.
func autoScaled(c hyperpod.Cluster) bool {
	return c.AutoScaling.Enabled() && c.Status != hyperpod.StatusDeleting
}

// provisioned reports whether the node autoscaler adds nodes to cluster
// name for its pending replicas (deployment.Options.Provisioned).
func (c *clusters) provisioned(name string) bool {
	cl, _, err := c.svc.Cluster(context.Background(), name)
	return err == nil && autoScaled(cl)
}

// tieredStorage is cluster name's tiered storage share of a node's memory
// and whether it is on (deployment.Options.TieredStorage).
func (c *clusters) tieredStorage(name string) (int, bool) {
	cl, _, err := c.svc.Cluster(context.Background(), name)
	if err != nil || !cl.TieredStorage.Enabled() {
		return 0, false
	}
	return cl.TieredStorage.MemoryPercent, true
}

// groups lists cluster name's instance groups of instanceType with their
// node counts (deployment.Options.Groups); none when the cluster cannot be
// read.
func (c *clusters) groups(name, instanceType string) []deployment.GroupInfo {
	_, views, err := c.svc.Cluster(context.Background(), name)
	if err != nil {
		return nil
	}
	var out []deployment.GroupInfo
	for _, v := range views {
		if v.InstanceType == instanceType {
			out = append(out, deployment.GroupInfo{Name: v.Name, Target: v.Target, Running: v.Current, MIGLayout: v.MIGLayout})
		}
	}
	return out
}

func (s *autoscalerState) Offerings(ctx context.Context, name string) ([]hyperpod.Offering, error) {
	return s.svc.Offerings(ctx, name)
}

func (s *autoscalerState) NodePools() []nodes.NodePool {
	ps, err := nodeapi.Pools(s.store)
	if err != nil {
		return nil
	}
	return ps
}

func (s *autoscalerState) Capacity(instanceType string) (cluster.Resources, bool) {
	it, err := s.cat.InstanceType(instanceType)
	if err != nil {
		return cluster.Resources{}, false
	}
	return cluster.CapacityOf(it), true
}

// autoscalerActuator carries the node autoscaler's decisions out through the
// cluster service, like any other client of it.
type autoscalerActuator struct{ svc *hyperpod.Service }

func (a autoscalerActuator) Launch(ctx context.Context, l nodes.Launch) error {
	_, err := a.svc.AddNodes(ctx, l.Cluster, l.Group, l.Count, l.Reason)
	return err
}

func (a autoscalerActuator) Disrupt(ctx context.Context, d nodes.Disruption) error {
	_, failed, err := a.svc.DeleteNodes(ctx, d.Cluster, []string{d.Node}, "consolidation: "+d.Reason)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("disrupt %s: %s", d.Node, failed[0].Message)
	}
	return nil
}
