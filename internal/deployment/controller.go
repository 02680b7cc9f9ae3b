package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/modelsource"
	"github.com/capstan-dev/capstan/internal/reconcile"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// modelRetry is how long a failed model source waits before it is tried
// again (a spec change retries at once).
const modelRetry = 30 * time.Second

// surge starts every replica asked for at once: scaling, and a rollout
// without the rollout annotations.
var surge = rolloutOf(manifest.RollingUpdate{})

// Controller drives manifest deployments to their spec. Reconcile moves one
// object a step (or several) towards it and is safe to call at any time;
// Run calls it on store changes, runtime events, autoscaling polls and a
// resync tick. It decides what runs; the serving engine runs it.
type Controller struct {
	o   Options
	m   *metrics
	log *slog.Logger
	eng *serving.Engine
	rt  runtime.Runtime

	queue *reconcile.Queue

	mu       sync.Mutex
	ctx      context.Context // Run's, for the polling goroutines; nil before Run
	states   map[string]*objState
	owners   map[string]string // replica id → object key
	routes   map[string]string // route name → object key
	retiring map[string]bool   // replicas out of the record, not yet retired

	evmu sync.Mutex
	evs  map[string][]manifest.Event

	// diskFree reads a file system's free bytes (freeBytes; tests fake a
	// full disk with it).
	diskFree func(path string) (int64, error)
}

var _ gateway.Activator = (*Controller)(nil)

// objState is the controller's in-memory view of one object. Reconciles of
// one object never overlap, so only they touch it, except activate and
// pressedBy (under Controller.mu) and peek (atomic).
type objState struct {
	// model source resolution
	srcKey   string
	model    modelsource.Result
	modelOK  bool
	modelErr *failure
	modelAt  time.Time
	// placement and start
	instance map[string]catalog.InstanceType // replica → instance type it sits on
	pending  map[string]string               // replica → why it is not placed
	waitRoom map[string]bool                 // pending replicas that freed capacity would place
	startErr map[string]string               // replica → why Start failed
	// tieredOff is the cluster a TieredStorageOff event was last given for.
	tieredOff string
	// crashed is why a replica last failed while running (the engine
	// exited, e.g. its model does not fit its MIG slice) until it is
	// healthy again: the runtime's restarts do not hide it.
	crashed  map[string]string
	evictWhy map[string]string // replica → why it leaves its node
	// autoscaling
	scaler    *autoscale.Scaler
	scalerKey string
	scalerErr string
	cfg       autoscale.Config
	nextPoll  time.Time
	pollStop  context.CancelFunc
	pollEvery time.Duration
	activate  bool // set by Activate, consumed by Reconcile
	// pressedBy names the trigger whose peek asked for more replicas
	// between polls; set by the pressure watch, consumed by Reconcile.
	pressedBy  string
	quietUntil time.Time                 // a poll run early changed nothing: no more early polls before this
	peek       atomic.Pointer[peekState] // what the pressure watch reads
	coldStart  time.Time
	// registration and route
	route      string
	registered bool
	nameErr    string
	lastPut    *endpoint.ManagedEndpoint
	routeSig   string
	warnedGen  int64
	// replica-second accounting
	acctAt time.Time
	acctN  int
}

type failure struct{ reason, message string }

func newController(o Options, m *metrics) *Controller {
	c := &Controller{o: o, m: m, log: o.Logger, eng: o.Engine, rt: o.Engine.Runtime(), states: map[string]*objState{},
		owners: map[string]string{}, routes: map[string]string{}, retiring: map[string]bool{},
		evs: map[string][]manifest.Event{}, diskFree: freeBytes}
	c.queue = reconcile.New(c.Reconcile, func(k string, err error) {
		if !errors.Is(err, errConflict) {
			c.log.Warn("reconcile", "object", k, "err", err)
		}
	})
	return c
}

func (c *Controller) state(k string) *objState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.states[k]
	if !ok {
		st = &objState{instance: map[string]catalog.InstanceType{}, pending: map[string]string{}, waitRoom: map[string]bool{},
			startErr: map[string]string{}, crashed: map[string]string{}, evictWhy: map[string]string{}}
		c.states[k] = st
	}
	return st
}

// Run reconciles on store changes, runtime events, autoscaling polls and a
// resync tick until ctx is done, then waits for reconciles in flight.
func (c *Controller) Run(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	c.queue.Start(ctx)
	watch := c.o.Store.Watch(ctx)
	go c.rt.Subscribe(ctx, func(r runtime.Replica) {
		if r.Spec.Controller != runtime.ControllerDeployment {
			return
		}
		c.mu.Lock()
		k, ok := c.owners[r.Spec.ID]
		c.mu.Unlock()
		if ok {
			c.Enqueue(k)
		}
	})
	// Nodes joining or leaving may place pending replicas or move placed ones.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.o.Cluster.Changes():
				c.resync(ctx)
			}
		}
	}()
	tick := c.o.Clock.NewTicker(c.o.Resync)
	defer tick.Stop()
	reconcile.Loop(ctx, c.queue, watch, func(k store.Key) {
		if k.Kind == bucket {
			c.Enqueue(k.Name)
		}
	}, tick.C(), func() { c.resync(ctx) })
}

// records reads every stored manifest record.
func (c *Controller) records() ([]record, error) {
	var recs []record
	err := c.o.Store.View(func(tx *store.Tx) error {
		var err error
		recs, err = store.List[record](tx, bucket)
		return err
	})
	return recs, err
}

// resync enqueues every object and stops replicas no record lists.
func (c *Controller) resync(ctx context.Context) {
	recs, err := c.records()
	if err != nil {
		c.log.Error("list deployments", "err", err)
		return
	}
	known := map[string]bool{}
	for _, r := range recs {
		o := r.obj()
		m := o.GetMeta()
		k := key(o.GetKind(), m.Namespace, m.Name)
		for _, rr := range r.Replicas {
			known[rr.ID] = true
		}
		c.Enqueue(k)
	}
	c.stopOrphans(ctx, known)
}

