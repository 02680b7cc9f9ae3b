package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/reconcile"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// Options tune the controller.
type Options struct {
	// Engine is the engine name put in replica specs ("sim").
	Engine string
	// StartTimeout is how long new replicas may take to become healthy
	// before the endpoint fails (create) or the update is rolled back.
	StartTimeout time.Duration
	// Resync is how often every endpoint is reconciled regardless of events.
	Resync time.Duration
	// Reservations, when set, holds reserved-only deployments until their
	// plan starts and takes their instances back when it ends.
	Reservations placement.Plans
	// Alarms, when set, are checked while an update whose policy names
	// alarms runs; one firing rolls the update back.
	Alarms Alarms
	// Load, when set, reports requests in flight and held per endpoint;
	// serverless variants scale on it (without it they only follow
	// activations and provisioned concurrency).
	Load LoadReader
	// Costs, when set, is charged what each request to a serverless
	// variant costs.
	Costs Costs
	// Registerer, when set, registers the controller's metrics.
	Registerer prometheus.Registerer
	// ServerlessIdleTimeout is how long a serverless variant with nothing
	// in flight keeps its replicas before scaling back to its provisioned
	// concurrency (default DefaultServerlessIdleTimeout).
	ServerlessIdleTimeout time.Duration
}

// Alarms arms named alarms for an endpoint's update.
type Alarms interface {
	// Known returns an error naming the alarms among names that are not
	// defined.
	Known(names []string) error
	// Arm starts watching names for endpoint from now on.
	Arm(endpoint string, names []string) (AlarmWatch, error)
}

// AlarmWatch reports whether one of its alarms fired since it was armed.
type AlarmWatch interface {
	Check() (fired bool, reason string)
}

func (o *Options) defaults() {
	if o.Engine == "" {
		o.Engine = "sim"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Minute
	}
	if o.Resync <= 0 {
		o.Resync = time.Second
	}
	if o.ServerlessIdleTimeout <= 0 {
		o.ServerlessIdleTimeout = DefaultServerlessIdleTimeout
	}
}

// Controller translates endpoints into replica sets and drives them through
// the serving engine: it decides what runs, the engine runs it.
type Controller struct {
	store *store.Store
	fleet placement.Allocator
	eng   *serving.Engine
	clock clock.Clock
	log   *slog.Logger
	opts  Options

	queue *reconcile.Queue

	mu      sync.Mutex
	watches map[string]AlarmWatch       // endpoint/generation → armed alarms
	sl      map[string]*serverlessState // endpoint/variant → scaling state
	m       *endpointMetrics
}

var _ gateway.Activator = (*Controller)(nil)

// NewController returns a controller; call Run to start its loop, or
// Reconcile to drive one endpoint synchronously.
func NewController(s *store.Store, f placement.Allocator, eng *serving.Engine, c clock.Clock, log *slog.Logger, o Options) *Controller {
	o.defaults()
	if log == nil {
		log = slog.Default()
	}
	ctrl := &Controller{store: s, fleet: f, eng: eng, clock: c, log: log, opts: o, watches: map[string]AlarmWatch{},
		sl: map[string]*serverlessState{}, m: newEndpointMetrics(o.Registerer, log)}
	if o.Registerer != nil {
		if err := o.Registerer.Register(newStateCollector(ctrl)); err != nil {
			log.Warn("register endpoint state metrics", "err", err)
		}
	}
	ctrl.queue = reconcile.New(ctrl.Reconcile, func(name string, err error) {
		if !errors.Is(err, errConflict) {
			log.Warn("reconcile", "endpoint", name, "err", err)
		}
	})
	return ctrl
}

// errConflict means the record changed under the controller; it re-reads.
var errConflict = errors.New("endpoint changed concurrently")

// Run reconciles on store changes, runtime events and a resync tick until ctx
// is done, then waits for in-flight reconciles.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Start(ctx)
	watch := c.store.Watch(ctx)
	go c.eng.Runtime().Subscribe(ctx, func(r runtime.Replica) {
		if r.Spec.Endpoint != "" && r.Spec.Controller == "" {
			c.Enqueue(r.Spec.Endpoint)
		}
	})
	tick := c.clock.NewTicker(c.opts.Resync)
	defer tick.Stop()
	reconcile.Loop(ctx, c.queue, watch, func(k store.Key) {
		if k.Kind == KindEndpoint {
			c.Enqueue(k.Name)
		}
	}, tick.C(), c.enqueueAll)
}

