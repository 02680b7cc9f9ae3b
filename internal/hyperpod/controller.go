package hyperpod

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// pass collects one transaction's writes to node records and events, and
// the pool changes and metrics that follow its commit (the pool is not
// transactional: it changes only once the records say so).
type pass struct {
	s      *Service
	tx     *store.Tx
	now    time.Time
	puts   map[string]Node
	dels   map[string]bool
	events map[string][]Event
	after  []func()
	reps   map[string]int // pool node name → replicas on it; read lazily
	// wake is the earliest moment after now at which a node changes by the
	// clock alone (a launch completes), so Run looks then, not at the next
	// resync tick; zero when none.
	wake time.Time
}

// wakeAt asks for a reconcile at t.
func (p *pass) wakeAt(t time.Time) {
	if p.wake.IsZero() || t.Before(p.wake) {
		p.wake = t
	}
}

func (s *Service) newPass(tx *store.Tx, now time.Time) *pass {
	return &pass{s: s, tx: tx, now: now, puts: map[string]Node{}, dels: map[string]bool{}, events: map[string][]Event{}}
}

func (p *pass) put(n Node) {
	p.puts[n.ID] = n
	delete(p.dels, n.ID)
}

func (p *pass) del(id string) {
	p.dels[id] = true
	delete(p.puts, id)
}

func (p *pass) event(clusterName, node, typ, reason, msg string) {
	p.events[clusterName] = append(p.events[clusterName], Event{Time: p.now, Cluster: clusterName, Node: node, Type: typ, Reason: reason, Message: msg})
	p.after = append(p.after, func() {
		p.s.metrics.event(reason)
		lvl := p.s.log.Info
		if typ == "Warning" {
			lvl = p.s.log.Warn
		}
		lvl("hyperpod: "+msg, "cluster", clusterName, "node", node, "reason", reason)
	})
}

// remove takes a node out of the pool after the commit; its replicas are
// evicted and their controller reschedules them.
func (p *pass) remove(name string) {
	p.after = append(p.after, func() {
		if ev := p.s.o.Pool.RemoveNode(name); len(ev) > 0 {
			p.s.log.Info("hyperpod: node left the pool, replicas evicted", "node", name, "replicas", ev)
		}
	})
}

func (p *pass) cordon(name string) {
	p.after = append(p.after, func() { _, _ = p.s.o.Pool.Cordon(name, true) }) // a node not in the pool has nothing to cordon
}

// replicas is how many replicas the pool has on node name.
func (p *pass) replicas(name string) int {
	if p.reps == nil {
		p.reps = map[string]int{}
		for _, n := range p.s.o.Pool.Nodes() {
			p.reps[n.Name] = len(n.Replicas)
		}
	}
	return p.reps[name]
}

// flush writes the collected node records and events into the transaction.
func (p *pass) flush() error {
	for id := range p.dels {
		if err := p.tx.Delete(KindNode, id); err != nil {
			return err
		}
	}
	for id, n := range p.puts {
		if err := p.tx.Put(KindNode, id, n); err != nil {
			return err
		}
	}
	for c, evs := range p.events {
		if !p.tx.Exists(KindCluster, c) {
			continue // the cluster went in this pass; so do its events
		}
		var log eventLog
		if _, err := p.tx.Get(KindEvents, c, &log); err != nil {
			return err
		}
		log.Events = append(log.Events, evs...)
		if n := len(log.Events); n > MaxEvents {
			log.Events = log.Events[n-MaxEvents:]
		}
		if err := p.tx.Put(KindEvents, c, log); err != nil {
			return err
		}
	}
	return nil
}

// apply runs what follows the commit.
func (p *pass) apply() {
	for _, f := range p.after {
		f()
	}
}

// launch starts a Pending node in g.
func (p *pass) launch(rec *record, g *Group, reason string, nodes []Node) Node {
	s := p.s
	n := Node{ID: s.newNodeID(p.tx), Cluster: rec.Name, Group: g.Name, InstanceType: g.InstanceType,
		CapacityType: g.CapacityType(), Status: NodePending, Launched: p.now, Reason: reason,
		PricePerHour: s.price(g.InstanceGroupSpec), Plan: g.Plan, MIGLayout: g.MIGLayout}
	if g.CapacityType() != CapacityReserved {
		n.Zone = p.onDemandZone(rec.Name, g.InstanceType, nodes)
	}
	if g.Spot {
		n.InterruptAt = s.interruptAt(n.ID, n.Launched)
	}
	p.put(n)
	p.event(rec.Name, n.ID, "Normal", "NodeLaunching", fmt.Sprintf("node %s (%s, %s) launching: %s", n.ID, n.InstanceType, n.CapacityType, reason))
	return n
}

