package fake

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/runtime"
)

var _ runtime.Runtime = (*Runtime)(nil)

// Runtime is a fake runtime.Runtime. The zero value is not usable; call New.
type Runtime struct {
	clock clock.Clock

	mu sync.Mutex
	// replicas by id (stopped replicas stay, in StateStopped, as in the local runtime).
	replicas map[string]*runtime.Replica
	starts   []runtime.ReplicaSpec
	stops    []string
	startErr map[string]error // by replica id; "" matches every id
	addrs    map[string]string
	manual   bool
	subs     []*subscriber
	closed   bool
}

type subscriber struct {
	ctx context.Context
	fn  func(runtime.Replica)
	// ch serialises deliveries per subscriber in a goroutine of its own, so a
	// slow or re-entrant callback never blocks the caller of Start/SetState.
	ch chan runtime.Replica
}

// Option configures a fake Runtime.
type Option func(*Runtime)

// WithClock sets the clock used for Replica.Since (default clock.Real{}).
func WithClock(c clock.Clock) Option { return func(r *Runtime) { r.clock = c } }

// Manual makes Start leave replicas in StateStarting until SetState moves them;
// by default a started replica is Healthy at once.
func Manual() Option { return func(r *Runtime) { r.manual = true } }

// New returns an empty fake runtime.
func New(opts ...Option) *Runtime {
	r := &Runtime{
		clock:    clock.Real{},
		replicas: map[string]*runtime.Replica{},
		startErr: map[string]error{},
		addrs:    map[string]string{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetStartError makes Start fail with err for replica id (or for every id when
// id is ""). A nil err clears it.
func (r *Runtime) SetStartError(id string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.startErr, id)
		return
	}
	r.startErr[id] = err
}

// SetAddr sets the address replica id reports (now, or when it is started).
// Without it a replica gets "127.0.0.1:0", which refuses connections, so a
// test that forgot to set one notices.
func (r *Runtime) SetAddr(id, addr string) {
	r.mu.Lock()
	r.addrs[id] = addr
	var changed *runtime.Replica
	if rep, ok := r.replicas[id]; ok {
		rep.Addr = addr
		c := *rep
		changed = &c
	}
	r.mu.Unlock()
	if changed != nil {
		r.publish(*changed)
	}
}

// SetDefaultAddr sets the address used for replicas without their own SetAddr.
func (r *Runtime) SetDefaultAddr(addr string) { r.SetAddr("", addr) }

// SetState moves replica id to state with message msg and notifies
// subscribers. Moving to StateFailed counts a restart and, like the local
// runtime, a failure in a row (LastFailure is msg); StateHealthy ends the
// run of failures.
func (r *Runtime) SetState(id string, state runtime.State, msg string) error {
	r.mu.Lock()
	rep, ok := r.replicas[id]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("set state of %q: %w", id, runtime.ErrNotFound)
	}
	rep.State = state
	rep.Message = msg
	rep.Since = r.clock.Now()
	switch state {
	case runtime.StateFailed:
		rep.Restarts++
		rep.Failures++
		rep.LastFailure = msg
	case runtime.StateHealthy:
		rep.Failures = 0
	}
	c := *rep
	r.mu.Unlock()
	r.publish(c)
	return nil
}

// Starts returns the specs passed to Start, in call order (failed calls included).
func (r *Runtime) Starts() []runtime.ReplicaSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runtime.ReplicaSpec(nil), r.starts...)
}

// Stops returns the ids passed to Stop, in call order.
func (r *Runtime) Stops() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.stops...)
}

// Running returns the ids of replicas not Stopped, sorted.
func (r *Runtime) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, rep := range r.replicas {
		if rep.State != runtime.StateStopped {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Start records the call and creates (or restarts) the replica.
func (r *Runtime) Start(ctx context.Context, spec runtime.ReplicaSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	r.starts = append(r.starts, spec)
	if spec.ID == "" {
		r.mu.Unlock()
		return fmt.Errorf("start replica: empty id")
	}
	if err, ok := r.startErr[spec.ID]; ok {
		r.mu.Unlock()
		return err
	}
	if err, ok := r.startErr[""]; ok {
		r.mu.Unlock()
		return err
	}
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("start replica %q: runtime closed", spec.ID)
	}
	if rep, ok := r.replicas[spec.ID]; ok && rep.State != runtime.StateStopped {
		r.mu.Unlock()
		return fmt.Errorf("start replica %q: already running", spec.ID)
	}
	addr, ok := r.addrs[spec.ID]
	if !ok {
		addr, ok = r.addrs[""]
	}
	if !ok {
		addr = "127.0.0.1:0"
	}
	state, msg := runtime.StateHealthy, ""
	if r.manual {
		state, msg = runtime.StateStarting, "waiting for SetState"
	}
	rep := &runtime.Replica{Spec: spec, Addr: addr, State: state, Message: msg, Since: r.clock.Now()}
	r.replicas[spec.ID] = rep
	c := *rep
	r.mu.Unlock()
	r.publish(c)
	return nil
}

// Stop records the call and marks the replica Stopped. Unknown ids are not an
// error (Stop is idempotent), matching the local runtime.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	r.mu.Lock()
	r.stops = append(r.stops, id)
	rep, ok := r.replicas[id]
	if !ok || rep.State == runtime.StateStopped {
		r.mu.Unlock()
		return nil
	}
	rep.State = runtime.StateStopped
	rep.Message = "stopped"
	rep.Since = r.clock.Now()
	c := *rep
	r.mu.Unlock()
	r.publish(c)
	return nil
}

// Get returns a copy of the replica.
func (r *Runtime) Get(id string) (runtime.Replica, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep, ok := r.replicas[id]
	if !ok {
		return runtime.Replica{}, fmt.Errorf("get %q: %w", id, runtime.ErrNotFound)
	}
	return *rep, nil
}

// List returns copies of every replica, sorted by id.
func (r *Runtime) List() []runtime.Replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.Replica, 0, len(r.replicas))
	for _, rep := range r.replicas {
		out = append(out, *rep)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.ID < out[j].Spec.ID })
	return out
}

// Subscribe delivers every later change to fn, serialised, until ctx is done.
func (r *Runtime) Subscribe(ctx context.Context, fn func(runtime.Replica)) {
	s := &subscriber{ctx: ctx, fn: fn, ch: make(chan runtime.Replica, 1024)}
	r.mu.Lock()
	r.subs = append(r.subs, s)
	r.mu.Unlock()
	go func() {
		for {
			select {
			case <-ctx.Done():
				r.unsubscribe(s)
				return
			case rep := <-s.ch:
				fn(rep)
			}
		}
	}()
}

func (r *Runtime) unsubscribe(s *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.subs {
		if x == s {
			r.subs = append(r.subs[:i], r.subs[i+1:]...)
			return
		}
	}
}

func (r *Runtime) publish(rep runtime.Replica) {
	r.mu.Lock()
	subs := append([]*subscriber(nil), r.subs...)
	r.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- rep:
		case <-s.ctx.Done():
		}
	}
}

// Close stops every replica; later Starts fail.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	var ids []string
	for id, rep := range r.replicas {
		if rep.State != runtime.StateStopped {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	sort.Strings(ids)
	for _, id := range ids {
		if err := r.Stop(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