// stopOrphans stops this controller's replicas that no record lists (left by
// a crash between a record change and a Stop; the engine's sweep) and frees
// their node capacity. A victim a reconcile has taken out of its record but
// not retired yet counts as listed.
func (c *Controller) stopOrphans(ctx context.Context, known map[string]bool) {
	mine := func(s runtime.ReplicaSpec) bool { return s.Controller == runtime.ControllerDeployment }
	listed := func(id string) bool {
		if known[id] {
			return true
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.retiring[id]
	}
	for _, id := range c.eng.SweepOrphans(ctx, mine, listed) {
		c.o.Cluster.Release(id)
	}
}

// Enqueue asks for a reconcile of object key k. At most one reconcile per
// object runs at a time; a request during one runs it again afterwards.
// Before Run it does nothing.
func (c *Controller) Enqueue(k string) { c.queue.Enqueue(k) }

// Activate implements gateway.Activator: a request reached a route with no
// replica. The deployment scales to its minimum (at least one) at once,
// without waiting for the next autoscaling poll.
func (c *Controller) Activate(route string) {
	c.mu.Lock()
	k, ok := c.routes[route]
	var st *objState
	if ok {
		st = c.states[k]
	}
	if st != nil {
		st.activate = true
	}
	ctx := c.ctx
	c.mu.Unlock()
	if !ok || st == nil {
		c.log.Warn("activation for an unknown route", "route", route)
		return
	}
	c.log.Info("activation requested", "route", route, "object", k)
	if ctx == nil {
		// Not running (tests drive Reconcile themselves).
		return
	}
	c.Enqueue(k)
}

// Prime sets the route of every deployment from its record, before the
// listener opens: after a restart a deployment's route exists at once (a
// scale-to-zero one activates), instead of its requests failing as unknown
// until the first reconcile. Objects being deleted, and ones that do not
// hold their route's name, get none. The model and the replicas come with
// the first reconcile.
func (c *Controller) Prime() error {
	recs, err := c.records()
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	for i := range recs {
		rec := &recs[i]
		o := rec.obj()
		p, err := planFor(o, c.o.Engines)
		if err != nil || rec.Deleting || !c.holdsName(rec, p) {
			continue
		}
		m := o.GetMeta()
		k := key(o.GetKind(), m.Namespace, m.Name)
		if _, ok := c.claimRoute(k, p, c.state(k)); !ok {
			continue
		}
		route, _ := c.route(p, rec, "", nil)
		c.o.Gateway.SetRoute(route)
	}
	return nil
}

// holdsName reports whether the object held its route's name when its
// status was last written: it was reconciled, not refused the name, and
// holds the SageMaker registration of that name.
func (c *Controller) holdsName(rec *record, p *plan) bool {
	o := rec.obj()
	if o.GetStatus().State == "" {
		return false
	}
	for _, cd := range o.GetStatus().Conditions {
		if cd.Type == manifest.ConditionReady && cd.Reason == manifest.ReasonEndpointNameInUse {
			return false
		}
	}
	return p.endpointName == "" || c.o.Endpoints == nil || rec.Registered == p.endpointName
}

// save writes rec if the stored version is still rec.Version; rec.Version
// is bumped on success.
func (c *Controller) save(k string, rec *record) error {
	err := c.o.Store.Update(func(tx *store.Tx) error {
		var cur record
		found, err := tx.Get(bucket, k, &cur)
		if err != nil {
			return err
		}
		if !found || cur.Version != rec.Version {
			return errConflict
		}
		rec.Version++
		if err := stamp(tx, rec); err != nil {
			return err
		}
		return tx.Put(bucket, k, rec)
	})
	if err != nil {
		rec.Version = -1 // force a re-read on any further save
	}
	return err
}

// Reconcile moves object k (see Key) towards its spec.
func (c *Controller) Reconcile(ctx context.Context, k string) error {
	var rec record
	var found bool
	err := c.o.Store.View(func(tx *store.Tx) error {
		var err error
		found, err = tx.Get(bucket, k, &rec)
		return err
	})
	if err != nil {
		return err
	}
	if !found {
		c.forget(k)
		return nil
	}
	st := c.state(k)
	obj := rec.obj()
	now := c.o.Clock.Now()
	c.account(k, obj, st, now)
	if rec.Deleting {
		return c.reconcileDelete(ctx, k, &rec, st)
	}
	p, err := planFor(obj, c.o.Engines)
	if err != nil {
		return c.writeStatus(ctx, k, &rec, st, nil, &failure{manifest.ReasonInvalidSpec, err.Error()})
	}
	if gen := obj.GetMeta().Generation; st.warnedGen != gen {
		st.warnedGen = gen
		for _, w := range p.warnings {
			c.event(k, manifest.EventWarning, manifest.ReasonIgnoredField, w)
		}
		for _, w := range p.engineWarnings {
			c.event(k, manifest.EventWarning, w.reason, w.message)
		}
	}

	changed := false
	// A renamed endpoint gives up its old registration.
	if rec.Registered != "" && rec.Registered != p.endpointName && c.o.Endpoints != nil {
		if err := c.o.Endpoints.DeleteManaged(ctx, rec.Registered, p.owner()); err != nil {
			return fmt.Errorf("deregister endpoint %s: %w", rec.Registered, err)
		}
		c.event(k, manifest.EventNormal, "EndpointDeregistered", "SageMaker endpoint "+rec.Registered+" removed")
		rec.Registered, st.registered, st.lastPut = "", false, nil
		changed = true
	}
	// Claim the SageMaker endpoint name before taking the route of that name.
	if p.endpointName != "" && c.o.Endpoints != nil && !st.registered {
		status := endpoint.StatusCreating
		if obj.GetStatus().State == manifest.StateDeploymentComplete {
			status = endpoint.StatusInService // a restart of capstan, not a new endpoint
		}
		err := c.o.Endpoints.PutManaged(ctx, c.managed(p, &rec, st, status, ""))
		switch {
		case errors.Is(err, endpoint.ErrNameInUse):
			st.nameErr = err.Error()
			return c.writeStatus(ctx, k, &rec, st, p, &failure{manifest.ReasonEndpointNameInUse, err.Error()})
		case err != nil:
			return fmt.Errorf("register endpoint %s: %w", p.endpointName, err)
		}
		st.registered, st.nameErr = true, ""
		if rec.Registered != p.endpointName {
			rec.Registered = p.endpointName
			changed = true
			c.event(k, manifest.EventNormal, "EndpointRegistered", "SageMaker endpoint "+p.endpointName+" registered")
		}
	}
	// The route is claimed after the SageMaker name, so that the object
	// holding the name also holds the route of that name.
	if holder, ok := c.claimRoute(k, p, st); !ok {
		msg := fmt.Sprintf("route %q is already served by %s; set a different sageMakerEndpoint.name / endpointName", p.route, holder)
		return c.writeStatus(ctx, k, &rec, st, p, &failure{manifest.ReasonEndpointNameInUse, msg})
	}

	res, mfail := c.resolveModel(ctx, k, obj, p, st)
	if mfail != nil {
		res = st.model // the replicas that still serve run the last good model
	}
	if mfail == nil {
		if tmpl := p.templateHash(res.Model, res.Dir); rec.Template != tmpl {
			if rec.Template != "" {
				c.event(k, manifest.EventNormal, "RolloutStarted", fmt.Sprintf("replica template changed; rolling out revision %d", rec.Revision+1))
			}
			rec.Revision++
			rec.Template = tmpl
			rec.NextIndex = 0
			rec.DeployStart = now
			changed = true
		}
	}
	if c.autoscale(ctx, k, &rec, p, st) {
		changed = true
	}
	desired := c.desired(&rec, p)

	var retire []string
	if mfail == nil {
		var ch bool
		retire, ch = c.plan(k, &rec, p, st, desired)
		changed = changed || ch
		c.mu.Lock()
		for _, id := range retire {
			c.retiring[id] = true
		}
		c.mu.Unlock()
	}
	if changed {
		if err := c.save(k, &rec); err != nil {
			c.mu.Lock()
			for _, id := range retire {
				delete(c.retiring, id)
			}
			c.mu.Unlock()
			return err
		}
	}
	// Runtime events find their object through owners (also after a restart).
	c.mu.Lock()
	for _, r := range rec.Replicas {
		c.owners[r.ID] = k
	}
	c.mu.Unlock()
	// Victims, and replicas whose node left or is leaving, leave the route
	// before they are drained.
	evicted := c.evicted(&rec, st)
	c.setRoute(p, &rec, st, res.Model, append(slices.Clip(retire), evicted...))
	for _, id := range retire {
		c.retire(ctx, k, id, st)
	}
	for _, id := range evicted {
		c.event(k, manifest.EventNormal, "Evicted", fmt.Sprintf("replica %s moves: %s", id, st.evictWhy[id]))
		if n, ok := c.o.Cluster.NodeOf(id); ok {
			c.nodeEvent(n.Name, "Evicted", fmt.Sprintf("replica %s of %s moves off the node", id, k))
		}
		c.unplace(ctx, k, id, st)
	}
	if mfail == nil {
		c.placeAndStart(ctx, k, &rec, p, st, res)
	}
	c.setRoute(p, &rec, st, res.Model, nil)
	return c.writeStatus(ctx, k, &rec, st, p, mfail)
}

// claimRoute records that object k serves route p.route, dropping its old
// route when the name changed. It fails, naming the holder, when another
// object serves that route: two deployments never share one.
func (c *Controller) claimRoute(k string, p *plan, st *objState) (holder string, ok bool) {
	c.mu.Lock()
	if h, taken := c.routes[p.route]; taken && h != k {
		c.mu.Unlock()
		return h, false
	}
	old := ""
	if st.route != "" && st.route != p.route && c.routes[st.route] == k {
		old = st.route
		delete(c.routes, old)
		st.routeSig = ""
	}
	st.route = p.route
	c.routes[p.route] = k
	c.mu.Unlock()
	if old != "" {
		c.o.Gateway.DeleteRoute(old)
	}
	return k, true
}

// desired is the replica count the deployment aims for now, within
// [0, manifest.MaxReplicas] whatever a record written before the cap holds:
// plan numbers replicas up to it.
func (c *Controller) desired(rec *record, p *plan) int {
	n := p.replicas
	if p.autoscale != nil && rec.Desired != nil {
		n = *rec.Desired
	}
	return min(max(n, 0), manifest.MaxReplicas)
}

// resolveModel fetches the model source once per source (and again after
// modelRetry when it failed).
func (c *Controller) resolveModel(ctx context.Context, k string, obj manifest.Object, p *plan, st *objState) (modelsource.Result, *failure) {
	var src modelsource.Source
	var srcErr error
	if c.o.Models != nil {
		src, srcErr = modelsource.FromManifest(obj)
		src.Format = p.format
	}
	b, _ := json.Marshal(src)
	sk := string(b) + "|" + p.modelHint
	if srcErr != nil {
		sk += "|" + srcErr.Error()
	}
	now := c.o.Clock.Now()
	if st.srcKey == sk {
		if st.modelOK {
			return st.model, nil
		}
		if st.modelErr != nil && now.Sub(st.modelAt) < modelRetry {
			return modelsource.Result{}, st.modelErr
		}
	}
	st.srcKey, st.modelAt = sk, now
	res, f := c.fetch(ctx, src, srcErr, p)
	if f != nil {
		st.modelOK, st.modelErr = false, f
		c.event(k, manifest.EventWarning, f.reason, f.message)
		c.log.Warn("model source failed", "object", k, "reason", f.reason, "err", f.message)
		return res, f
	}
	st.model, st.modelOK, st.modelErr = res, true, nil
	c.event(k, manifest.EventNormal, "ModelResolved", fmt.Sprintf("model %s ready (%s)", res.Model, describeResult(res)))
	return res, nil
}

func describeResult(r modelsource.Result) string {
	if r.Dir == "" {
		return "from the catalog"
	}
	return fmt.Sprintf("%d files, %d bytes in %s", r.Files, r.Bytes, r.Dir)
}

func (c *Controller) fetch(ctx context.Context, src modelsource.Source, srcErr error, p *plan) (modelsource.Result, *failure) {
	var res modelsource.Result
	if c.o.Models != nil {
		if srcErr != nil {
			return res, sourceFailure(srcErr)
		}
		var err error
		res, err = c.o.Models.Fetch(ctx, src)
		if err != nil {
			return res, sourceFailure(err)
		}
	}
	if res.Model == "" && p.modelHint != "" {
		if m, err := c.o.Catalog.Model(p.modelHint); err == nil {
			res.Model = m.ID
		}
	}
	if res.Model == "" && res.Dir == "" {
		return res, &failure{manifest.ReasonModelSourceFailed,
			fmt.Sprintf("model %q is not in the catalog and its source gave no model directory", p.modelHint)}
	}
	if res.Dir != "" {
		if f := c.weightFilesFit(res.Dir, p); f != nil {
			return res, f
		}
	}
	return res, nil
}

// weightFilesFit refuses a fetched model folder whose weight files fit none
// of the deployment's instance types: the engine loads them whole, so it
// would fail at load on every replica.
func (c *Controller) weightFilesFit(dir string, p *plan) *failure {
	n, err := engines.WeightBytes(dir, p.format)
	if err != nil || n == 0 {
		return nil
	}
	var why []string
	for _, name := range p.instanceTypes {
		it, err := c.o.Catalog.InstanceType(name)
		if err != nil {
			return nil // validation names an unknown type
		}
		err = c.o.Catalog.WeightFilesFit(n, it)
		if err == nil {
			return nil
		}
		why = append(why, err.Error())
	}
	if len(why) == 0 {
		return nil
	}
	return &failure{ReasonModelTooLarge, fmt.Sprintf("the model does not fit: %s; use an instance type with more memory", strings.Join(why, "; "))}
}

func sourceFailure(err error) *failure {
	var se *modelsource.SourceError
	if errors.As(err, &se) && se.Reason != "" {
		return &failure{"ModelSource" + se.Reason, err.Error()}
	}
	return &failure{manifest.ReasonModelSourceFailed, err.Error()}
}

// plan decides the replica set under the rollout strategy: it numbers new
// replicas of the current revision up to desired, picks the current-revision
// victims of a scale-in (not serving first, then newest) and the
// old-revision replicas that may retire because new ones serve in their
// place or need their room. The record lists the survivors; the victims are
// returned for the caller to take out of the route, drain and stop.
//
// A replica whose node is leaving (cordoned: consolidation, a spot notice, a
// plan's end, a MIG re-layout) is replaced before it stops: it no longer
// counts toward the desired replicas, so a replacement is recorded, and it
// keeps serving until the replacement does. When a replacement finds no
// room, the leaving replicas stop at once instead (the room they hold may be
// what the replacement waits for, as in a MIG re-layout), unless a node
// autoscaler adds a node for it (keepLeaving).
func (c *Controller) plan(k string, rec *record, p *plan, st *objState, desired int) (retire []string, changed bool) {
	var cur, old, leaving []replicaRec
	for _, r := range rec.Replicas {
		if r.Revision != rec.Revision {
			old = append(old, r)
			continue
		}
		switch on, gone := c.leavingNode(r.ID, st); {
		case gone:
			// Its node left before the replacement served: nothing to
			// keep; the replacement is recorded already.
			retire = append(retire, r.ID)
			changed = true
		case on:
			leaving = append(leaving, r)
		default:
			cur = append(cur, r)
		}
	}
	prog := serving.Progress{Target: desired, New: len(cur), Old: len(old)}
	for _, r := range cur {
		if c.eng.Healthy(r.ID) {
			prog.NewHealthy++
		} else if _, placed := st.instance[r.ID]; !placed && st.waitRoom[r.ID] {
			prog.NewBlocked++
		}
	}
	now := c.o.Clock.Now()
	if !rec.StepAt.IsZero() {
		prog.Since = now.Sub(rec.StepAt)
	}
	// p.rollout moves a deployment to a new replica template: new replicas
	// start a batch at a time beside the old ones, old replicas retire as
	// new ones become healthy, and when capacity has no room for a new
	// replica and none is starting, one old replica retires first to make
	// room. With no old revision it is plain scaling to the desired count,
	// all at once, however the batches are set.
	strategy := p.rollout
	if len(old) == 0 {
		strategy = surge
	}
	step := strategy.Next(prog)
	if serving.Changed(prog, step) {
		rec.StepAt = now.UTC()
		changed = true
	}
	defer func() {
		keep := c.keepLeaving(k, rec, p, st, leaving, desired-prog.NewHealthy-step.Old)
		for _, r := range leaving[keep:] {
			retire = append(retire, r.ID)
			changed = true
		}
		rec.Replicas = append(rec.Replicas, leaving[:keep]...)
	}()
	for len(cur) < step.New {
		id := replicaID(p.kind, p.namespace, p.name, rec.Revision, rec.NextIndex)
		rec.NextIndex++
		cur = append(cur, replicaRec{ID: id, Revision: rec.Revision})
		changed = true
	}
	if len(cur) > step.New {
		var victims []replicaRec
		cur, victims = c.pickVictims(cur, step.New)
		for _, r := range victims {
			retire = append(retire, r.ID)
		}
		changed = true
		c.event(k, manifest.EventNormal, "ScalingReplicaSet", fmt.Sprintf("scaled in to %d replicas", desired))
	}
	if len(old) > step.Old {
		if starting := prog.New - prog.NewHealthy - prog.NewBlocked; prog.NewBlocked > 0 && starting == 0 {
			c.event(k, manifest.EventNormal, "RolloutSurge", "no room for a new replica; retiring an old one first to make room")
		}
		// Keep the serving old replicas; retire the others first.
		sort.SliceStable(old, func(i, j int) bool { return c.eng.Healthy(old[i].ID) && !c.eng.Healthy(old[j].ID) })
		for _, r := range old[step.Old:] {
			retire = append(retire, r.ID)
		}
		old = old[:step.Old]
		changed = true
		if len(old) == 0 {
			c.event(k, manifest.EventNormal, "RolloutComplete", fmt.Sprintf("revision %d serves alone", rec.Revision))
		}
	}
	rec.Replicas = append(cur, old...)
	return retire, changed
}

// leavingNode reports whether replica id is placed on a cordoned node, and
// whether it was and that node has since left the pool (its drain timed
// out). A replica whose node left without being cordoned first is neither:
// evicted moves it.
func (c *Controller) leavingNode(id string, st *objState) (on, gone bool) {
	if _, placed := st.instance[id]; !placed {
		return false, false
	}
	n, ok := c.o.Cluster.NodeOf(id)
	if !ok {
		_, told := st.evictWhy[id] // set by keepLeaving while its node was cordoned
		return false, told
	}
	return n.Cordoned, false
}

// keepLeaving orders leaving (serving ones first) and says how many of them
// keep serving: up to short, the replicas the others do not cover yet. While
// a replica of the current revision was refused a node, none does, unless a
// node autoscaler adds nodes to the deployment's cluster for it
// (Options.Provisioned; whole GPUs only: a MIG replica's room may be the
// leaving node's own, as in a re-layout): then the room it waits for is a
// new node's, not the leaving replicas' own, and they serve until the
// replacement does or their node
// goes (a spot interruption's notice, the drain timeout). Each is announced
// once with an Evicted event.
func (c *Controller) keepLeaving(k string, rec *record, p *plan, st *objState, leaving []replicaRec, short int) int {
	if len(leaving) == 0 {
		return 0
	}
	for _, r := range leaving {
		if _, told := st.evictWhy[r.ID]; told {
			continue
		}
		n, _ := c.o.Cluster.NodeOf(r.ID)
		st.evictWhy[r.ID] = fmt.Sprintf("node %s is being removed", n.Name)
		c.event(k, manifest.EventNormal, "Evicted", fmt.Sprintf("replica %s moves: node %s is being removed; it serves until its replacement does", r.ID, n.Name))
		c.nodeEvent(n.Name, "Evicted", fmt.Sprintf("replica %s of %s moves off the node", r.ID, k))
	}
	refused := slices.ContainsFunc(rec.Replicas, func(r replicaRec) bool {
		_, pending := st.pending[r.ID]
		return pending && r.Revision == rec.Revision
	})
	if refused && (c.o.Provisioned == nil || p.req.MIGProfile != "" || !c.o.Provisioned(p.cluster)) {
		return 0
	}
	sort.SliceStable(leaving, func(i, j int) bool { return c.eng.Healthy(leaving[i].ID) && !c.eng.Healthy(leaving[j].ID) })
	return min(len(leaving), max(0, short))
}

// pickVictims keeps n of rs by serving.Engine.Victims.
func (c *Controller) pickVictims(rs []replicaRec, n int) (keep, victims []replicaRec) {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	_, gone := c.eng.Victims(ids, n)
	for _, r := range rs {
		if slices.Contains(gone, r.ID) {
			victims = append(victims, r)
		} else {
			keep = append(keep, r)
		}
	}
	return keep, victims
}

// retire drains and stops replica id (already out of the route) through the
// engine and frees its node capacity.
func (c *Controller) retire(ctx context.Context, k, id string, st *objState) {
	c.mu.Lock()
	c.retiring[id] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.retiring, id)
		delete(c.owners, id)
		c.mu.Unlock()
	}()
	c.unplace(ctx, k, id, st)
}