// onDemandZone picks the zone of a new on-demand or spot node: the first
// zone (in name order) where the cluster's holding has more instances of
// the type than it has nodes.
func (p *pass) onDemandZone(clusterName, instanceType string, nodes []Node) string {
	var a fleet.Allocation
	if _, err := p.tx.Get(fleet.Kind, owner(clusterName), &a); err != nil {
		return ""
	}
	used := map[string]int{}
	for _, n := range nodes {
		if n.InstanceType == instanceType && n.Plan.IsZero() {
			used[n.Zone]++
		}
	}
	zones := make([]string, 0, len(a.Instances[instanceType]))
	for z := range a.Instances[instanceType] {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		if a.Instances[instanceType][z] > used[z] {
			return z
		}
	}
	return ""
}

// planZone picks a reserved node's zone from the plan's nodes: the first
// one whose zone has fewer of the cluster's nodes than the plan provides.
func planZone(specs []placement.NodeSpec, ref placement.PlanRef, nodes []Node) string {
	used := map[string]int{}
	for _, n := range nodes {
		if n.Plan == ref && n.Status != NodePending {
			used[n.Zone]++
		}
	}
	for _, sp := range specs {
		if used[sp.Zone] > 0 {
			used[sp.Zone]--
			continue
		}
		return sp.Zone
	}
	return ""
}

// leave starts a node's way out: ShuttingDown and cordoned, so its replicas
// move; it leaves once empty or after DrainTimeout.
func (p *pass) leave(n *Node, why string) {
	n.Status, n.Leaving, n.Message = NodeShuttingDown, p.now, why
	p.put(*n)
	p.cordon(n.Name())
	p.event(n.Cluster, n.ID, "Normal", "NodeShuttingDown", fmt.Sprintf("node %s shutting down: %s", n.ID, why))
}

// terminate removes a node: out of the pool, record deleted.
func (p *pass) terminate(n Node, typ, reason, msg string) {
	p.remove(n.Name())
	p.del(n.ID)
	p.event(n.Cluster, n.ID, typ, reason, msg)
}

// makeReady turns a Pending node Running and into the pool.
func (s *Service) makeReady(p *pass, rec *record, n *Node) {
	n.Status, n.Ready, n.Message = NodeRunning, p.now, ""
	p.put(*n)
	spec, specErr := s.nodeSpec(*n)
	latency := n.Ready.Sub(n.Launched)
	p.after = append(p.after, func() {
		err := specErr
		if err == nil {
			err = s.o.Pool.AddNode(spec)
		}
		if err != nil {
			s.log.Error("hyperpod: node could not join the pool", "node", spec.Name, "err", err)
		}
		s.metrics.launched(latency)
	})
	p.event(rec.Name, n.ID, "Normal", "NodeReady", fmt.Sprintf("node %s is ready after %s", n.ID, latency))
}

// ended reports whether a reserved group's plan is gone or over; started
// whether it has begun.
func (s *Service) planState(g InstanceGroupSpec, now time.Time) (info placement.PlanInfo, started, ended bool) {
	info, ok := s.o.Plans.Plan(g.Plan)
	if !ok {
		return info, false, true
	}
	return info, !now.Before(info.Start), !now.Before(info.End)
}

// retiring reports whether the cluster is on its way out: its nodes leave
// and none launch.
func (rec *record) retiring() bool {
	return rec.Status == StatusDeleting || rec.Status == StatusRollingBack || rec.Status == StatusFailed
}

