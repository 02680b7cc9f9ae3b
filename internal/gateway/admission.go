package gateway

import (
	"context"
	"fmt"
	"sync"
)

// admission is one endpoint's concurrency limit and bounded FIFO queue.
type admission struct {
	mu      sync.Mutex
	limit   int
	queue   int
	active  int
	waiters []chan struct{}
}

func statusOf(err error) string {
	if IsQueueFull(err) {
		return "429"
	}
	return "error"
}

// admit waits for a slot of the route's endpoint and returns its release
// (a no-op without MaxConcurrency). A full queue fails at once; ctx ending
// (the client went away) leaves the queue. queued is called once the request
// has its place (a request released by the activator passes its turn then).
func (g *Gateway) admit(ctx context.Context, r Route, queued func()) (func(), error) {
	if r.MaxConcurrency <= 0 {
		return func() {}, nil
	}
	v, _ := g.queues.LoadOrStore(r.Endpoint, &admission{})
	a := v.(*admission)
	a.mu.Lock()
	a.limit, a.queue = r.MaxConcurrency, r.MaxQueue
	if a.active < a.limit && len(a.waiters) == 0 {
		a.active++
		a.mu.Unlock()
		return a.releaser(), nil
	}
	if len(a.waiters) >= a.queue {
		a.mu.Unlock()
		g.metrics.rejected.WithLabelValues(r.Endpoint).Inc()
		return nil, &QueueFullError{Endpoint: r.Endpoint, RetryAfter: g.opts.RetryAfter}
	}
	ch := make(chan struct{})
	a.waiters = append(a.waiters, ch)
	a.mu.Unlock()
	queued()
	gauge := g.metrics.queued.WithLabelValues(r.Endpoint)
	gauge.Inc()
	defer gauge.Dec()
	select {
	case <-ch: // the releaser handed its slot over
		return a.releaser(), nil
	case <-ctx.Done():
		a.mu.Lock()
		for i, w := range a.waiters {
			if w == ch {
				a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
				a.mu.Unlock()
				return nil, fmt.Errorf("endpoint %s: waiting in queue: %w", r.Endpoint, ctx.Err())
			}
		}
		a.mu.Unlock()
		// Handed a slot while giving up: pass it on.
		a.releaser()()
		return nil, fmt.Errorf("endpoint %s: waiting in queue: %w", r.Endpoint, ctx.Err())
	}
}

func (a *admission) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.waiters) > 0 && a.active <= a.limit {
				ch := a.waiters[0]
				a.waiters = a.waiters[1:]
				close(ch) // the slot moves to the waiter; active unchanged
				return
			}
			a.active--
		})
	}
}