// unplace drains and stops replica id and frees its node; the record keeps
// an evicted replica, so the next placement puts it on another node.
func (c *Controller) unplace(ctx context.Context, k, id string, st *objState) {
	if err := c.eng.Retire(ctx, id); err != nil {
		c.log.Warn("retire replica", "object", k, "replica", id, "err", err)
	}
	c.o.Cluster.Release(id)
	delete(st.instance, id)
	delete(st.pending, id)
	delete(st.waitRoom, id)
	delete(st.startErr, id)
	delete(st.crashed, id)
	delete(st.evictWhy, id)
}

// nodeEvent records an event on node for `capstan describe node`; a
// failure to record is logged, never fatal to the reconcile.
func (c *Controller) nodeEvent(node, reason, msg string) {
	if c.o.NodeEvents == nil {
		return
	}
	if err := c.o.NodeEvents.NodeEvent(context.Background(), node, reason, msg); err != nil {
		c.log.Warn("record node event", "node", node, "reason", reason, "err", err)
	}
}

// evicted lists the placed replicas whose node left the pool (a scale-in,
// a spot interruption, a failure, a plan's end), with the reason in
// st.evictWhy. Replicas on cordoned nodes are plan's to replace.
func (c *Controller) evicted(rec *record, st *objState) []string {
	var out []string
	for _, r := range rec.Replicas {
		if _, placed := st.instance[r.ID]; !placed {
			continue
		}
		if _, ok := c.o.Cluster.NodeOf(r.ID); ok {
			continue
		}
		st.evictWhy[r.ID] = "its node left the cluster"
		out = append(out, r.ID)
	}
	return out
}

