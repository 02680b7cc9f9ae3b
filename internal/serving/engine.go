package serving

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// Router is the part of the gateway the lifecycle drives. SetRoute replaces
// an endpoint's route atomically (a backend absent from it gets no new
// requests); Drain returns once nothing is in flight to the backend (or ctx
// is done).
type Router interface {
	SetRoute(r gateway.Route)
	DeleteRoute(endpoint string)
	Drain(ctx context.Context, backendID string) error
}

// Options configure an Engine.
type Options struct {
	Runtime runtime.Runtime
	Router  Router
	Logger  *slog.Logger
	// DrainTimeout bounds the wait for in-flight requests on a leaving
	// replica (default 60s).
	DrainTimeout time.Duration
	// EngineArgs are extra flags for every simulated replica (e.g.
	// "--time-scale=0.01"); real engines take theirs from capstan.yaml's
	// engines.<name>.args, through the runtime.
	EngineArgs []string
}

// Engine runs the lifecycle steps of replicas for every controller. It is
// safe for concurrent use; controllers call it from their reconciles.
type Engine struct {
	o   Options
	log *slog.Logger

	mu       sync.Mutex
	kvPorts  map[string]int                 // replica → port its KV events are published on
	retiring map[string]bool                // replicas being drained and stopped
	orphans  map[string]runtime.ReplicaSpec // unlisted replicas seen by the last sweep
}

// New returns an Engine.
func New(o Options) *Engine {
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Engine{o: o, log: o.Logger, kvPorts: map[string]int{}, retiring: map[string]bool{}, orphans: map[string]runtime.ReplicaSpec{}}
}

// Runtime is the runtime replicas run on.
func (e *Engine) Runtime() runtime.Runtime { return e.o.Runtime }

// Router is the gateway routes go to.
func (e *Engine) Router() Router { return e.o.Router }

// Ensure starts replica spec.ID unless the runtime already runs it, adding
// the simulator's engine-wide flags and, for an engine that publishes KV
// cache events, a port for them: every such replica publishes, whichever
// door created it, so every routing policy works for every endpoint.
// started is false when it was already running.
func (e *Engine) Ensure(ctx context.Context, spec runtime.ReplicaSpec) (started bool, err error) {
	if r, err := e.o.Runtime.Get(spec.ID); err == nil && r.State != runtime.StateStopped {
		return false, nil
	}
	a, err := engines.ByName(spec.Engine)
	if err != nil {
		return false, fmt.Errorf("replica %s: %w", spec.ID, err)
	}
	if a.KVEvents {
		port, err := e.kvPort(spec.ID)
		if err != nil {
			return false, fmt.Errorf("replica %s: kv events port: %w", spec.ID, err)
		}
		spec.KVEventsEndpoint = kvBindEndpoint(port)
	}
	if a.Name == engines.Sim {
		spec.Args = append(append([]string(nil), e.o.EngineArgs...), spec.Args...)
	}
	if err := e.o.Runtime.Start(ctx, spec); err != nil {
		return false, err
	}
	return true, nil
}

// kvPort is the port replica id publishes KV events on, chosen once. The
// kernel may offer a port it offered a moment ago for another replica
// whose engine has not bound it yet, so a port another replica holds is
// never handed out twice.
func (e *Engine) kvPort(id string) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.kvPorts[id]; ok {
		return p, nil
	}
	held := make(map[int]bool, len(e.kvPorts))
	for _, p := range e.kvPorts {
		held[p] = true
	}
	for range maxPortTries {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if !held[p] {
			e.kvPorts[id] = p
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port after %d tries that no other replica holds", maxPortTries)
}

// maxPortTries bounds the search for a KV events port.
const maxPortTries = 32

// kvEndpoint is where the gateway connects for a replica's KV events, and
// kvBindEndpoint what the replica is told: by vLLM's rule an endpoint binds
// only when it holds "*" and connects otherwise, so handing both sides
// tcp://127.0.0.1:PORT left both dialling and no event ever arrived. The
// simulated engine binds the wildcard on its HTTP interface (loopback under
// capstan serve), so token ids do not leave the host.
func kvEndpoint(port int) string     { return "tcp://127.0.0.1:" + strconv.Itoa(port) }
func kvBindEndpoint(port int) string { return "tcp://*:" + strconv.Itoa(port) }

// freePort asks the kernel for a free TCP port for a replica's KV events.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Replica is the runtime's view of id (ok false when it does not run it).
func (e *Engine) Replica(id string) (runtime.Replica, bool) {
	r, err := e.o.Runtime.Get(id)
	return r, err == nil
}

// Healthy reports whether id passes its health checks and has an address:
// the gate a replica passes before it takes traffic.
func (e *Engine) Healthy(id string) bool {
	r, err := e.o.Runtime.Get(id)
	return err == nil && r.State == runtime.StateHealthy && r.Addr != ""
}

// Backends are the gateway backends of the healthy replicas among ids, in
// order, each with its KV events endpoint.
func (e *Engine) Backends(ids []string) []gateway.Backend {
	var out []gateway.Backend
	for _, id := range ids {
		r, err := e.o.Runtime.Get(id)
		if err != nil || r.State != runtime.StateHealthy || r.Addr == "" {
			continue
		}
		b := gateway.Backend{ID: id, Addr: r.Addr, Engine: r.Spec.Engine, APIKey: r.APIKey}
		e.mu.Lock()
		if p, ok := e.kvPorts[id]; ok {
			b.KVEventsEndpoint = kvEndpoint(p)
		}
		e.mu.Unlock()
		out = append(out, b)
	}
	return out
}

// Retire drains replica id (already out of the route; bounded by
// DrainTimeout) and stops it. Stop errors are returned; a replica the
// runtime does not know is already gone.
func (e *Engine) Retire(ctx context.Context, id string) error {
	e.mu.Lock()
	e.retiring[id] = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.retiring, id)
		delete(e.kvPorts, id)
		e.mu.Unlock()
	}()
	if _, err := e.o.Runtime.Get(id); err != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, e.o.DrainTimeout)
	if err := e.o.Router.Drain(dctx, id); err != nil && ctx.Err() == nil {
		e.log.Warn("drain timed out; stopping anyway", "replica", id, "err", err)
	}
	cancel()
	if err := e.o.Runtime.Stop(ctx, id); err != nil {
		return fmt.Errorf("stop replica %s: %w", id, err)
	}
	e.log.Info("replica retired", "replica", id)
	return nil
}

