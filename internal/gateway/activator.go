package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Activator starts capacity for an endpoint that has none (scale from zero).
// The gateway calls Activate once per hold episode, from its own goroutine,
// so an implementation may block; the endpoint's held requests are released
// when a later SetRoute gives it a backend.
type Activator interface{ Activate(endpoint string) }

// Hold defaults (Knative's activator buffers far more, 10,000 per revision;
// an LLM replica takes minutes to start, so a smaller bound fails fast).
const (
	DefaultMaxHeld     = 100
	DefaultHoldTimeout = 60 * time.Second
)

// ActivationError: a request held for an endpoint with no backend could not
// be served: the hold queue was full (Overflow) or no backend came within
// Timeout. Protocol edges answer 503.
type ActivationError struct {
	Endpoint string
	Overflow bool          // MaxHeld requests were already waiting
	MaxHeld  int           // the bound that was hit (Overflow)
	Timeout  time.Duration // how long the request waited (!Overflow)
}

func (e *ActivationError) Error() string {
	if e.Overflow {
		return fmt.Sprintf("endpoint %s is scaling from zero and already holds %d waiting requests", e.Endpoint, e.MaxHeld)
	}
	return fmt.Sprintf("endpoint %s is scaling from zero and no replica became ready within %s", e.Endpoint, e.Timeout)
}

// holder is one held request.
type holder struct {
	ch   chan struct{} // closed when it is this request's turn to go on
	turn bool          // ch is closed (under holdQueue.mu)
	gone bool          // left the chain before its turn (cancelled / timed out)
}

// holdQueue is one endpoint's activator state. Released requests go on in
// arrival order: each passes the turn to the next once it has picked its
// backend (or entered the admission queue), so routing decisions happen in
// the order requests arrived, and no one polls.
type holdQueue struct {
	mu       sync.Mutex
	waiters  []*holder // held, waiting for a backend, in arrival order
	chain    []*holder // released, waiting for their turn
	turnOut  bool      // a released request has the turn and has not passed it on
	episode  bool      // Activate was called and no backend has come since
	released uint64    // episodes ended by a backend arriving (tests, benchmarks)
}

func (g *Gateway) holdQueue(endpoint string) *holdQueue {
	v, ok := g.holds.Load(endpoint)
	if !ok {
		v, _ = g.holds.LoadOrStore(endpoint, &holdQueue{})
	}
	return v.(*holdQueue)
}

// holdable reports whether a request to rs should wait for the activator:
// the route has one and no variant has a backend.
func holdable(rs *routeState) bool {
	if rs.route.Activator == nil || rs.route.Unavailable != "" {
		return false
	}
	for _, v := range rs.variants {
		if len(v.route.Backends) > 0 {
			return false
		}
	}
	return true
}

// hold waits until a SetRoute gives the endpoint a backend (or removes the
// activator), the route's HoldTimeout passes, or ctx ends. On success the
// caller holds the turn and must call the returned pass once it has made its
// routing decision, so the next released request can go.
func (g *Gateway) hold(ctx context.Context, rs *routeState) (pass func(), err error) {
	r := rs.route
	maxHeld, timeout := r.MaxHeld, r.HoldTimeout
	if maxHeld <= 0 {
		maxHeld = DefaultMaxHeld
	}
	if timeout <= 0 {
		timeout = DefaultHoldTimeout
	}
	q := g.holdQueue(r.Endpoint)
	st := rs.stats
	q.mu.Lock()
	// Re-check under the queue lock: SetRoute releases under it, so a backend
	// that arrived after our lookup is seen here, never missed.
	if cur, ok := g.lookup(r.Endpoint); !ok || !holdable(cur) {
		q.mu.Unlock()
		return func() {}, nil
	}
	if len(q.waiters) >= maxHeld {
		q.mu.Unlock()
		return nil, &ActivationError{Endpoint: r.Endpoint, Overflow: true, MaxHeld: maxHeld}
	}
	h := &holder{ch: make(chan struct{})}
	q.waiters = append(q.waiters, h)
	st.held.Add(1)
	g.metrics.held.WithLabelValues(r.Endpoint).Inc()
	if !q.episode {
		q.episode = true
		g.metrics.activations.WithLabelValues(r.Endpoint).Inc()
		act := r.Activator
		go act.Activate(r.Endpoint)
	}
	q.mu.Unlock()
	unheld := func() {
		st.held.Add(-1)
		g.metrics.held.WithLabelValues(r.Endpoint).Dec()
	}

	t := g.clock.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-h.ch:
		unheld()
		return func() { q.pass(h) }, nil
	case <-t.C():
		err = &ActivationError{Endpoint: r.Endpoint, Timeout: timeout}
	case <-ctx.Done():
		err = fmt.Errorf("endpoint %s: waiting for a replica to start: %w", r.Endpoint, ctx.Err())
	}
	unheld()
	q.leave(h)
	return nil, err
}

// leave removes a holder that gave up; if the turn had reached it already it
// passes the turn on.
func (q *holdQueue) leave(h *holder) {
	q.mu.Lock()
	for i, w := range q.waiters {
		if w == h {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			if len(q.waiters) == 0 && len(q.chain) == 0 {
				// Nobody waits any more: a later request starts a new
				// episode (and activates again: the last try may have failed).
				q.episode = false
			}
			q.mu.Unlock()
			return
		}
	}
	if h.turn {
		q.mu.Unlock()
		q.pass(h)
		return
	}
	h.gone = true
	q.mu.Unlock()
}

// release moves every waiter to the chain (SetRoute gave the endpoint a
// backend, or made holding pointless) and starts the turns. Called with q.mu held.
func (q *holdQueue) releaseLocked() {
	if len(q.waiters) == 0 {
		q.episode = false
		return
	}
	q.chain = append(q.chain, q.waiters...)
	q.waiters = nil
	q.episode = false
	q.released++
	if !q.turnOut {
		q.nextLocked()
	}
}

// pass ends h's turn and gives it to the next released request still waiting.
func (q *holdQueue) pass(h *holder) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !h.turn || h.gone {
		return // passed already
	}
	h.gone = true
	q.turnOut = false
	q.nextLocked()
}

func (q *holdQueue) nextLocked() {
	for len(q.chain) > 0 {
		h := q.chain[0]
		q.chain[0] = nil
		q.chain = q.chain[1:]
		if h.gone {
			continue
		}
		h.turn = true
		q.turnOut = true
		close(h.ch)
		return
	}
}

// routeChanged releases the endpoint's held requests unless its route still
// has no backend and an activator. SetRoute/DeleteRoute call it after the
// route map is updated (and g.mu released: the lock order is q.mu, then g.mu),
// so released requests see the new route; hold re-checks the route under
// q.mu too, so no release is missed.
func (g *Gateway) routeChanged(endpoint string) {
	v, ok := g.holds.Load(endpoint)
	if !ok {
		return
	}
	q := v.(*holdQueue)
	q.mu.Lock()
	defer q.mu.Unlock()
	if rs, ok := g.lookup(endpoint); ok && holdable(rs) {
		return
	}
	q.releaseLocked()
}