// converge moves a cluster's nodes toward its groups' targets and updates
// its statuses, writing through p. nodes are its stored nodes as the caller
// has changed them.
func (s *Service) converge(p *pass, rec *record, nodes []Node) (bool, error) {
	now := p.now
	replace := map[string][]string{} // group → reasons of replacements owed
	live := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		g := rec.group(n.Group)
		reserved := !n.Plan.IsZero()
		var info placement.PlanInfo
		var started, ended bool
		if reserved {
			info, started, ended = s.planState(InstanceGroupSpec{Plan: n.Plan}, now)
		}
		switch {
		case n.Status == NodeShuttingDown:
		case n.Status == NodeFailure:
			if rec.NodeRecovery == RecoveryAutomatic && !rec.retiring() && g != nil && g.Status != GroupDeleting {
				p.event(rec.Name, n.ID, "Normal", "NodeRecovery", fmt.Sprintf("node %s failed its health check; replacing it", n.ID))
				p.terminate(n, "Normal", "NodeTerminated", fmt.Sprintf("node %s terminated (node recovery)", n.ID))
				replace[n.Group] = append(replace[n.Group], "replaces "+n.ID+" (node recovery)")
				continue
			}
		case !n.InterruptAt.IsZero() && !now.Before(n.InterruptAt):
			p.terminate(n, "Warning", "SpotInterrupted", fmt.Sprintf("spot node %s was interrupted", n.ID))
			replace[n.Group] = append(replace[n.Group], "replaces "+n.ID)
			continue
		case reserved && ended:
			p.terminate(n, "Warning", "TrainingPlanEnded", fmt.Sprintf("training plan %s ended; node %s is gone", info.Name, n.ID))
			continue
		case n.Status == NodeRunning:
			if !n.InterruptAt.IsZero() && !n.Noticed && !now.Before(n.InterruptAt.Add(-SpotNotice)) {
				n.Noticed = true
				p.put(n)
				p.cordon(n.Name())
				p.event(rec.Name, n.ID, "Warning", "SpotInterruptionWarning",
					fmt.Sprintf("spot node %s will be interrupted at %s", n.ID, n.InterruptAt.Format(time.RFC3339)))
			}
		case n.Status == NodePending:
			from := n.Launched
			if reserved {
				if !started {
					if msg := "waiting for training plan " + info.Name + " to start"; n.Message != msg {
						n.Message = msg
						p.put(n)
					}
					break
				}
				from = later(from, info.Start)
			}
			if readyAt := from.Add(s.o.LaunchTime(n.InstanceType)); now.Before(readyAt) {
				p.wakeAt(readyAt)
				break
			}
			if reserved {
				specs, err := s.o.PlanNodes.Nodes(n.Plan)
				if err != nil {
					return false, fmt.Errorf("hyperpod: nodes of plan %s: %w", n.Plan, err)
				}
				if n.Zone = planZone(specs, n.Plan, live); n.Zone == "" {
					break // the plan provides no more nodes now
				}
			}
			s.makeReady(p, rec, &n)
		}
		live = append(live, n)
	}
	nodes = live

	// Groups above their target retire nodes: empty ones first, then the
	// newest.
	for gi := range rec.Groups {
		g := &rec.Groups[gi]
		target := g.Target
		if rec.retiring() || g.Status == GroupDeleting {
			target = 0
		}
		var active []int
		for i, n := range nodes {
			if n.Group == g.Name && n.Status != NodeShuttingDown {
				active = append(active, i)
			}
		}
		if len(active) <= target {
			continue
		}
		sort.SliceStable(active, func(a, b int) bool {
			x, y := nodes[active[a]], nodes[active[b]]
			ex, ey := p.replicas(x.Name()) == 0, p.replicas(y.Name()) == 0
			if ex != ey {
				return ex
			}
			if !x.Launched.Equal(y.Launched) {
				return x.Launched.After(y.Launched)
			}
			return x.ID > y.ID // the last in Nodes order
		})
		why := fmt.Sprintf("instance group %s scaled in to %d", g.Name, target)
		if target == 0 && (rec.retiring() || g.Status == GroupDeleting) {
			why = "instance group deleted"
			if rec.retiring() {
				why = "cluster " + string(rec.Status)
			}
		}
		for _, i := range active[:len(active)-target] {
			p.leave(&nodes[i], why)
		}
	}

	// A group whose MIG layout changed replaces its nodes of the old
	// layout one at a time: one leaves (cordoned, its replicas move) and
	// the launch below replaces it; the next goes once the group has no
	// node leaving or launching.
	if !rec.retiring() {
		for gi := range rec.Groups {
			g := &rec.Groups[gi]
			if g.Status == GroupDeleting || count(nodes, g.Name, func(n Node) bool {
				return n.Status == NodeShuttingDown || n.Status == NodePending
			}) > 0 {
				continue
			}
			i := slices.IndexFunc(nodes, func(n Node) bool { return n.Group == g.Name && !sameLayout(n.MIGLayout, g.MIGLayout) })
			if i < 0 {
				continue
			}
			x := &nodes[i]
			p.leave(x, fmt.Sprintf("instance group %s's MIG layout changed from %s to %s", g.Name, layoutName(x.MIGLayout), layoutName(g.MIGLayout)))
			replace[g.Name] = append(replace[g.Name], fmt.Sprintf("replaces %s (MIG layout %s)", x.ID, layoutName(g.MIGLayout)))
		}
	}

	// Leaving nodes go once empty or after DrainTimeout.
	live = nodes[:0]
	for _, n := range nodes {
		if n.Status == NodeShuttingDown && (p.replicas(n.Name()) == 0 || !now.Before(n.Leaving.Add(s.o.DrainTimeout))) {
			p.terminate(n, "Normal", "NodeTerminated", fmt.Sprintf("node %s terminated", n.ID))
			continue
		}
		live = append(live, n)
	}
	nodes = live

	// Deleted groups without nodes go; a retiring cluster without nodes
	// ends.
	groups := rec.Groups[:0]
	for _, g := range rec.Groups {
		if g.Status == GroupDeleting && count(nodes, g.Name, nil) == 0 {
			p.event(rec.Name, "", "Normal", "InstanceGroupDeleted", fmt.Sprintf("instance group %s deleted", g.Name))
			continue
		}
		groups = append(groups, g)
	}
	rec.Groups = groups
	if rec.retiring() {
		if err := s.release(p.tx, rec, nodes); err != nil {
			return false, err
		}
		if len(nodes) == 0 {
			switch rec.Status {
			case StatusDeleting:
				if err := s.o.Capacity.Set(p.tx, owner(rec.Name), nil); err != nil {
					return false, fmt.Errorf("hyperpod: release %s: %w", rec.Name, err)
				}
				for _, k := range []string{KindCluster, KindEvents} {
					if err := p.tx.Delete(k, rec.Name); err != nil {
						return false, err
					}
				}
				p.after = append(p.after, func() { s.log.Info("hyperpod: cluster deleted", "cluster", rec.Name) })
				return true, nil
			case StatusRollingBack:
				rec.Status = StatusFailed
				for i := range rec.Groups {
					rec.Groups[i].Status = GroupFailed
				}
				p.event(rec.Name, "", "Warning", "ClusterFailed", rec.FailureMessage)
			}
		}
		return false, s.save(p.tx, rec)
	}

	// Launch up to the targets, holding their capacity first.
	short := map[string]bool{}
	if err := s.hold(p.tx, rec, nodes); err != nil {
		var ce *CapacityError
		if !errors.As(err, &ce) {
			return false, err
		}
		if rec.Status == StatusCreating {
			rec.Status, rec.FailureMessage = StatusRollingBack, InsufficientCapacityMessage
			p.event(rec.Name, "", "Warning", "InsufficientCapacity", fmt.Sprintf("%v; rolling back", err))
			for i := range nodes {
				if nodes[i].Status != NodeShuttingDown {
					p.leave(&nodes[i], "cluster RollingBack")
				}
			}
			return false, s.save(p.tx, rec)
		}
		// Keep what runs; the groups that lack nodes are Degraded.
		if err := s.release(p.tx, rec, nodes); err != nil {
			s.log.Warn("hyperpod: cannot hold the cluster's current nodes", "cluster", rec.Name, "err", err)
		}
		for _, g := range rec.Groups {
			if count(nodes, g.Name, notLeaving) < g.Target {
				short[g.Name] = true
			}
		}
	}
	for gi := range rec.Groups {
		g := &rec.Groups[gi]
		if short[g.Name] || g.Status == GroupDeleting {
			continue
		}
		if !g.Plan.IsZero() {
			if _, _, ended := s.planState(g.InstanceGroupSpec, now); ended {
				continue
			}
		}
		for range g.Target - count(nodes, g.Name, notLeaving) {
			reason := "instance group count"
			if q := replace[g.Name]; len(q) > 0 {
				reason, replace[g.Name] = q[0], q[1:]
			}
			nodes = append(nodes, p.launch(rec, g, reason, nodes))
		}
	}

	s.statuses(p, rec, nodes, short)
	return false, s.save(p.tx, rec)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func notLeaving(n Node) bool { return n.Status != NodeShuttingDown }