// noteTieredOff says, once per cluster, that a tieredstorage KV tier
// without l2CacheSize runs on a cluster whose tiered storage is off, so it
// gets capstan's default budget rather than a share of the node's memory.
// A Normal event: the tier works (HyperPod itself requires the cluster's
// tiered storage; capstan serves the tier either way and says which budget).
func (c *Controller) noteTieredOff(k string, p *plan, st *objState) {
	if _, on := c.o.TieredStorage(p.cluster); on {
		st.tieredOff = ""
		return
	}
	if st.tieredOff == p.cluster {
		return
	}
	st.tieredOff = p.cluster
	c.event(k, manifest.EventNormal, ReasonTieredStorageOff, fmt.Sprintf(
		"cluster %s has tiered storage off (TieredStorageConfig; the tiered-storage add-on): the tieredstorage KV tier gets capstan's default budget, a tenth of the node's local storage; turn it on or set spec.kvCacheSpec.l2CacheSpec.l2CacheSize",
		p.cluster))
}

// placeAndStart places every listed replica that has no node yet and starts
// every placed replica the runtime does not run.
func (c *Controller) placeAndStart(ctx context.Context, k string, rec *record, p *plan, st *objState, res modelsource.Result) {
	for _, r := range rec.Replicas {
		it, placed := st.instance[r.ID]
		if !placed {
			var ok bool
			it, ok = c.place(k, r.ID, p, st)
			if !ok {
				continue
			}
		}
		node, _ := c.o.Cluster.NodeOf(r.ID)
		budget := c.tieredBytes(p, it)
		if p.tiered && p.l2Size == 0 && c.o.TieredStorage != nil {
			c.noteTieredOff(k, p, st)
		}
		if p.tiered && !c.runs(r.ID) {
			// Sized when it starts, from the disk there is then; a replica
			// that runs keeps its budget (a full disk costs misses).
			b, note, why := c.tieredBudget(p, it, node.Name)
			if why != "" {
				if st.startErr[r.ID] != why {
					c.event(k, manifest.EventWarning, ReasonInsufficientDisk, fmt.Sprintf("replica %s did not start: %s", r.ID, why))
				}
				st.startErr[r.ID] = why
				continue
			}
			if note != "" {
				c.event(k, manifest.EventNormal, "TieredStorageSized", note)
			}
			budget = b
		}
		started, err := c.eng.Ensure(ctx, c.replicaSpec(r.ID, p, it, node, budget, res))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if st.startErr[r.ID] != err.Error() {
				c.event(k, manifest.EventWarning, manifest.ReasonReplicaFailed, fmt.Sprintf("replica %s did not start: %v", r.ID, err))
			}
			st.startErr[r.ID] = err.Error()
			continue
		}
		delete(st.startErr, r.ID)
		c.noteCrash(k, r.ID, st)
		if !started {
			continue
		}
		c.event(k, manifest.EventNormal, "Started", fmt.Sprintf("replica %s started on node %s (%s)", r.ID, node.Name, where(node, r.ID, it)))
	}
}