func (c *Controller) enqueueAll() {
	eps, err := c.list()
	if err != nil {
		c.log.Error("list endpoints", "err", err)
		return
	}
	for _, ep := range eps {
		c.Enqueue(ep.Name)
	}
}

func (c *Controller) list() ([]Endpoint, error) {
	var eps []Endpoint
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		eps, err = store.List[Endpoint](tx, KindEndpoint)
		return err
	})
	return eps, err
}

// Enqueue asks for a reconcile of name. At most one reconcile per endpoint runs
// at a time; a request during one runs it again afterwards.
func (c *Controller) Enqueue(name string) { c.queue.Enqueue(name) }

func (c *Controller) load(name string) (Endpoint, bool, error) {
	var ep Endpoint
	var found bool
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		found, err = tx.Get(KindEndpoint, name, &ep)
		return err
	})
	return ep, found, err
}

// save writes ep if the stored version is still ep.Version, with the fleet
// holding set to what ep still needs; ep.Version is bumped on success.
func (c *Controller) save(ep *Endpoint, release bool) error {
	err := c.store.Update(func(tx *store.Tx) error {
		var cur Endpoint
		found, err := tx.Get(KindEndpoint, ep.Name, &cur)
		if err != nil {
			return err
		}
		if !found || cur.Version != ep.Version {
			return errConflict
		}
		if release {
			var want placement.Want
			if ep.Status != StatusFailed {
				if want, err = instanceCounts(ep.Current, ep.Pending); err != nil {
					return err
				}
			}
			if err := c.fleet.Set(tx, ep.Name, want); err != nil {
				return err
			}
		}
		ep.Version++
		ep.LastModifiedTime = c.clock.Now().UTC().Truncate(time.Millisecond)
		return tx.Put(KindEndpoint, ep.Name, ep)
	})
	if err != nil {
		ep.Version = -1 // force a re-read on any further save
	}
	return err
}

// Reconcile moves endpoint name one or more steps towards its recorded intent.
// It is safe to call at any time, from any state, after a crash.
func (c *Controller) Reconcile(ctx context.Context, name string) error {
	ep, found, err := c.load(name)
	if err != nil {
		return err
	}
	if !found {
		c.eng.Router().DeleteRoute(name)
		c.disarm(name)
		c.forgetServerless(name)
		return c.stopOrphans(ctx, name, nil)
	}
	if ep.ManagedBy != "" {
		// A deployment controller owns its replicas and route.
		return nil
	}
	switch ep.Status {
	case StatusDeleting:
		return c.reconcileDelete(ctx, &ep)
	case StatusFailed:
		if ep.ReservationExpired {
			// Stays describable and invocable: every call gets the expiry.
			c.eng.Router().SetRoute(gateway.Route{Endpoint: name, Unavailable: gateway.UnavailableExpired})
		} else {
			c.eng.Router().DeleteRoute(name)
		}
		return c.stopOrphans(ctx, name, nil)
	}
	if c.planEnded(ep.Current) != nil && !ep.ReservationExpired {
		return c.expire(ctx, &ep)
	}

	// Serverless variants follow their load.
	if c.scaleServerless(&ep) {
		if err := c.save(&ep, false); err != nil {
			return err
		}
	}
	// Keep up the serving side and its route.
	if ep.Current != nil {
		if err := c.ensureStarted(ctx, &ep, ep.Current); err != nil {
			c.log.Warn("start serving replica", "endpoint", name, "err", err)
		}
		c.eng.Router().SetRoute(c.route(&ep))
	}
	if len(ep.Retiring) > 0 {
		if err := c.retire(ctx, &ep); err != nil {
			return err
		}
	}
	if ep.Pending != nil {
		return c.reconcileRollout(ctx, &ep, 0)
	}
	if ep.Current != nil {
		return c.reconcileScale(ctx, &ep)
	}
	return nil
}

