package hyperpod

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

const (
	g5 = "ml.g5.8xlarge"
	p5 = "ml.p5.48xlarge"
)

var t0 = time.Date(2030, 1, 6, 12, 0, 0, 0, time.UTC)

var ctx = context.Background()

type workloads map[string][]string

func (w workloads) InCluster(c string) []string { return w[c] }

type env struct {
	t     *testing.T
	path  string
	fleet fleet.Capacity
	st    *store.Store
	clk   *clock.Fake
	cal   *capacity.Calendar
	pool  *cluster.Cluster
	svc   *Service
	work  workloads
	reg   *prometheus.Registry
	mod   func(*Options)
}

// newEnv builds a service over a real store, calendar and pool with a
// small fleet; mod adjusts the options.
func newEnv(t *testing.T, c fleet.Capacity, mod func(*Options)) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "capstan.db"), fleet: c, clk: clock.NewFake(t0), work: workloads{}, mod: mod}
	e.open(1)
	return e
}

func (e *env) open(seed uint64) {
	t := e.t
	t.Helper()
	st, err := store.Open(e.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cal, err := capacity.New(st, catalog.Default(), e.clk, e.fleet)
	if err != nil {
		t.Fatal(err)
	}
	e.st, e.cal, e.pool, e.reg = st, cal, cluster.NewPool(e.clk), prometheus.NewRegistry()
	o := Options{Store: st, Clock: e.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: e.reg,
		Catalog: catalog.Default(), Capacity: cal, Plans: cal, PlanNodes: cal, Pool: e.pool, Workloads: e.work,
		Spot: SpotOptions{Seed: 7}, Rand: rand.New(rand.NewPCG(seed, 99))}
	if e.mod != nil {
		e.mod(&o)
	}
	if e.svc, err = New(o); err != nil {
		t.Fatal(err)
	}
}

// reopen simulates a kill -9 and restart: a fresh store handle, calendar,
// pool and service over the same file, primed.
func (e *env) reopen() {
	e.t.Helper()
	if err := e.st.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open(2)
	if err := e.svc.Prime(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// step moves the clock and reconciles.
func (e *env) step(d time.Duration) {
	e.t.Helper()
	e.clk.Step(d)
	if err := e.svc.Reconcile(ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) nodes(cl string) []Node {
	e.t.Helper()
	ns, err := e.svc.Nodes(ctx, cl)
	if err != nil {
		e.t.Fatal(err)
	}
	return ns
}

func (e *env) cluster(name string) Cluster {
	e.t.Helper()
	c, _, err := e.svc.Cluster(ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// poolNodes is the pool's nodes of cluster cl.
func (e *env) poolNodes(cl string) []cluster.Node {
	var out []cluster.Node
	for _, n := range e.pool.Nodes() {
		if n.Cluster == cl {
			out = append(out, n)
		}
	}
	return out
}

// held is what the cluster holds of the capacity.
func (e *env) held(cl string) capacity.Holding {
	e.t.Helper()
	var h capacity.Holding
	if err := e.st.View(func(tx *store.Tx) error {
		_, err := tx.Get(capacity.KindHoldings, owner(cl), &h)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return h
}

func heldOf(h capacity.Holding, typ string) int {
	n := 0
	for _, c := range h.Instances[typ] {
		n += c
	}
	return n
}

func (e *env) events(cl, node string) []Event {
	e.t.Helper()
	evs, err := e.svc.Events(ctx, cl, node)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func hasEvent(evs []Event, reason string) bool {
	for _, ev := range evs {
		if ev.Reason == reason {
			return true
		}
	}
	return false
}

func countStatus(ns []Node, st NodeStatus) int {
	c := 0
	for _, n := range ns {
		if n.Status == st {
			c++
		}
	}
	return c
}

func group(name, typ string, n int) InstanceGroupSpec {
	return InstanceGroupSpec{Name: name, InstanceType: typ, Count: n, ExecutionRole: "arn:aws:iam::000000000000:role/exec"}
}

func spec(name string, gs ...InstanceGroupSpec) ClusterSpec {
	return ClusterSpec{Name: name, Groups: gs}
}

// buyPlan buys a hyperpod-cluster plan of n p5 instances for a week,
// starting within the next days.
func (e *env) buyPlan(name string, n int, target string) capacity.Plan {
	e.t.Helper()
	offers, err := e.cal.Search(capacity.Query{InstanceType: p5, Count: n, Duration: 168 * time.Hour,
		TargetResources: []string{target}, StartAfter: e.clk.Now().Add(time.Hour), EndBefore: e.clk.Now().Add(30 * 24 * time.Hour)})
	if err != nil || len(offers) == 0 {
		e.t.Fatalf("search: %d offerings, %v", len(offers), err)
	}
	p, err := e.cal.CreatePlan(name, offers[0].ID, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func asField(t *testing.T, err error) *FieldError {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v (%T), want *FieldError", err, err)
	}
	return fe
}

var _ placement.Allocator = (*capacity.Calendar)(nil)