// noteCrash records, with a ReplicaFailed event carrying the runtime's
// message, a replica the runtime reports failed, and forgets the failure
// once the replica is healthy.
func (c *Controller) noteCrash(k, id string, st *objState) {
	rep, err := c.rt.Get(id)
	if err != nil {
		return
	}
	switch rep.State {
	case runtime.StateHealthy:
		delete(st.crashed, id)
	case runtime.StateFailed:
		if st.crashed[id] != rep.Message {
			c.event(k, manifest.EventWarning, manifest.ReasonReplicaFailed, fmt.Sprintf("replica %s failed: %s", id, rep.Message))
			st.crashed[id] = rep.Message
		}
	}
}

// where describes what replica id holds on node: the instance type, and
// its MIG slice with the GPU it is on ("ml.p4d.24xlarge, MIG 1g.5gb on GPU 0").
func where(node cluster.Node, id string, it catalog.InstanceType) string {
	for _, sl := range node.Slices {
		if sl.ReplicaID == id {
			return fmt.Sprintf("%s, MIG %s on GPU %d", it.Name, sl.Profile, sl.GPU)
		}
	}
	return it.Name
}

// place tries the plan's instance types in order (every cluster type when
// it names none).
func (c *Controller) place(k, id string, p *plan, st *objState) (catalog.InstanceType, bool) {
	types := p.instanceTypes
	if len(types) == 0 {
		types = c.o.Cluster.InstanceTypes(p.cluster)
	}
	var reasons []string
	room := false
	for _, t := range types {
		it, err := c.o.Catalog.InstanceType(t)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		req := p.request(it)
		node, err := c.o.Cluster.Place(id, p.cluster, t, req)
		if err != nil {
			reasons = append(reasons, c.schedulingMessage(err, p.cluster, t, req))
			room = room || cluster.IsUnschedulable(err) && c.o.Cluster.CouldFit(p.cluster, t, req)
			continue
		}
		st.instance[id] = it
		delete(st.pending, id)
		delete(st.waitRoom, id)
		c.log.Info("replica placed", "object", k, "replica", id, "node", node)
		c.nodeEvent(node, "Scheduled", fmt.Sprintf("replica %s of %s bound to the node", id, k))
		return it, true
	}
	reason := "no instance type to place on"
	if len(reasons) > 0 {
		reason = reasons[0]
		for _, r := range reasons[1:] {
			reason += "; " + r
		}
	}
	if st.pending[id] != reason {
		c.event(k, manifest.EventWarning, "FailedScheduling", fmt.Sprintf("replica %s: %s", id, reason))
	}
	// Recorded in the pool for the node autoscaler, with the request on the
	// first type it may use (a JumpStartModel asks for all of its GPUs).
	pend := cluster.Pending{ReplicaID: id, Cluster: p.cluster, InstanceTypes: p.instanceTypes, Request: p.req}
	if len(types) > 0 {
		if it, err := c.o.Catalog.InstanceType(types[0]); err == nil {
			pend.Request = p.request(it)
		}
	}
	c.o.Cluster.SetPending(pend)
	st.pending[id] = reason
	st.waitRoom[id] = room
	return catalog.InstanceType{}, false
}

