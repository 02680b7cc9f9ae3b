package nodes

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

// fakeState is an in-test State: fixed snapshots.
type fakeState struct {
	pending    []PendingReplica
	nodes      []NodeState
	autoscaled []string
	offerings  map[string][]hyperpod.Offering
	pools      []NodePool
	offerErr   error
	passes     chan struct{} // if set, told of each pass
}

func (s *fakeState) Pending() []PendingReplica { return s.pending }
func (s *fakeState) Nodes() []NodeState        { return s.nodes }
func (s *fakeState) AutoScaled() []string {
	if s.passes != nil {
		s.passes <- struct{}{}
	}
	return s.autoscaled
}
func (s *fakeState) NodePools() []NodePool { return s.pools }
func (s *fakeState) Capacity(t string) (cluster.Resources, bool) {
	return capacityOf(t)
}
func (s *fakeState) Offerings(_ context.Context, c string) ([]hyperpod.Offering, error) {
	return s.offerings[c], s.offerErr
}

// fakeActuator records calls; launches of the groups in ice fail with a
// capacity error.
type fakeActuator struct {
	mu          sync.Mutex
	ice         map[string]bool
	launches    []Launch
	disruptions []Disruption
	launched    chan struct{}
}

func (a *fakeActuator) Launch(_ context.Context, l Launch) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.launches = append(a.launches, l)
	if a.launched != nil {
		a.launched <- struct{}{}
	}
	if a.ice[l.Group] {
		return &hyperpod.CapacityError{Group: l.Group, Err: errors.New("no spot capacity")}
	}
	return nil
}

func (a *fakeActuator) Disrupt(_ context.Context, d Disruption) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.disruptions = append(a.disruptions, d)
	return nil
}

func (a *fakeActuator) groups() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, l := range a.launches {
		out = append(out, l.Group)
	}
	return out
}