// count is how many of nodes are in group and pass keep (nil: all).
func count(nodes []Node, group string, keep func(Node) bool) int {
	c := 0
	for _, n := range nodes {
		if n.Group == group && (keep == nil || keep(n)) {
			c++
		}
	}
	return c
}

// release lowers the holding to the node records alone (retiring clusters
// and clusters short of capacity launch nothing more).
func (s *Service) release(tx *store.Tx, rec *record, nodes []Node) error {
	w := placement.Want{}
	for _, n := range nodes {
		if !n.Plan.IsZero() {
			if _, _, ended := s.planState(InstanceGroupSpec{Plan: n.Plan}, s.o.Clock.Now()); ended {
				continue
			}
		}
		w[source(InstanceGroupSpec{InstanceType: n.InstanceType, Plan: n.Plan})]++
	}
	if wantEqual(w, rec.Held) {
		return nil
	}
	if err := s.o.Capacity.Set(tx, owner(rec.Name), w); err != nil {
		return fmt.Errorf("hyperpod: hold %s: %w", rec.Name, err)
	}
	rec.Held = w
	return nil
}

// statuses sets each group's status from its nodes, and the cluster's
// once every group is settled.
func (s *Service) statuses(p *pass, rec *record, nodes []Node, short map[string]bool) {
	settled := true
	for gi := range rec.Groups {
		g := &rec.Groups[gi]
		if g.Status == GroupDeleting {
			settled = false
			continue
		}
		running := count(nodes, g.Name, func(n Node) bool { return n.Status == NodeRunning && sameLayout(n.MIGLayout, g.MIGLayout) })
		failed := count(nodes, g.Name, func(n Node) bool { return n.Status == NodeFailure })
		leaving := count(nodes, g.Name, func(n Node) bool { return n.Status == NodeShuttingDown })
		waiting, ended := false, false
		if !g.Plan.IsZero() {
			var started bool
			_, started, ended = s.planState(g.InstanceGroupSpec, p.now)
			waiting = !started
		}
		st := GroupUpdating
		switch {
		case short[g.Name] || ended && g.Target > 0 || failed > 0:
			st = GroupDegraded
		case running == g.Target && leaving == 0:
			st = GroupInService
		case rec.Status == StatusCreating:
			st = GroupCreating
		}
		if st == GroupDegraded && g.Status != GroupDegraded && short[g.Name] {
			p.event(rec.Name, "", "Warning", "InsufficientCapacity", fmt.Sprintf(
				"instance group %s: not enough %s capacity for %d nodes", g.Name, g.CapacityType(), g.Target))
		}
		g.Status = st
		if st != GroupInService && st != GroupDegraded && !waiting {
			settled = false
		}
	}
	if settled && (rec.Status == StatusCreating || rec.Status == StatusUpdating) {
		rec.Status = StatusInService
		p.event(rec.Name, "", "Normal", "ClusterInService", fmt.Sprintf("cluster %s is InService", rec.Name))
	}
}