// RetireAll retires ids in order, stopping at the first error or when ctx
// is done.
func (e *Engine) RetireAll(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.Retire(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// SweepOrphans stops replicas that mine claims and no record lists (known
// false): left by a crash between a record change and a Stop. A replica must
// be unlisted in two sweeps in a row, so one a reconcile records and starts
// between the caller's read of its records and this sweep survives; one
// being retired is left to its Retire. It returns the ids it stopped.
func (e *Engine) SweepOrphans(ctx context.Context, mine func(runtime.ReplicaSpec) bool, known func(id string) bool) []string {
	unlisted := map[string]runtime.ReplicaSpec{}
	for _, r := range e.o.Runtime.List() {
		if mine(r.Spec) && r.State != runtime.StateStopped && !known(r.Spec.ID) {
			unlisted[r.Spec.ID] = r.Spec
		}
	}
	var stop []string
	e.mu.Lock()
	for id, spec := range e.orphans {
		if !mine(spec) {
			continue // another controller's
		}
		if _, still := unlisted[id]; still && !e.retiring[id] {
			stop = append(stop, id)
		}
		delete(e.orphans, id)
	}
	for id, spec := range unlisted {
		if !e.retiring[id] && !slices.Contains(stop, id) {
			e.orphans[id] = spec
		}
	}
	e.mu.Unlock()
	sort.Strings(stop)
	var stopped []string
	for _, id := range stop {
		e.log.Warn("stopping orphaned replica", "replica", id)
		if err := e.o.Runtime.Stop(ctx, id); err != nil {
			e.log.Warn("stop orphaned replica", "replica", id, "err", err)
			continue
		}
		e.mu.Lock()
		delete(e.kvPorts, id)
		e.mu.Unlock()
		stopped = append(stopped, id)
	}
	return stopped
}

// StopAll stops, without draining, every running replica mine claims that
// keep does not: what is left of a resource that failed or is gone.
func (e *Engine) StopAll(ctx context.Context, mine func(runtime.ReplicaSpec) bool, keep map[string]bool) error {
	var ids []string
	for _, r := range e.o.Runtime.List() {
		if mine(r.Spec) && r.State != runtime.StateStopped && !keep[r.Spec.ID] {
			ids = append(ids, r.Spec.ID)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := e.o.Runtime.Stop(ctx, id); err != nil {
			return err
		}
		e.mu.Lock()
		delete(e.kvPorts, id)
		e.mu.Unlock()
	}
	return nil
}

// Victims keeps n of ids and gives up the rest: replicas that do not serve
// (pending, starting, failed) first, then the newest (last in ids). Both
// controllers choose whom to scale in or retire by it.
func (e *Engine) Victims(ids []string, n int) (keep, victims []string) {
	n = max(n, 0)
	if len(ids) <= n {
		return ids, nil
	}
	order := slices.Clone(ids)
	sort.SliceStable(order, func(i, j int) bool {
		hi, hj := e.Healthy(order[i]), e.Healthy(order[j])
		if hi != hj {
			return hi
		}
		return slices.Index(ids, order[i]) < slices.Index(ids, order[j])
	})
	gone := map[string]bool{}
	for _, id := range order[n:] {
		gone[id] = true
		victims = append(victims, id)
	}
	for _, id := range ids {
		if !gone[id] {
			keep = append(keep, id)
		}
	}
	return keep, victims
}