// Prime sets the route of every endpoint from its record, before the
// listener opens: after a restart an endpoint is known at once, and its
// requests wait for its replicas instead of failing as unknown.
func (c *Controller) Prime() error {
	eps, err := c.list()
	if err != nil {
		return err
	}
	for i := range eps {
		ep := &eps[i]
		switch {
		case ep.ManagedBy != "" || ep.Status == StatusDeleting:
		case ep.ReservationExpired:
			c.eng.Router().SetRoute(gateway.Route{Endpoint: ep.Name, Unavailable: gateway.UnavailableExpired})
		case ep.Status != StatusFailed && ep.Current != nil:
			c.eng.Router().SetRoute(c.route(ep))
		}
	}
	return nil
}

// Activate implements gateway.Activator: a request reached an endpoint with
// no healthy replica (a restart, or a rolling update on a plan with no spare
// instance). The request is held; the reconcile brings a replica up.
func (c *Controller) Activate(name string) { c.Enqueue(name) }

func replicaID(ep string, v *VariantState, gen, i int) string {
	return fmt.Sprintf("%s.%s.gen%d.%d", ep, v.Name, gen, i)
}

// spec is the replica spec of one member of v.
func (c *Controller) spec(ep *Endpoint, v *VariantState, id string) runtime.ReplicaSpec {
	eng := v.Engine
	if eng == "" {
		eng = c.opts.Engine
	}
	return runtime.ReplicaSpec{ID: id, Endpoint: ep.Name, Variant: v.Name, Engine: eng,
		Model: v.Model, ModelDir: v.ModelDir, GPU: v.GPU, TensorParallel: max(v.GPUCount, 1),
		Labels: map[string]string{"endpoint": ep.Name, "variant": v.Name, "instance_type": v.InstanceType}}
}

// ensureStarted starts every member of dep that the runtime does not run.
// Member ids are in the record before their Start, so a crash between the two
// only means the Start happens on restart.
func (c *Controller) ensureStarted(ctx context.Context, ep *Endpoint, dep *Deployment) error {
	_, err := c.startMissing(ctx, ep, dep)
	return err
}

// startMissing is ensureStarted, also counting the replicas it started.
func (c *Controller) startMissing(ctx context.Context, ep *Endpoint, dep *Deployment) (int, error) {
	started := 0
	var errs []error
	for i := range dep.Variants {
		v := &dep.Variants[i]
		if v.ModelError != "" {
			return started, errors.New(v.ModelError)
		}
		for _, id := range v.Replicas {
			if ctx.Err() != nil {
				// Shutting down: stop promptly; the next start resumes.
				return started, ctx.Err()
			}
			ok, err := c.eng.Ensure(ctx, c.spec(ep, v, id))
			if err != nil {
				errs = append(errs, fmt.Errorf("start replica %s: %w", id, err))
			} else if ok {
				started++
			}
		}
	}
	return started, errors.Join(errs...)
}

// CrashLoopFailures is how many failed starts in a row of one replica
// fail an endpoint's creation or update before its start timeout.
const CrashLoopFailures = 3

// crashLooping returns the first of ids whose runs failed CrashLoopFailures
// times in a row.
func (c *Controller) crashLooping(ids []string) (string, runtime.Replica, bool) {
	for _, id := range ids {
		if r, ok := c.eng.Replica(id); ok && r.Failures >= CrashLoopFailures && r.State != runtime.StateHealthy {
			return id, r, true
		}
	}
	return "", runtime.Replica{}, false
}

func variantOf(d *Deployment, name string) *VariantState {
	if d == nil {
		return nil
	}
	for i := range d.Variants {
		if d.Variants[i].Name == name {
			return &d.Variants[i]
		}
	}
	return nil
}

// pooled reports whether the update in progress serves both revisions
// from one pool (rolling) rather than by traffic share (blue/green).
func pooled(ep *Endpoint) bool { return ep.Rollout != nil && ep.Rollout.Policy.Rolling != nil }