// save writes rec if it differs from the stored record, so a steady
// cluster costs no write.
func (s *Service) save(tx *store.Tx, rec *record) error {
	var old record
	found, err := tx.Get(KindCluster, rec.Name, &old)
	if err != nil {
		return err
	}
	a, err := json.Marshal(old)
	if err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if found && bytes.Equal(a, b) {
		return nil
	}
	return tx.Put(KindCluster, rec.Name, rec)
}

// Reconcile makes one pass over every cluster. Each cluster's pass is one
// transaction; an error in one does not stop the others.
func (s *Service) Reconcile(_ context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Clock.Now().UTC()
	var names []string
	if err := s.o.Store.View(func(tx *store.Tx) error {
		return tx.Each(KindCluster, func(name string, _ []byte) error { names = append(names, name); return nil })
	}); err != nil {
		return fmt.Errorf("hyperpod: list clusters: %w", err)
	}
	var errs []error
	s.wake = time.Time{}
	for _, name := range names {
		var p *pass
		err := s.o.Store.Update(func(tx *store.Tx) error {
			rec, err := resolve(tx, name)
			if err != nil {
				return err
			}
			nodes, err := clusterNodes(tx, name)
			if err != nil {
				return err
			}
			p = s.newPass(tx, now)
			if _, err := s.converge(p, &rec, nodes); err != nil {
				return err
			}
			return p.flush()
		})
		var nf *NotFoundError
		if errors.As(err, &nf) {
			continue // deleted meanwhile
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("hyperpod: reconcile %s: %w", name, err))
			continue
		}
		p.apply()
		if !p.wake.IsZero() && (s.wake.IsZero() || p.wake.Before(s.wake)) {
			s.wake = p.wake
		}
	}
	if err := s.observe(now); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// observe sets the node gauges and accrues node hours and cost up to now.