func newTestController(t *testing.T, st State, act Actuator, clk clock.Clock) (*Controller, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(Options{State: st, Actuator: act, Clock: clk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

func TestReconcileICEFallback(t *testing.T) {
	clk := clock.NewFake(t0)
	st := &fakeState{
		pending:    []PendingReplica{{ID: "r1", Cluster: "c", Request: gpus(1), Since: t0}, {ID: "x", Cluster: "off", Request: gpus(1), Since: t0}},
		autoscaled: []string{"c"},
		offerings: map[string][]hyperpod.Offering{
			"c":   {offer("spot", "ml.g5.xlarge", hyperpod.CapacitySpot, 0.3, 5), offer("od", "ml.g5.xlarge", hyperpod.CapacityOnDemand, 1, 5)},
			"off": {{Cluster: "off", Group: "g", InstanceType: "ml.g5.xlarge", CapacityType: hyperpod.CapacityOnDemand, Available: 5}},
		},
	}
	act := &fakeActuator{ice: map[string]bool{"spot": true}}
	c, reg := newTestController(t, st, act, clk)
	ctx := context.Background()

	steps := []struct {
		step time.Duration
		want []string // groups launched so far
	}{
		{0, nil},                                               // the batch opens
		{999 * time.Millisecond, nil},                          // still within the idle window
		{time.Millisecond, []string{"spot"}},                   // ready: spot first, it fails
		{time.Second, []string{"spot", "od"}},                  // the ICE cache sends it to on-demand
		{ICETTL - 2*time.Second, []string{"spot", "od", "od"}}, // still cached 1 s before expiry
		{time.Second, []string{"spot", "od", "od", "spot"}},    // expired: spot is tried again
	}
	for i, s := range steps {
		clk.Step(s.step)
		if err := c.Reconcile(ctx); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := act.groups(); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: launched groups %v, want %v", i, got, s.want)
		}
	}
	if got := promtestutil.ToFloat64(c.m.pending.WithLabelValues("c")); got != 1 {
		t.Errorf("pending gauge = %v, want 1 (the cluster without autoscaling is not counted)", got)
	}
	if got := promtestutil.ToFloat64(c.m.decisions.WithLabelValues("c", "insufficient_capacity")); got != 2 {
		t.Errorf("insufficient_capacity decisions = %v, want 2", got)
	}
	if got := promtestutil.ToFloat64(c.m.launched.WithLabelValues("c", "on-demand")); got != 2 {
		t.Errorf("nodes launched = %v, want 2", got)
	}
	if n, err := promtestutil.GatherAndCount(reg, "capstan_node_autoscaler_decision_latency_seconds"); err != nil || n != 1 {
		t.Errorf("latency series = %d, %v; want 1", n, err)
	}
}

func TestReconcileConsolidatesAndKeepsNominated(t *testing.T) {
	clk := clock.NewFake(t0.Add(time.Hour))
	st := &fakeState{
		pending:    []PendingReplica{{ID: "r1", Cluster: "c", Request: gpus(1), Since: t0}},
		autoscaled: []string{"c", "d"},
		nodes: []NodeState{
			// r1 fits on the first: nominated, so kept though its name sorts first.
			node("a-nominated", 1, t0),
			node("b-empty", 1, t0),
			with(node("other", 1, t0), func(n *NodeState) { n.Cluster = "e" }), // e is not autoscaled
		},
	}
	act := &fakeActuator{}
	c, reg := newTestController(t, st, act, clk)
	if err := c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []Disruption{{Cluster: "c", Node: "b-empty", NodePool: "default", Reason: ReasonEmpty}}
	if !reflect.DeepEqual(act.disruptions, want) || len(act.launches) != 0 {
		t.Fatalf("disruptions %+v launches %+v; want %+v and no launch", act.disruptions, act.launches, want)
	}
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP capstan_node_autoscaler_nodes_disrupted_total Nodes the autoscaler disrupted, by reason (Empty, Underutilized).
# TYPE capstan_node_autoscaler_nodes_disrupted_total counter
capstan_node_autoscaler_nodes_disrupted_total{cluster="c",reason="Empty"} 1
`), "capstan_node_autoscaler_nodes_disrupted_total"); err != nil {
		t.Error(err)
	}
}

func TestReconcileErrors(t *testing.T) {
	clk := clock.NewFake(t0)
	st := &fakeState{
		pending:    []PendingReplica{{ID: "r1", Cluster: "c", Request: gpus(1)}},
		autoscaled: []string{"c"},
		offerErr:   errors.New("api down"),
	}
	c, _ := newTestController(t, st, &fakeActuator{}, clk)
	err := c.Reconcile(context.Background())
	if err == nil || !strings.Contains(err.Error(), "offerings of cluster c: api down") {
		t.Fatalf("err = %v, want the offerings error", err)
	}
	for _, o := range []Options{{}, {State: st, Actuator: &fakeActuator{}, Clock: clk, Interval: -1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

func TestRunTicksOnTheClock(t *testing.T) {
	clk := clock.NewFake(t0)
	st := &fakeState{
		pending:    []PendingReplica{{ID: "r1", Cluster: "c", Request: gpus(1), Since: t0}},
		autoscaled: []string{"c"},
		offerings:  map[string][]hyperpod.Offering{"c": {offer("od", "ml.g5.xlarge", hyperpod.CapacityOnDemand, 1, 5)}},
		passes:     make(chan struct{}, 1),
	}
	act := &fakeActuator{launched: make(chan struct{}, 1)}
	c, _ := newTestController(t, st, act, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	clk.BlockUntil(1)
	clk.Step(time.Second) // first pass opens the batch
	<-st.passes
	clk.Step(time.Second) // second pass: idle elapsed, launch
	<-st.passes
	<-act.launched
	cancel()
	<-done
	if got := act.groups(); !reflect.DeepEqual(got, []string{"od"}) {
		t.Fatalf("launched %v, want [od]", got)
	}
}