// route is the endpoint's traffic split: the healthy, non-retiring replicas
// of the serving side and, during an update, of the new side (pooled with
// the old under a rolling policy, or at its traffic share under blue/green).
func (c *Controller) route(ep *Endpoint) gateway.Route {
	r := gateway.Route{Endpoint: ep.Name}
	if ep.ReservationExpired {
		r.Unavailable = gateway.UnavailableExpired
		return r
	}
	retiring := map[string]bool{}
	for _, id := range ep.Retiring {
		retiring[id] = true
	}
	live := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if !retiring[id] {
				out = append(out, id)
			}
		}
		return out
	}
	names := []string{}
	for _, d := range []*Deployment{ep.Current, ep.Pending} {
		if d == nil {
			continue
		}
		for _, v := range d.Variants {
			if !slices.Contains(names, v.Name) {
				names = append(names, v.Name)
			}
		}
	}
	backends := 0
	for _, name := range names {
		if sv := variantOf(ep.Pending, name); sv != nil && sv.Serverless != nil {
			r.MaxConcurrency += sv.Serverless.MaxConcurrency
		} else if sv := variantOf(ep.Current, name); sv != nil && sv.Serverless != nil {
			r.MaxConcurrency += sv.Serverless.MaxConcurrency
		}
		cur, pen := variantOf(ep.Current, name), variantOf(ep.Pending, name)
		if ep.Current == nil {
			cur, pen = pen, nil // a create: the route opens with the first deployment
		}
		if cur == nil {
			cur, pen = pen, nil
		}
		vr := gateway.VariantRoute{Name: name, Weight: cur.Weight, RoutingStrategy: cur.RoutingStrategy, Model: cur.Model,
			Backends: c.eng.Backends(live(cur.Replicas))}
		c.serverlessRoute(&vr, ep.Name, cur)
		if pen == nil {
			backends += len(vr.Backends)
			r.Variants = append(r.Variants, vr)
			continue
		}
		nb := c.eng.Backends(live(pen.Replicas))
		if pooled(ep) {
			vr.Weight, vr.RoutingStrategy, vr.Model = pen.DesiredWeight, pen.RoutingStrategy, pen.Model
			vr.Backends = append(vr.Backends, nb...)
			backends += len(vr.Backends)
			r.Variants = append(r.Variants, vr)
			continue
		}
		share := pen.Share
		if ep.Rollout != nil && ep.Rollout.RollingBack {
			share = 1 - cur.Share
		}
		vr.Weight = cur.Weight * (1 - share)
		nr := gateway.VariantRoute{Name: name, Weight: pen.DesiredWeight * share, RoutingStrategy: pen.RoutingStrategy, Model: pen.Model,
			Backends: nb, Revision: fmt.Sprintf("gen%d", ep.Pending.Generation)}
		c.serverlessRoute(&nr, ep.Name, pen)
		backends += len(vr.Backends) + len(nb)
		r.Variants = append(r.Variants, vr, nr)
	}
	if backends == 0 && ep.Status != StatusCreating {
		// Nothing healthy yet (a restart, or a rolling update's gap): hold
		// requests until a replica is up rather than fail them.
		r.Activator = c
	}
	return r
}

// retire drains and stops ep.Retiring (already out of the route) and records it.
func (c *Controller) retire(ctx context.Context, ep *Endpoint) error {
	if err := c.eng.RetireAll(ctx, ep.Retiring); err != nil {
		return err
	}
	ep.Retiring = nil
	return c.save(ep, true)
}

