package nodes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

// ICETTL is how long an offering that failed with insufficient capacity is
// skipped (Karpenter's unavailable-offerings cache).
const ICETTL = 3 * time.Minute

// DefaultInterval is how often Run reconciles.
const DefaultInterval = time.Second

// State is what the controller reads each pass.
type State interface {
	Pending() []PendingReplica
	Nodes() []NodeState
	// AutoScaled are the clusters with autoscaling on.
	AutoScaled() []string
	Offerings(ctx context.Context, cluster string) ([]hyperpod.Offering, error)
	NodePools() []NodePool
	Capacity(instanceType string) (cluster.Resources, bool)
}

// Actuator carries the decisions out.
type Actuator interface {
	Launch(ctx context.Context, l Launch) error
	Disrupt(ctx context.Context, d Disruption) error
}

// Options configure a Controller; zero durations take the defaults.
type Options struct {
	State      State
	Actuator   Actuator
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	BatchIdle  time.Duration
	BatchMax   time.Duration
	Interval   time.Duration
}

type offeringKey struct {
	cluster, group, instanceType string
	capacityType                 hyperpod.CapacityType
}

// Controller is the node autoscaler's loop. Reconcile and Run must not run
// concurrently.
type Controller struct {
	o     Options
	log   *slog.Logger
	m     *metrics
	batch Batcher
	// ice holds offerings that failed with insufficient capacity, until when.
	ice map[offeringKey]time.Time
}

// New checks the options and registers the metrics.
func New(o Options) (*Controller, error) {
	if o.State == nil || o.Actuator == nil || o.Clock == nil {
		return nil, errors.New("nodes: State, Actuator and Clock are required")
	}
	if o.BatchIdle < 0 || o.BatchMax < 0 || o.Interval < 0 {
		return nil, errors.New("nodes: durations must not be negative")
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Controller{o: o, log: log, m: m, batch: Batcher{Idle: o.BatchIdle, Max: o.BatchMax}, ice: map[offeringKey]time.Time{}}, nil
}

// Run reconciles every Interval of the clock until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	t := c.o.Clock.NewTicker(c.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := c.Reconcile(ctx); err != nil {
				c.log.Error("node autoscaler pass", "err", err)
			}
		}
	}
}

// Reconcile is one pass: once the batch window closes, provision for the
// pending replicas of autoscaled clusters and launch; then consolidate those
// clusters' nodes and disrupt. It returns every error of the pass, joined.
func (c *Controller) Reconcile(ctx context.Context) error {
	now := c.o.Clock.Now()
	for k, until := range c.ice {
		if !now.Before(until) {
			delete(c.ice, k)
		}
	}
	on := map[string]bool{}
	for _, name := range c.o.State.AutoScaled() {
		on[name] = true
	}
	var pending []PendingReplica
	var ids []string
	count := map[string]int{}
	for _, r := range c.o.State.Pending() {
		if on[r.Cluster] {
			pending = append(pending, r)
			ids = append(ids, r.ID)
			count[r.Cluster]++
		}
	}
	c.m.pending.Reset()
	for name := range on {
		c.m.pending.WithLabelValues(name).Set(float64(count[name]))
	}
	var nodes []NodeState
	for _, n := range c.o.State.Nodes() {
		if on[n.Cluster] {
			nodes = append(nodes, n)
		}
	}
	pools := c.o.State.NodePools()
	ready := c.batch.Observe(now, ids)

	var errs []error
	var plan Plan
	if len(pending) > 0 {
		var offerings []hyperpod.Offering
		for name := range count {
			os, err := c.o.State.Offerings(ctx, name)
			if err != nil {
				errs = append(errs, fmt.Errorf("offerings of cluster %s: %w", name, err))
				continue
			}
			for _, o := range os {
				if _, cold := c.ice[offeringKey{o.Cluster, o.Group, o.InstanceType, o.CapacityType}]; cold {
					o.Available = 0
				}
				offerings = append(offerings, o)
			}
		}
		// Planned every pass, so nodes nominated for pending replicas are
		// kept from consolidation; launched only once the batch is ready.
		plan = Provision(pending, nodes, offerings, pools, c.o.State.Capacity)
		if ready {
			errs = append(errs, c.launch(ctx, now, pending, plan)...)
		}
	}

	for _, d := range Consolidate(now, nodes, pools, pending, plan.Nominated) {
		if err := c.o.Actuator.Disrupt(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("disrupt node %s: %w", d.Node, err))
			continue
		}
		c.m.disrupted.WithLabelValues(d.Cluster, d.Reason).Inc()
		c.log.Info("disrupting node", "cluster", d.Cluster, "node", d.Node, "nodepool", d.NodePool, "reason", d.Reason, "moves", len(d.Moves))
	}
	return errors.Join(errs...)
}

func (c *Controller) launch(ctx context.Context, now time.Time, pending []PendingReplica, plan Plan) []error {
	byID := make(map[string]*PendingReplica, len(pending))
	for i := range pending {
		byID[pending[i].ID] = &pending[i]
	}
	var errs []error
	for _, u := range plan.Unschedulable {
		c.m.decisions.WithLabelValues(byID[u.ID].Cluster, "unschedulable").Inc()
		c.log.Warn("replica fits no offering", "replica", u.ID, "reason", u.Reason)
	}
	for _, l := range plan.Launches {
		err := c.o.Actuator.Launch(ctx, l)
		var ce *hyperpod.CapacityError
		switch {
		case errors.As(err, &ce):
			c.ice[offeringKey{l.Cluster, l.Group, l.InstanceType, l.CapacityType}] = now.Add(ICETTL)
			c.m.decisions.WithLabelValues(l.Cluster, "insufficient_capacity").Inc()
			c.log.Warn("insufficient capacity; offering skipped", "cluster", l.Cluster, "group", l.Group,
				"instanceType", l.InstanceType, "capacityType", l.CapacityType, "for", ICETTL, "err", err)
		case err != nil:
			c.m.decisions.WithLabelValues(l.Cluster, "error").Inc()
			errs = append(errs, fmt.Errorf("launch %d %s in group %s of cluster %s: %w", l.Count, l.InstanceType, l.Group, l.Cluster, err))
		default:
			c.m.decisions.WithLabelValues(l.Cluster, "launch").Inc()
			c.m.launched.WithLabelValues(l.Cluster, string(l.CapacityType)).Add(float64(l.Count))
			for _, id := range l.Replicas {
				c.m.latency.WithLabelValues(l.Cluster).Observe(max(0, now.Sub(byID[id].Since).Seconds()))
			}
			c.log.Info("launching nodes", "cluster", l.Cluster, "group", l.Group, "instanceType", l.InstanceType,
				"capacityType", l.CapacityType, "count", l.Count, "nodepool", l.NodePool, "replicas", len(l.Replicas))
		}
	}
	return errs
}