// schedulingMessage words a failure to place a replica asking req of
// instanceType on clusterName: where no node of the type takes it, by the
// cluster's groups of that type (Options.Groups), else as schedulingMessage.
func (c *Controller) schedulingMessage(err error, clusterName, instanceType string, req cluster.Resources) string {
	var u *cluster.UnschedulableError
	if !errors.As(err, &u) || u.Nodes > 0 || c.o.Groups == nil {
		return schedulingMessage(err)
	}
	return noNodeMessage(noNode{cluster: clusterName, instanceType: instanceType, req: req,
		groups: c.o.Groups(clusterName, instanceType), takes: func(layout string) bool { return c.layoutTakes(instanceType, layout, req) },
		autoscaled: c.o.Provisioned != nil && c.o.Provisioned(clusterName)})
}

// layoutTakes reports whether a node of instanceType whose GPUs a MIG
// layout cuts can hold req: whole GPUs want an uncut node, a MIG slice a
// layout with its profile. A layout the catalog cannot read is given the
// benefit of the doubt.
func (c *Controller) layoutTakes(instanceType, layout string, req cluster.Resources) bool {
	whole := layout == "" || layout == catalog.LayoutDisabled
	if req.MIGProfile == "" {
		return whole || req.GPUs == 0
	}
	if whole {
		return false
	}
	it, err := c.o.Catalog.InstanceType(instanceType)
	if err != nil {
		return true
	}
	gpu, err := c.o.Catalog.GPU(it.Device())
	if err != nil {
		return true
	}
	profiles, err := gpu.Layout(layout)
	return err != nil || slices.Contains(profiles, req.MIGProfile)
}