// reconcileRollout brings up Pending (a create, or an update from Current)
// step by step under the update's strategy, and rolls it back when it fails.
//
// A pass that records or starts replicas runs again at once (up to twice),
// so replicas that are healthy as soon as they start move the rollout on in
// the same reconcile.
func (c *Controller) reconcileRollout(ctx context.Context, ep *Endpoint, pass int) error {
	p := ep.Pending
	now := c.clock.Now()
	if pl := c.planEnded(p); pl != nil {
		return c.fail(ctx, ep, fmt.Sprintf("training plan %s ended at %s before the deployment was up", pl.Name, pl.End.UTC().Format(time.RFC3339)))
	}
	// A reserved-only deployment waits (in Creating/Updating) until its plan
	// starts; the deployment (and its start timeout) begins when the wait ends.
	waitChanged, held, wasHeld := false, false, false
	for i := range p.Variants {
		v := &p.Variants[i]
		msg := ""
		if pl, ok := c.plan(v); ok && now.Before(pl.Start) {
			msg = fmt.Sprintf("Waiting for training plan %s to start at %s.", pl.Name, pl.Start.UTC().Format(time.RFC3339))
			held = true
		}
		wasHeld = wasHeld || v.Waiting != ""
		if v.Waiting != msg {
			v.Waiting = msg
			waitChanged = true
		}
	}
	if wasHeld && !held {
		p.StartTime = now.UTC().Truncate(time.Millisecond)
		if ep.Rollout != nil {
			ep.Rollout.Start = p.StartTime
		}
	}
	if waitChanged {
		if err := c.save(ep, false); err != nil {
			return err
		}
	}
	if held {
		return nil
	}
	// A record written before counts were capped may ask for any number:
	// such a deployment fails rather than numbering that many replicas.
	for i := range p.Variants {
		if err := checkCount(p.Variants[i].Name, p.Variants[i].DesiredCount); err != nil {
			return c.fail(ctx, ep, err.Error())
		}
	}
	policy := serving.Policy{}
	rollingBack := false
	if ep.Rollout != nil {
		policy, rollingBack = ep.Rollout.Policy, ep.Rollout.RollingBack
	}
	if !rollingBack && ep.Current != nil && ep.Rollout != nil {
		if d := policy.MaxDuration; d > 0 && now.Sub(ep.Rollout.Start) > d {
			return c.fail(ctx, ep, fmt.Sprintf("the update did not finish within its maximum execution time of %s", d))
		}
		if fired, why := c.checkAlarms(ep); fired {
			return c.fail(ctx, ep, why)
		}
	}
	up, down, strategy := ep.Pending, ep.Current, policy.Strategy()
	if rollingBack {
		up, down, strategy = ep.Current, ep.Pending, policy.RollbackStrategy()
	}
	changed, done := false, true
	var waiting string
	for i := range up.Variants {
		v := &up.Variants[i]
		o := variantOf(down, v.Name)
		healthy := 0
		for _, id := range v.Replicas {
			if c.eng.Healthy(id) {
				healthy++
			} else if waiting == "" {
				if r, ok := c.eng.Replica(id); ok {
					waiting = fmt.Sprintf("replica %s is %s: %s", id, r.State, r.Message)
				}
			}
		}
		// A replica that keeps failing before it is ever healthy (an
		// engine that cannot load its model) fails the change now, with
		// the engine's own words, rather than at the start timeout.
		if id, r, ok := c.crashLooping(v.Replicas); ok {
			return c.fail(ctx, ep, fmt.Sprintf("instance %s failed %d times in a row while starting: %s", id, r.Failures, r.LastFailure))
		}
		// Start timeout: recorded replicas that are not all healthy since
		// the step that recorded them.
		if healthy < len(v.Replicas) && now.Sub(laterOf(p.StartTime, v.StepAt)) > c.opts.StartTimeout {
			if waiting == "" {
				waiting = "not started"
			}
			return c.fail(ctx, ep, fmt.Sprintf("instances did not become healthy within %s (%s)", c.opts.StartTimeout, waiting))
		}
		want := max(v.Want, len(v.Replicas))
		old := 0
		if o != nil {
			old = len(o.Replicas)
		}
		prog := serving.Progress{Target: v.DesiredCount, New: want, NewHealthy: healthy, NewBlocked: want - len(v.Replicas),
			Old: old, Share: v.Share}
		if !v.StepAt.IsZero() {
			prog.Since = now.Sub(v.StepAt)
		}
		step := strategy.Next(prog)
		if serving.Changed(prog, step) {
			v.StepAt = now.UTC()
			changed = true
		}
		v.Want, v.Share = step.New, step.Share
		// Old side first, so what it gives up is room for the new side.
		if o != nil && step.Old < len(o.Replicas) {
			var victims []string
			o.Replicas, victims = c.eng.Victims(o.Replicas, step.Old)
			ep.Retiring = append(ep.Retiring, victims...)
		}
		room := MaxInstancesPerVariant
		if v.Hold > 0 {
			room = v.Hold - len(v.Replicas)
			if o != nil {
				room -= len(o.Replicas)
			}
		}
		for len(v.Replicas) < step.New && room > 0 {
			v.Replicas = append(v.Replicas, replicaID(ep.Name, v, up.Generation, v.NextIndex))
			v.NextIndex++
			room--
		}
		if len(v.Replicas) > step.New {
			var victims []string
			v.Replicas, victims = c.eng.Victims(v.Replicas, step.New)
			ep.Retiring = append(ep.Retiring, victims...)
		}
		done = done && step.Done
	}
	if done {
		return c.finish(ctx, ep)
	}
	if changed {
		if err := c.save(ep, true); err != nil {
			return err
		}
		if ep.Current != nil {
			c.eng.Router().SetRoute(c.route(ep))
		}
		if len(ep.Retiring) > 0 {
			if err := c.retire(ctx, ep); err != nil {
				return err
			}
		}
	}
	started, err := c.startMissing(ctx, ep, up)
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down: the record stays as it is and the next start resumes.
			return ctx.Err()
		}
		return c.fail(ctx, ep, err.Error())
	}
	if ep.Current != nil {
		c.eng.Router().SetRoute(c.route(ep))
	}
	if (changed || started > 0) && pass < 2 {
		return c.reconcileRollout(ctx, ep, pass+1)
	}
	return nil
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// finish ends a rollout whose every variant is done: forward, the new side
// becomes the serving one; rolled back, the old side serves on and the
// failure is reported.
func (c *Controller) finish(ctx context.Context, ep *Endpoint) error {
	ro := ep.Rollout
	keep, drop := ep.Pending, ep.Current
	if ro != nil && ro.RollingBack {
		keep, drop = ep.Current, ep.Pending
	}
	if drop != nil {
		for _, v := range drop.Variants {
			ep.Retiring = append(ep.Retiring, v.Replicas...)
		}
	}
	for i := range keep.Variants {
		v := &keep.Variants[i]
		v.Share, v.StepAt, v.Want, v.Hold = 0, time.Time{}, 0, 0
	}
	created := ep.Current == nil
	ep.Current, ep.Pending = keep, nil
	ep.Status = StatusInService
	if ro != nil && ro.RollingBack {
		ep.FailureReason = "Update failed and was rolled back: " + ro.Reason
	} else {
		ep.ReservationExpired = false
	}
	if ro != nil {
		pol := ro.Policy
		ep.LastPolicy = &pol
	}
	ep.Rollout = nil
	c.disarm(ep.Name)
	// Route first: a client that sees InService must find the route. (Routes
	// live in memory, so a crash before the save loses nothing.)
	c.eng.Router().SetRoute(c.route(ep))
	if err := c.save(ep, true); err != nil {
		return err
	}
	if created {
		c.log.Info("endpoint in service", "endpoint", ep.Name, "config", keep.ConfigName)
	} else {
		c.log.Info("update finished", "endpoint", ep.Name, "config", keep.ConfigName, "generation", keep.Generation, "rolledBack", ro != nil && ro.RollingBack)
	}
	if len(ep.Retiring) > 0 {
		return c.retire(ctx, ep)
	}
	return nil
}

