package hyperpod

import (
	"context"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// loseHolding simulates a cluster whose holding was lost (a record from
// before holdings were kept with it) while another owner took takes
// instances of typ: the controller must notice the shortage itself.
func (e *env) loseHolding(name, typ string, takes int) {
	e.t.Helper()
	if err := e.st.Update(func(tx *store.Tx) error {
		rec, err := resolve(tx, name)
		if err != nil {
			return err
		}
		rec.Held = nil
		if err := tx.Put(KindCluster, name, rec); err != nil {
			return err
		}
		if err := e.cal.Set(tx, owner(name), nil); err != nil {
			return err
		}
		return e.cal.Set(tx, "endpoint/other", placement.Want{placement.OnDemand(typ): takes})
	}); err != nil {
		e.t.Fatal(err)
	}
}

// TestShortageWhileCreating: a creating cluster that cannot hold its nodes
// rolls back and fails with SageMaker's message, releasing everything.
func TestShortageWhileCreating(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("w", g5, 2))); err != nil {
		t.Fatal(err)
	}
	e.loseHolding("c1", g5, 3)
	e.step(time.Second)
	if c := e.cluster("c1"); c.Status != StatusRollingBack || c.FailureMessage != InsufficientCapacityMessage {
		t.Fatalf("after the shortage: %+v", c)
	}
	e.step(time.Second)
	c := e.cluster("c1")
	if c.Status != StatusFailed || c.Groups[0].Status != GroupFailed || len(e.nodes("c1")) != 0 {
		t.Fatalf("after the rollback: %+v, nodes %+v", c, e.nodes("c1"))
	}
	if h := e.held("c1"); h.Owner != "" {
		t.Fatalf("a failed cluster holds %+v", h)
	}
	if !hasEvent(e.events("c1", ""), "InsufficientCapacity") {
		t.Fatal("no InsufficientCapacity event")
	}
	if _, err := e.svc.DeleteCluster(ctx, "c1"); err != nil {
		t.Fatalf("delete a failed cluster: %v", err)
	}
	e.step(time.Second)
	if cs, _ := e.svc.Clusters(ctx); len(cs) != 0 {
		t.Fatalf("clusters %+v", cs)
	}
}

// TestShortageInService: an InService cluster that cannot replace a node
// keeps what runs, its group Degraded with a Warning event, and recovers
// once capacity is free.
func TestShortageInService(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, nil)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("w", g5, 2))); err != nil {
		t.Fatal(err)
	}
	e.step(30 * time.Second)
	e.loseHolding("c1", g5, 3)
	victim := e.nodes("c1")[0]
	if _, err := e.svc.FailNode(ctx, victim.ID); err != nil {
		t.Fatal(err)
	}
	e.step(time.Second)
	c := e.cluster("c1")
	ns := e.nodes("c1")
	if c.Status != StatusInService || c.Groups[0].Status != GroupDegraded || len(ns) != 1 || ns[0].Status != NodeRunning {
		t.Fatalf("short: %+v nodes %+v", c, ns)
	}
	evs := e.events("c1", "")
	if !hasEvent(evs, "InsufficientCapacity") {
		t.Fatalf("events %+v", evs)
	}
	if h := heldOf(e.held("c1"), g5); h != 1 {
		t.Fatalf("held %d, want the 1 running", h)
	}
	if err := e.st.Update(func(tx *store.Tx) error { return e.cal.Set(tx, "endpoint/other", nil) }); err != nil {
		t.Fatal(err)
	}
	e.step(time.Second)
	e.step(30 * time.Second)
	if c := e.cluster("c1"); c.Groups[0].Status != GroupInService || countStatus(e.nodes("c1"), NodeRunning) != 2 {
		t.Fatalf("after capacity came back: %+v", c)
	}
}

// TestRun: the controller loop reacts to a new cluster and follows the
// clock's resync ticks.
func TestRun(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, nil)
	e.run(t)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("w", g5, 1))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	// The pool hears of a node just after its record commits.
	for e.cluster("c1").Status != StatusInService || len(e.poolNodes("c1")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not InService: %+v", e.cluster("c1"))
		}
		e.clk.Step(time.Second) // each step is a resync tick
		<-time.After(time.Millisecond)
	}
}

// TestRunWakesWhenALaunchIsDone: a node is ready once its launch time is
// up, not at the next resync tick (10 s here).
func TestRunWakesWhenALaunchIsDone(t *testing.T) {
	e := newEnv(t, fleet.Capacity{g5: {"a": 4}}, func(o *Options) {
		o.Resync = 10 * time.Second
		o.LaunchTime = func(string) time.Duration { return 300 * time.Millisecond }
	})
	e.run(t)
	if _, err := e.svc.CreateCluster(ctx, spec("c1", group("w", g5, 1))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.clk.Waiters() < 2 { // the ticker and the launch's timer
		if time.Now().After(deadline) {
			t.Fatalf("no timer for the launching node; nodes %+v", e.nodes("c1"))
		}
		<-time.After(time.Millisecond)
	}
	if n := countStatus(e.nodes("c1"), NodeRunning); n != 0 {
		t.Fatalf("%d nodes running before their launch time", n)
	}
	e.clk.Step(300 * time.Millisecond)
	for countStatus(e.nodes("c1"), NodeRunning) != 1 || len(e.poolNodes("c1")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not running 300 ms after launch: %+v", e.nodes("c1"))
		}
		<-time.After(time.Millisecond)
	}
}

// run starts the service's Run loop until the test ends and waits for its
// resync ticker.
func (e *env) run(t *testing.T) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.svc.Run(rctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.clk.BlockUntil(1)
}