// ReasonInsufficientDisk is the Warning event of a replica that does not
// start because its node's tieredstorage budget does not fit on the disk.
const ReasonInsufficientDisk = "InsufficientDisk"

// ReasonTieredStorageOff is the event of a tieredstorage KV tier without
// l2CacheSize on a cluster whose tiered storage is off.
const ReasonTieredStorageOff = "TieredStorageOff"

// runs reports whether the runtime runs replica id (in any state but
// stopped).
func (c *Controller) runs(id string) bool {
	r, err := c.rt.Get(id)
	return err == nil && r.State != runtime.StateStopped
}

// replicaSpec is what the runtime starts for replica id on instance type it
// on node, with a tieredstorage budget of tiered bytes when the plan has
// that tier; the engine adds its own flags and the KV events port. The
// whole GPUs placement gave the replica on its node are its devices.
func (c *Controller) replicaSpec(id string, p *plan, it catalog.InstanceType, node cluster.Node, tiered int64, res modelsource.Result) runtime.ReplicaSpec {
	var tiers runtime.KVTiers
	if p.l1 {
		tiers.CPUBytes = p.l1Bytes(it)
	}
	if p.tiered {
		// One store directory per node, shared by every replica on it (of
		// any deployment); each model has its own file there, bounded by
		// the budget (replicas given another budget open another file).
		tiers.StorageDir, tiers.StorageBytes = tieredDir(c.o.DataDir, p.cluster, node.Name), tiered
	}
	tiers.RedisURL = p.l2URL
	var env map[string]string
	if len(p.env) > 0 {
		env = make(map[string]string, len(p.env))
		for _, k := range sortedEnvKeys(p.env) {
			env[k] = p.env[k]
		}
	}
	return runtime.ReplicaSpec{ID: id, Endpoint: p.route, Variant: VariantName, Controller: runtime.ControllerDeployment,
		Engine: p.engine, Model: res.Model, ModelDir: res.Dir, ServedModelName: p.route, GPU: it.Device(), TensorParallel: p.tensorParallel(it),
		MIGProfile: p.req.MIGProfile, Devices: placedGPUs(node, id), KVTiers: tiers, Env: env,
		Labels: map[string]string{"namespace": p.namespace, "deployment": p.name, "kind": p.kind, "endpoint": p.route, "instance_type": it.Name}}
}

// placedGPUs are the indices of the whole GPUs replica id holds on node, as
// CUDA_VISIBLE_DEVICES lists them (nil for none: a CPU type or a MIG slice,
// whose device ids only the driver knows).
func placedGPUs(node cluster.Node, id string) []string {
	for _, pl := range node.Placed {
		if pl.ReplicaID != id {
			continue
		}
		var out []string
		for _, g := range pl.GPUs {
			out = append(out, strconv.Itoa(g))
		}
		return out
	}
	return nil
}

// route is the deployment's gateway route: its serving replicas (minus
// excluded ones), each with its KV events endpoint, under the plan's routing
// strategy and request limits; sig identifies it, so an unchanged route is
// not set again.
func (c *Controller) route(p *plan, rec *record, model string, exclude []string) (route gateway.Route, sig string) {
	var ids []string
	for _, r := range rec.Replicas {
		if !slices.Contains(exclude, r.ID) {
			ids = append(ids, r.ID)
		}
	}
	backends := c.eng.Backends(ids)
	for i := range backends {
		// The router counts a block in a node's tieredstorage as near to
		// every replica on that node.
		if n, ok := c.o.Cluster.NodeOf(backends[i].ID); ok {
			backends[i].Node = n.Name
		}
	}
	vr := gateway.VariantRoute{Name: VariantName, Weight: 1, RoutingStrategy: p.strategy, Model: model, Backends: backends}
	route = gateway.Route{Endpoint: p.route, Variants: []gateway.VariantRoute{vr}}
	if n := len(vr.Backends); n > 0 && p.maxConcurrent > 0 {
		// Per-replica limits (the nginx sidecar's, upstream) summed over the
		// serving replicas; beyond them callers get 429.
		route.MaxConcurrency, route.MaxQueue = p.maxConcurrent*n, p.maxQueue*n
	}
	scaleToZero := p.autoscale != nil && p.autoscale.MinReplicaCount != nil && *p.autoscale.MinReplicaCount == 0
	// Replicas on their way (a restart, a rollout's gap) and none serving:
	// requests wait for one instead of failing, as at a SageMaker endpoint.
	coming := len(vr.Backends) == 0 && len(rec.Replicas) > 0
	hold := scaleToZero || coming
	if hold {
		route.Activator = c
	}
	b, _ := json.Marshal(struct {
		V    gateway.VariantRoute
		A    bool
		C, Q int
	}{vr, hold, route.MaxConcurrency, route.MaxQueue})
	return route, string(b)
}