// fail ends a deployment that cannot come up: a create fails the endpoint;
// an update is rolled back under its policy, the old side serving on.
func (c *Controller) fail(ctx context.Context, ep *Endpoint, reason string) error {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	if ep.Rollout != nil && ep.Rollout.RollingBack {
		// Rolling back failed too: stop trying, keep what serves.
		return c.abandon(ctx, ep, StatusInService, "Update failed and its rollback failed too: "+ep.Rollout.Reason+"; "+reason)
	}
	switch {
	case ep.Current == nil:
		return c.abandon(ctx, ep, StatusFailed, reason)
	case ep.ReservationExpired:
		// Nothing to roll back to: the old deployment's reservation ended.
		return c.abandon(ctx, ep, StatusFailed, "Update failed: "+reason+" (the previous configuration's capacity reservation has expired)")
	}
	if ep.Rollout == nil {
		ep.Rollout = &Rollout{Start: ep.Pending.StartTime}
	}
	ep.Rollout.RollingBack, ep.Rollout.Reason = true, reason
	now := c.clock.Now().UTC()
	for i := range ep.Current.Variants {
		v := &ep.Current.Variants[i]
		share := 1.0
		hold := 0
		if pv := variantOf(ep.Pending, v.Name); pv != nil {
			share, hold = 1-pv.Share, pv.Hold
			pv.Hold = 0
		}
		v.Share, v.StepAt, v.Want, v.Hold = share, now, len(v.Replicas), hold
	}
	c.disarm(ep.Name)
	if err := c.save(ep, true); err != nil {
		return err
	}
	c.log.Warn("update failed; rolling back", "endpoint", ep.Name, "reason", reason)
	return c.reconcileRollout(ctx, ep, 1)
}

