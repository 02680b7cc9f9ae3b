package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/reconcile"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/store"
)

// Router is the part of the gateway the controller drives. SetRoute replaces an
// endpoint's route atomically (a backend absent from it gets no new requests);
// Drain returns once nothing is in flight to the backend (or ctx is done).
type Router interface {
	SetRoute(r Route)
	DeleteRoute(endpoint string)
	Drain(ctx context.Context, backendID string) error
}

// Route is an endpoint's traffic split.
type Route struct {
	Endpoint    string
	Variants    []VariantRoute
	Unavailable string // why there is no backend, for the 4xx the gateway returns
}

// VariantRoute is one weighted variant and its backends.
type VariantRoute struct {
	Name            string
	Weight          float64
	RoutingStrategy string
	Backends        []Backend
}

// Backend is one replica the gateway may send to.
type Backend struct {
	ID   string
	Addr string
}

// Options tune the controller.
type Options struct {
	// Engine is the engine name put in replica specs ("sim").
	Engine string
	// EngineArgs are extra flags for every replica (e.g. "--time-scale=0.01").
	EngineArgs []string
	// StartTimeout is how long a deployment may take to become healthy before
	// the endpoint fails (create) or the update is rolled back.
	StartTimeout time.Duration
	// DrainTimeout bounds the wait for in-flight requests on a retiring replica.
	DrainTimeout time.Duration
	// Resync is how often every endpoint is reconciled regardless of events.
	Resync time.Duration
	// Reservations, when set, holds reserved-only deployments until their
	// plan starts and takes their instances back when it ends.
	Reservations placement.Plans
}

func (o *Options) defaults() {
	if o.Engine == "" {
		o.Engine = "sim"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Minute
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 60 * time.Second
	}
	if o.Resync <= 0 {
		o.Resync = time.Second
	}
}

// Controller drives endpoints to their recorded intent.
type Controller struct {
	store  *store.Store
	fleet  placement.Allocator
	rt     runtime.Runtime
	router Router
	clock  clock.Clock
	log    *slog.Logger
	opts   Options

	queue *reconcile.Queue
}

// NewController returns a controller; call Run to start its loop, or
// Reconcile to drive one endpoint synchronously.
func NewController(s *store.Store, f placement.Allocator, rt runtime.Runtime, r Router, c clock.Clock, log *slog.Logger, o Options) *Controller {
	o.defaults()
	if log == nil {
		log = slog.Default()
	}
	ctrl := &Controller{store: s, fleet: f, rt: rt, router: r, clock: c, log: log, opts: o}
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
	go c.rt.Subscribe(ctx, func(r runtime.Replica) {
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
		c.router.DeleteRoute(name)
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
			// Stays describable and invocable: every call gets ExpiredMessage.
			c.router.SetRoute(Route{Endpoint: name, Unavailable: ExpiredMessage})
		} else {
			c.router.DeleteRoute(name)
		}
		return c.stopOrphans(ctx, name, nil)
	}
	if c.planEnded(ep.Current) != nil && !ep.ReservationExpired {
		return c.expire(ctx, &ep)
	}

	// Bring up (and keep up) the serving side, and keep its route current.
	if ep.Current != nil {
		if err := c.ensureStarted(ctx, &ep, ep.Current); err != nil {
			c.log.Warn("start serving replica", "endpoint", name, "err", err)
		}
		c.router.SetRoute(c.route(&ep))
	}
	if len(ep.Retiring) > 0 {
		if err := c.retire(ctx, &ep); err != nil {
			return err
		}
	}
	if ep.Pending != nil {
		return c.reconcilePending(ctx, &ep)
	}
	if ep.Current != nil {
		return c.reconcileScale(ctx, &ep)
	}
	return nil
}

func replicaID(ep string, v *VariantState, gen, i int) string {
	return fmt.Sprintf("%s.%s.gen%d.%d", ep, v.Name, gen, i)
}

// spec is the replica spec of one member of v.
func (c *Controller) spec(ep *Endpoint, v *VariantState, id string) runtime.ReplicaSpec {
	return runtime.ReplicaSpec{ID: id, Endpoint: ep.Name, Variant: v.Name, Engine: c.opts.Engine,
		Model: v.Model, GPU: v.GPU, TensorParallel: max(v.GPUCount, 1), Args: append([]string(nil), c.opts.EngineArgs...)}
}