// setRoute points the deployment's route at its serving replicas (minus
// excluded ones). An unchanged route is not set again.
func (c *Controller) setRoute(p *plan, rec *record, st *objState, model string, exclude []string) {
	if p == nil {
		return
	}
	route, sig := c.route(p, rec, model, exclude)
	if sig == st.routeSig {
		return
	}
	st.routeSig = sig
	c.o.Gateway.SetRoute(route)
	if len(route.Variants[0].Backends) > 0 && !st.coldStart.IsZero() {
		d := c.o.Clock.Now().Sub(st.coldStart)
		c.m.coldStart.WithLabelValues(p.namespace, p.name, p.kind).Observe(d.Seconds())
		c.log.Info("cold start complete", "route", p.route, "seconds", d.Seconds())
		st.coldStart = time.Time{}
	}
}

// account adds replica-seconds since the last reconcile.
func (c *Controller) account(k string, obj manifest.Object, st *objState, now time.Time) {
	m := obj.GetMeta()
	if !st.acctAt.IsZero() && st.acctN > 0 {
		if d := now.Sub(st.acctAt); d > 0 {
			c.m.replicaSeconds.WithLabelValues(m.Namespace, m.Name, obj.GetKind()).Add(d.Seconds() * float64(st.acctN))
		}
	}
	st.acctAt = now
	n := 0
	for id := range st.instance {
		if r, err := c.rt.Get(id); err == nil && r.State != runtime.StateStopped {
			n++
		}
	}
	st.acctN = n
}

func (c *Controller) reconcileDelete(ctx context.Context, k string, rec *record, st *objState) error {
	o := rec.obj()
	if o.GetStatus().State != manifest.StateDeletionInProgress {
		o.GetStatus().State = manifest.StateDeletionInProgress
		now := c.o.Clock.Now().UTC().Truncate(time.Second)
		o.GetStatus().Conditions = setCondition(o.GetStatus().Conditions, manifest.ConditionReady, manifest.ConditionFalse,
			manifest.ReasonDeleting, "draining and stopping replicas", o.GetMeta().Generation, now)
		if err := c.save(k, rec); err != nil {
			return err
		}
		c.event(k, manifest.EventNormal, "Deleting", "draining and stopping replicas")
	}
	p, _ := planFor(o, c.o.Engines)
	// Only the route this object serves goes; one of the same name served by
	// another object (which holds the name) stays.
	c.mu.Lock()
	route, owned := st.route, st.route != "" && c.routes[st.route] == k
	c.mu.Unlock()
	if owned {
		c.o.Gateway.DeleteRoute(route)
	}
	for _, r := range rec.Replicas {
		if ctx.Err() != nil {
			// Shutting down: the record stays Deleting and the next start
			// finishes the job.
			return ctx.Err()
		}
		c.retire(ctx, k, r.ID, st)
	}
	if p != nil && c.o.Endpoints != nil {
		for _, name := range []string{rec.Registered, p.endpointName} {
			if name == "" {
				continue
			}
			if err := c.o.Endpoints.DeleteManaged(ctx, name, p.owner()); err != nil {
				return fmt.Errorf("deregister endpoint %s: %w", name, err)
			}
		}
	}
	err := c.o.Store.Update(func(tx *store.Tx) error {
		var cur record
		found, err := tx.Get(bucket, k, &cur)
		if err != nil || !found {
			return err
		}
		if cur.Version != rec.Version {
			return errConflict
		}
		return tx.Delete(bucket, k)
	})
	if err != nil {
		return err
	}
	c.log.Info("deployment deleted", "object", k)
	c.forget(k)
	return nil
}

// forget drops the in-memory state of a deleted object.
func (c *Controller) forget(k string) {
	c.mu.Lock()
	st := c.states[k]
	delete(c.states, k)
	if st != nil && c.routes[st.route] == k {
		delete(c.routes, st.route)
	}
	for id, owner := range c.owners {
		if owner == k {
			delete(c.owners, id)
		}
	}
	c.mu.Unlock()
	if st != nil && st.pollStop != nil {
		st.pollStop()
	}
	if kind, ns, name, ok := splitKey(k); ok {
		c.m.forget(ns, name, kind)
	}
	c.dropEvents(k)
}

// managed is the SageMaker registration of the deployment.
func (c *Controller) managed(p *plan, rec *record, st *objState, status, reason string) endpoint.ManagedEndpoint {
	m := endpoint.ManagedEndpoint{Name: p.endpointName, Owner: p.owner(), Status: status, FailureReason: reason,
		Variant: VariantName, Model: st.model.Model, DesiredCount: c.desired(rec, p)}
	if len(p.instanceTypes) > 0 {
		m.InstanceType = p.instanceTypes[0]
	}
	for _, r := range rec.Replicas {
		if c.eng.Healthy(r.ID) {
			m.Replicas = append(m.Replicas, r.ID)
			if it, ok := st.instance[r.ID]; ok {
				m.InstanceType = it.Name
			}
		}
	}
	return m
}