func (s *Service) observe(now time.Time) error {
	if s.metrics == nil {
		return nil
	}
	var nodes []Node
	if err := s.o.Store.View(func(tx *store.Tx) error {
		var err error
		nodes, err = clusterNodes(tx, "")
		return err
	}); err != nil {
		return fmt.Errorf("hyperpod: read nodes: %w", err)
	}
	s.metrics.observe(nodes, s.accruedAt, now)
	s.accruedAt = later(s.accruedAt, now)
	return nil
}

// Prime puts every stored Running node into the pool (leaving and warned
// ones cordoned), so that after a restart deployments find the nodes they
// ran on and nothing is launched twice. Call it before deployments place.
func (s *Service) Prime(_ context.Context) error {
	var nodes []Node
	var recs []record
	if err := s.o.Store.View(func(tx *store.Tx) error {
		var err error
		if nodes, err = clusterNodes(tx, ""); err != nil {
			return err
		}
		recs, err = store.List[record](tx, KindCluster)
		return err
	}); err != nil {
		return fmt.Errorf("hyperpod: prime: %w", err)
	}
	in := map[string]bool{}
	for _, n := range s.o.Pool.Nodes() {
		in[n.Name] = true
	}
	var errs []error
	for _, n := range nodes {
		if n.Ready.IsZero() || n.Status == NodePending || n.Status == NodeFailure || in[n.Name()] {
			continue
		}
		spec, err := s.nodeSpec(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := s.o.Pool.AddNode(spec); err != nil {
			errs = append(errs, err)
			continue
		}
		if n.Status == NodeShuttingDown || n.Noticed {
			if _, err := s.o.Pool.Cordon(n.Name(), true); err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.log.Info("hyperpod: primed the node pool", "clusters", len(recs), "nodes", len(nodes))
	return errors.Join(errs...)
}

// Run reconciles on every change to clusters, nodes or capacity holdings,
// on each Resync tick of the clock, and when a launching node's time is up
// (so a node is ready after its launch time, not at the next tick), until
// ctx ends.
func (s *Service) Run(ctx context.Context) {
	keys := s.o.Store.Watch(ctx)
	tick := s.o.Clock.NewTicker(s.o.Resync)
	defer tick.Stop()
	var wake clock.Timer
	defer func() {
		if wake != nil {
			wake.Stop()
		}
	}()
	for {
		var woken <-chan time.Time
		if wake != nil {
			woken = wake.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		case <-woken:
		case k, ok := <-keys:
			if !ok {
				return
			}
			if k.Kind != KindCluster && k.Kind != KindNode && k.Kind != fleet.Kind {
				continue
			}
			drain(keys) // one pass covers every change so far
		}
		if err := s.Reconcile(ctx); err != nil {
			s.log.Error("hyperpod: reconcile", "err", err)
		}
		if wake != nil {
			wake.Stop()
			wake = nil
		}
		s.mu.Lock()
		at := s.wake
		s.mu.Unlock()
		if d := at.Sub(s.o.Clock.Now()); !at.IsZero() && d < s.o.Resync {
			wake = s.o.Clock.NewTimer(max(d, 0))
		}
	}
}

// drain discards the keys already queued.
func drain(keys <-chan store.Key) {
	for {
		select {
		case _, ok := <-keys:
			if !ok {
				return
			}
		default:
			return
		}
	}
}
