package serving

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
)

func newEngine(t *testing.T, opts ...fake.Option) (*Engine, *fake.Runtime, *gateway.Gateway) {
	t.Helper()
	rt := fake.New(opts...)
	rt.SetDefaultAddr("127.0.0.1:1")
	gw := gateway.New(gateway.Options{})
	return New(Options{Runtime: rt, Router: gw, EngineArgs: []string{"--time-scale=0.01"}}), rt, gw
}

func TestEnsureStartsOnceWithKVEvents(t *testing.T) {
	ctx := context.Background()
	e, rt, _ := newEngine(t)
	spec := runtime.ReplicaSpec{ID: "ep.v.gen1.0", Endpoint: "ep", Engine: "sim", Model: "m", Args: []string{"--x"}}
	if started, err := e.Ensure(ctx, spec); err != nil || !started {
		t.Fatalf("Ensure = %v, %v; want started", started, err)
	}
	if started, err := e.Ensure(ctx, spec); err != nil || started {
		t.Fatalf("second Ensure = %v, %v; want no start", started, err)
	}
	starts := rt.Starts()
	if len(starts) != 1 {
		t.Fatalf("starts = %d, want 1", len(starts))
	}
	args := starts[0].Args
	// The replica binds its publisher (vLLM binds only an endpoint with
	// "*"); the gateway connects to the same port on loopback.
	port, ok := strings.CutPrefix(starts[0].KVEventsEndpoint, "tcp://*:")
	if len(args) != 2 || args[0] != "--time-scale=0.01" || args[1] != "--x" || !ok {
		t.Fatalf("args = %q, kv events %q", args, starts[0].KVEventsEndpoint)
	}
	bs := e.Backends([]string{"ep.v.gen1.0", "unknown"})
	if len(bs) != 1 || bs[0].KVEventsEndpoint != "tcp://127.0.0.1:"+port {
		t.Fatalf("backends = %+v, want the replica with its KV events endpoint tcp://127.0.0.1:%s", bs, port)
	}
}

// A real engine gets neither the simulator's flags nor, without KV events,
// a KV events port; its backend carries its engine for the gateway.
func TestEnsureRealEngine(t *testing.T) {
	e, rt, _ := newEngine(t)
	spec := runtime.ReplicaSpec{ID: "r", Engine: "llamacpp", ModelDir: "/m", Args: []string{"-t", "1"}}
	if _, err := e.Ensure(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	got := rt.Starts()[0]
	if strings.Join(got.Args, " ") != "-t 1" || got.KVEventsEndpoint != "" {
		t.Fatalf("args %q, kv events %q; want only the spec's args and no KV events", got.Args, got.KVEventsEndpoint)
	}
	bs := e.Backends([]string{"r"})
	if len(bs) != 1 || bs[0].Engine != "llamacpp" || bs[0].KVEventsEndpoint != "" {
		t.Fatalf("backends = %+v", bs)
	}
	if _, err := e.Ensure(context.Background(), runtime.ReplicaSpec{ID: "x", Engine: "nope"}); err == nil {
		t.Fatal("an unknown engine started")
	}
}

func TestHealthGate(t *testing.T) {
	e, rt, _ := newEngine(t, fake.Manual())
	ctx := context.Background()
	if _, err := e.Ensure(ctx, runtime.ReplicaSpec{ID: "r1", Engine: "sim", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if e.Healthy("r1") || len(e.Backends([]string{"r1"})) != 0 {
		t.Fatal("a starting replica passed the health gate")
	}
	if err := rt.SetState("r1", runtime.StateHealthy, ""); err != nil {
		t.Fatal(err)
	}
	if !e.Healthy("r1") || len(e.Backends([]string{"r1"})) != 1 {
		t.Fatal("a healthy replica did not pass the health gate")
	}
}

func TestRetireStops(t *testing.T) {
	e, rt, _ := newEngine(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if _, err := e.Ensure(ctx, runtime.ReplicaSpec{ID: id, Engine: "sim", Model: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.RetireAll(ctx, []string{"a", "gone"}); err != nil {
		t.Fatal(err)
	}
	if got := rt.Running(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("running = %v, want [b]", got)
	}
}

func TestSweepOrphansNeedsTwoSweeps(t *testing.T) {
	e, rt, _ := newEngine(t)
	ctx := context.Background()
	for _, s := range []runtime.ReplicaSpec{{ID: "mine-listed"}, {ID: "mine-orphan"}, {ID: "theirs", Controller: "other"}} {
		s.Engine, s.Model = "sim", "m"
		if _, err := e.Ensure(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	mine := func(s runtime.ReplicaSpec) bool { return s.Controller == "" }
	known := func(id string) bool { return id == "mine-listed" }
	if got := e.SweepOrphans(ctx, mine, known); len(got) != 0 {
		t.Fatalf("first sweep stopped %v; an orphan must be seen twice", got)
	}
	if got := e.SweepOrphans(ctx, mine, known); !slices.Equal(got, []string{"mine-orphan"}) {
		t.Fatalf("second sweep stopped %v, want [mine-orphan]", got)
	}
	if got := rt.Running(); !slices.Equal(got, []string{"mine-listed", "theirs"}) {
		t.Fatalf("running = %v", got)
	}
	// Recorded between two sweeps: survives.
	if _, err := e.Ensure(ctx, runtime.ReplicaSpec{ID: "late", Engine: "sim", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	e.SweepOrphans(ctx, mine, known)
	if got := e.SweepOrphans(ctx, mine, func(id string) bool { return id == "mine-listed" || id == "late" }); len(got) != 0 {
		t.Fatalf("a replica recorded between sweeps was stopped: %v", got)
	}
}

func TestVictims(t *testing.T) {
	e, rt, _ := newEngine(t, fake.Manual())
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := e.Ensure(ctx, runtime.ReplicaSpec{ID: id, Engine: "sim", Model: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "c", "d"} {
		if err := rt.SetState(id, runtime.StateHealthy, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		n            int
		keep, victim []string
	}{
		{4, []string{"a", "b", "c", "d"}, nil},
		{3, []string{"a", "c", "d"}, []string{"b"}}, // the one not serving first
		{2, []string{"a", "c"}, []string{"d", "b"}}, // then the newest
		{0, nil, []string{"a", "c", "d", "b"}},
		{-1, nil, []string{"a", "c", "d", "b"}},
	} {
		keep, victims := e.Victims([]string{"a", "b", "c", "d"}, tc.n)
		if !slices.Equal(keep, tc.keep) || !slices.Equal(victims, tc.victim) {
			t.Errorf("Victims(n=%d) = %v, %v; want %v, %v", tc.n, keep, victims, tc.keep, tc.victim)
		}
	}
}

// No two replicas are told to publish KV events on one port, even when the
// kernel offers a port again before the first replica's engine binds it
// (here no engine ever binds: every port goes back to the kernel at once).
func TestKVPortsDistinct(t *testing.T) {
	e, _, _ := newEngine(t)
	seen := map[int]string{}
	for i := range 300 {
		id := fmt.Sprintf("r%d", i)
		p, err := e.kvPort(id)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[p]; dup {
			t.Fatalf("port %d given to %s and %s", p, other, id)
		}
		seen[p] = id
	}
}