// abandon drops Pending at once (its replicas retire) and records status
// with reason.
func (c *Controller) abandon(ctx context.Context, ep *Endpoint, status, reason string) error {
	for _, v := range ep.Pending.Variants {
		ep.Retiring = append(ep.Retiring, v.Replicas...)
	}
	ep.Pending, ep.Rollout = nil, nil
	if ep.Current != nil {
		for i := range ep.Current.Variants {
			v := &ep.Current.Variants[i]
			v.Share, v.StepAt, v.Want, v.Hold = 0, time.Time{}, 0, 0
		}
	}
	ep.Status, ep.FailureReason = status, reason
	c.disarm(ep.Name)
	if err := c.save(ep, true); err != nil {
		return err
	}
	if ep.Current != nil && status != StatusFailed {
		c.eng.Router().SetRoute(c.route(ep))
	}
	c.log.Warn("deployment failed", "endpoint", ep.Name, "reason", reason)
	return c.retire(ctx, ep)
}

// checkAlarms arms the update's alarms on first use and reports whether one
// fired. Watches live in memory: after a restart they are armed again.
func (c *Controller) checkAlarms(ep *Endpoint) (bool, string) {
	names := ep.Rollout.Policy.Alarms
	if len(names) == 0 || c.opts.Alarms == nil {
		return false, ""
	}
	key := fmt.Sprintf("%s/%d", ep.Name, ep.Pending.Generation)
	c.mu.Lock()
	w, ok := c.watches[key]
	c.mu.Unlock()
	if !ok {
		var err error
		if w, err = c.opts.Alarms.Arm(ep.Name, names); err != nil {
			return true, fmt.Sprintf("alarms cannot be watched: %v", err)
		}
		c.mu.Lock()
		c.watches[key] = w
		c.mu.Unlock()
	}
	fired, why := w.Check()
	if fired {
		return true, "alarm fired during the update: " + why
	}
	return false, ""
}

func (c *Controller) disarm(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.watches {
		if strings.HasPrefix(k, name+"/") {
			delete(c.watches, k)
		}
	}
}

// reconcileScale applies weight and instance-count changes to the serving side.
func (c *Controller) reconcileScale(ctx context.Context, ep *Endpoint) error {
	cur := ep.Current
	changed := false
	for i := range cur.Variants {
		v := &cur.Variants[i]
		if err := checkCount(v.Name, v.DesiredCount); err != nil {
			// A record written before counts were capped: keep what serves.
			v.DesiredCount = min(len(v.Replicas), MaxInstancesPerVariant)
			ep.FailureReason = err.Error()
			changed = true
		}
		for len(v.Replicas) < v.DesiredCount {
			v.Replicas = append(v.Replicas, replicaID(ep.Name, v, cur.Generation, v.NextIndex))
			v.NextIndex++
			changed = true
		}
		if n := len(v.Replicas); n > v.DesiredCount {
			ep.Retiring = append(ep.Retiring, v.Replicas[v.DesiredCount:]...)
			v.Replicas = v.Replicas[:v.DesiredCount]
			changed = true
		}
		if v.Weight != v.DesiredWeight {
			v.Weight = v.DesiredWeight
			changed = true
		}
	}
	if changed {
		if err := c.save(ep, false); err != nil {
			return err
		}
		c.eng.Router().SetRoute(c.route(ep))
		if len(ep.Retiring) > 0 {
			if err := c.retire(ctx, ep); err != nil {
				return err
			}
		}
		if err := c.ensureStarted(ctx, ep, cur); err != nil {
			c.log.Warn("start replica", "endpoint", ep.Name, "err", err)
		}
	}
	if ep.Status != StatusUpdating {
		return nil
	}
	for i := range cur.Variants {
		v := &cur.Variants[i]
		for _, id := range v.Replicas {
			if !c.eng.Healthy(id) {
				if c.clock.Now().Sub(v.ChangeStart) <= c.opts.StartTimeout {
					return nil
				}
				// New instances never came up: give up on the unhealthy ones and
				// keep serving with the rest.
				var keep []string
				for _, id := range v.Replicas {
					if c.eng.Healthy(id) {
						keep = append(keep, id)
					} else {
						ep.Retiring = append(ep.Retiring, id)
					}
				}
				v.Replicas, v.DesiredCount = keep, len(keep)
				ep.FailureReason = fmt.Sprintf("instance %s did not become healthy within %s", id, c.opts.StartTimeout)
				ep.Status = StatusInService
				return c.save(ep, false)
			}
		}
	}
	c.eng.Router().SetRoute(c.route(ep))
	ep.Status = StatusInService
	return c.save(ep, true)
}