// ensureStarted starts every member of dep that the runtime does not run.
// Member ids are in the record before their Start, so a crash between the two
// only means the Start happens on restart.
func (c *Controller) ensureStarted(ctx context.Context, ep *Endpoint, dep *Deployment) error {
	var errs []error
	for i := range dep.Variants {
		v := &dep.Variants[i]
		if v.ModelError != "" {
			return errors.New(v.ModelError)
		}
		for _, id := range v.Replicas {
			if ctx.Err() != nil {
				// Shutting down: stop promptly; the next start resumes.
				return ctx.Err()
			}
			r, err := c.rt.Get(id)
			if err == nil && r.State != runtime.StateStopped {
				continue
			}
			if err := c.rt.Start(ctx, c.spec(ep, v, id)); err != nil {
				errs = append(errs, fmt.Errorf("start replica %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// route is the endpoint's traffic split: the serving deployment's healthy,
// non-retiring members.
func (c *Controller) route(ep *Endpoint) Route {
	r := Route{Endpoint: ep.Name}
	if ep.ReservationExpired {
		r.Unavailable = ExpiredMessage
		return r
	}
	retiring := map[string]bool{}
	for _, id := range ep.Retiring {
		retiring[id] = true
	}
	for _, v := range ep.Current.Variants {
		vr := VariantRoute{Name: v.Name, Weight: v.Weight, RoutingStrategy: v.RoutingStrategy}
		for _, id := range v.Replicas {
			if retiring[id] {
				continue
			}
			if rep, err := c.rt.Get(id); err == nil && rep.State == runtime.StateHealthy && rep.Addr != "" {
				vr.Backends = append(vr.Backends, Backend{ID: id, Addr: rep.Addr})
			}
		}
		r.Variants = append(r.Variants, vr)
	}
	return r
}

// retire drains and stops ep.Retiring (already out of the route) and records it.
func (c *Controller) retire(ctx context.Context, ep *Endpoint) error {
	for _, id := range ep.Retiring {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		dctx, cancel := context.WithTimeout(ctx, c.opts.DrainTimeout)
		if err := c.router.Drain(dctx, id); err != nil {
			c.log.Warn("drain", "replica", id, "err", err)
		}
		cancel()
		if err := c.rt.Stop(ctx, id); err != nil {
			return fmt.Errorf("stop replica %s: %w", id, err)
		}
	}
	ep.Retiring = nil
	return c.save(ep, true)
}

func (c *Controller) reconcilePending(ctx context.Context, ep *Endpoint) error {
	p := ep.Pending
	if pl := c.planEnded(p); pl != nil {
		return c.failPending(ctx, ep, fmt.Sprintf("training plan %s ended at %s before the deployment was up", pl.Name, pl.End.UTC().Format(time.RFC3339)))
	}
	// A reserved-only deployment waits (in Creating/Updating) until its plan
	// starts; the deployment (and its start timeout) begins when the wait ends.
	waitChanged, held, wasHeld := false, false, false
	for i := range p.Variants {
		v := &p.Variants[i]
		msg := ""
		if pl, ok := c.plan(v); ok && c.clock.Now().Before(pl.Start) {
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
		p.StartTime = c.clock.Now().UTC().Truncate(time.Millisecond)
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
			return c.failPending(ctx, ep, err.Error())
		}
	}
	// Number the members of a fresh deployment and record them before starting.
	changed := false
	for i := range p.Variants {
		v := &p.Variants[i]
		for len(v.Replicas) < v.DesiredCount {
			v.Replicas = append(v.Replicas, replicaID(ep.Name, v, p.Generation, v.NextIndex))
			v.NextIndex++
			changed = true
		}
	}
	if changed {
		if err := c.save(ep, false); err != nil {
			return err
		}
	}
	if err := c.ensureStarted(ctx, ep, p); err != nil {
		if ctx.Err() != nil {
			// Shutting down: the record stays as it is and the next start resumes.
			return ctx.Err()
		}
		return c.failPending(ctx, ep, err.Error())
	}
	healthy, waiting := true, ""
	for _, v := range p.Variants {
		for _, id := range v.Replicas {
			r, err := c.rt.Get(id)
			if err != nil || r.State != runtime.StateHealthy {
				healthy = false
				if err == nil && waiting == "" {
					waiting = fmt.Sprintf("replica %s is %s: %s", id, r.State, r.Message)
				}
			}
		}
	}
	if !healthy {
		if c.clock.Now().Sub(p.StartTime) > c.opts.StartTimeout {
			return c.failPending(ctx, ep, fmt.Sprintf("instances did not become healthy within %s (%s)", c.opts.StartTimeout, waiting))
		}
		return nil
	}
	// Switch: the green side becomes current and the blue side retires. Record
	// it first, so a crash after this point finishes the switch on restart.
	var old []string
	if ep.Current != nil {
		for _, v := range ep.Current.Variants {
			old = append(old, v.Replicas...)
		}
	}
	ep.Current, ep.Pending = p, nil
	ep.ReservationExpired = false
	ep.Retiring = append(ep.Retiring, old...)
	if len(old) == 0 {
		ep.Status = StatusInService
	}
	// Route first: a client that sees InService must find the route. (Routes
	// live in memory, so a crash before the save loses nothing.)
	c.router.SetRoute(c.route(ep))
	if err := c.save(ep, false); err != nil {
		return err
	}
	c.log.Info("deployment live", "endpoint", ep.Name, "config", p.ConfigName, "generation", p.Generation)
	if len(old) > 0 {
		if err := c.retire(ctx, ep); err != nil {
			return err
		}
		ep.Status = StatusInService
		return c.save(ep, true)
	}
	return nil
}

// failPending ends a deployment that cannot come up: a create fails the
// endpoint; an update is rolled back, leaving the old deployment serving.
func (c *Controller) failPending(ctx context.Context, ep *Endpoint, reason string) error {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	p := ep.Pending
	if ep.Current == nil {
		ep.Status, ep.FailureReason = StatusFailed, reason
	} else if ep.ReservationExpired {
		// Nothing to roll back to: the old deployment's reservation ended.
		ep.Status, ep.FailureReason = StatusFailed, "Update failed: "+reason+" (the previous configuration's capacity reservation has expired)"
	} else {
		ep.Status, ep.FailureReason = StatusInService, "Update failed and was rolled back: "+reason
	}
	ep.Pending = nil
	for _, v := range p.Variants {
		ep.Retiring = append(ep.Retiring, v.Replicas...)
	}
	if err := c.save(ep, false); err != nil {
		return err
	}
	c.log.Warn("deployment failed", "endpoint", ep.Name, "reason", reason)
	return c.retire(ctx, ep)
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
		c.router.SetRoute(c.route(ep))
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
			if r, err := c.rt.Get(id); err != nil || r.State != runtime.StateHealthy {
				if c.clock.Now().Sub(v.ChangeStart) <= c.opts.StartTimeout {
					return nil
				}
				// New instances never came up: give up on the unhealthy ones and
				// keep serving with the rest.
				var keep []string
				for _, id := range v.Replicas {
					if r, err := c.rt.Get(id); err == nil && r.State == runtime.StateHealthy {
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
	c.router.SetRoute(c.route(ep))
	ep.Status = StatusInService
	return c.save(ep, true)
}

func (c *Controller) reconcileDelete(ctx context.Context, ep *Endpoint) error {
	c.router.DeleteRoute(ep.Name)
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
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		dctx, cancel := context.WithTimeout(ctx, c.opts.DrainTimeout)
		_ = c.router.Drain(dctx, id)
		cancel()
		if err := c.rt.Stop(ctx, id); err != nil {
			return fmt.Errorf("stop replica %s: %w", id, err)
		}
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
	var ids []string
	for _, r := range c.rt.List() {
		if r.Spec.Endpoint == name && r.Spec.Controller == "" && r.State != runtime.StateStopped && !keep[r.Spec.ID] {
			ids = append(ids, r.Spec.ID)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := c.rt.Stop(ctx, id); err != nil {
			return err
		}
	}
	return nil
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
// the route answers ExpiredMessage at once (in-flight requests finish, as
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
	ep.FailureReason = fmt.Sprintf("Training plan %s ended at %s and its instances were released. %s",
		pl.Name, pl.End.UTC().Format(time.RFC3339), ExpiredMessage)
	// Route first: once the record says Failed, no request may reach a
	// replica. (A failed save leaves the plan ended, so the next reconcile
	// expires again.)
	c.router.SetRoute(Route{Endpoint: ep.Name, Unavailable: ExpiredMessage})
	if err := c.save(ep, false); err != nil {
		return err
	}
	c.log.Info("reservation expired", "endpoint", ep.Name, "plan", pl.Name)
	return c.retire(ctx, ep)
}