func (c *Controller) reconcileDelete(ctx context.Context, ep *Endpoint) error {
	c.eng.Router().DeleteRoute(ep.Name)
	c.disarm(ep.Name)
	c.forgetServerless(ep.Name)
	var ids []string
	for _, d := range []*Deployment{ep.Current, ep.Pending} {
		if d == nil {
			continue
		}
		for _, v := range d.Variants {
			ids = append(ids, v.Replicas...)
		}
	}
	ids = append(ids, ep.Retiring...)
	if err := c.eng.RetireAll(ctx, ids); err != nil {
		return err
	}
	err := c.store.Update(func(tx *store.Tx) error {
		var cur Endpoint
		found, err := tx.Get(KindEndpoint, ep.Name, &cur)
		if err != nil || !found {
			return err
		}
		if cur.Version != ep.Version {
			return errConflict
		}
		if err := c.fleet.Set(tx, ep.Name, nil); err != nil {
			return err
		}
		return tx.Delete(KindEndpoint, ep.Name)
	})
	if err == nil {
		c.log.Info("endpoint deleted", "endpoint", ep.Name)
	}
	return err
}

// stopOrphans stops replicas of endpoint name that the runtime still runs but
// the record no longer lists (keep), e.g. after a failed create.
func (c *Controller) stopOrphans(ctx context.Context, name string, keep map[string]bool) error {
	return c.eng.StopAll(ctx, func(s runtime.ReplicaSpec) bool { return s.Endpoint == name && s.Controller == "" }, keep)
}

// plan returns the plan of a reserved-only variant.
func (c *Controller) plan(v *VariantState) (placement.PlanInfo, bool) {
	if v.Reservation.IsZero() || c.opts.Reservations == nil {
		return placement.PlanInfo{}, false
	}
	return c.opts.Reservations.Plan(v.Reservation)
}

// planEnded returns a plan under dep that has ended, or nil.
func (c *Controller) planEnded(dep *Deployment) *placement.PlanInfo {
	if dep == nil {
		return nil
	}
	now := c.clock.Now()
	for i := range dep.Variants {
		v := &dep.Variants[i]
		if v.DesiredCount == 0 && len(v.Replicas) == 0 {
			continue
		}
		if pl, ok := c.plan(v); ok && !now.Before(pl.End) {
			return &pl
		}
	}
	return nil
}

// expire takes back the instances of a serving deployment whose plan ended:
// the route answers "reservation expired" at once (in-flight requests finish, as
// the replicas are drained before they stop), every replica stops, and the
// endpoint is Failed with the reason — unless an update to another config is
// already under way, which then carries on and restores service.
func (c *Controller) expire(ctx context.Context, ep *Endpoint) error {
	pl := c.planEnded(ep.Current)
	for i := range ep.Current.Variants {
		v := &ep.Current.Variants[i]
		ep.Retiring = append(ep.Retiring, v.Replicas...)
		v.Replicas, v.DesiredCount = nil, 0
	}
	ep.ReservationExpired = true
	if ep.Pending == nil {
		ep.Status = StatusFailed
	}
	ep.FailureReason = fmt.Sprintf("Training plan %s ended at %s and its instances were released; update the endpoint to another configuration to serve again.",
		pl.Name, pl.End.UTC().Format(time.RFC3339))
	// Route first: once the record says Failed, no request may reach a
	// replica. (A failed save leaves the plan ended, so the next reconcile
	// expires again.)
	c.eng.Router().SetRoute(gateway.Route{Endpoint: ep.Name, Unavailable: gateway.UnavailableExpired})
	if err := c.save(ep, false); err != nil {
		return err
	}
	c.log.Info("reservation expired", "endpoint", ep.Name, "plan", pl.Name)
	return c.retire(ctx, ep)
}
