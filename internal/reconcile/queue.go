// Package reconcile runs a controller's reconciles by key: at most one at a
// time per key, and a request that arrives during one runs it once more
// afterwards, so no change is missed and none is handled twice at once. This
// is the coalescing of controller-runtime's workqueue; its retry back-off is
// left out because every capstan controller also resyncs on a tick.
package reconcile

import (
	"context"
	"sync"
	"time"
)

// Func reconciles one key.
type Func func(ctx context.Context, key string) error

// Queue runs Func per key. The zero value is not usable; use New.
type Queue struct {
	reconcile Func
	onError   func(key string, err error)

	mu      sync.Mutex
	ctx     context.Context
	running map[string]bool // reconcile in flight
	dirty   map[string]bool // requested again while in flight
	wg      sync.WaitGroup
}

// New returns a Queue that calls fn, and onError (which may be nil) with
// every error fn returns while the queue's context is live.
func New(fn Func, onError func(key string, err error)) *Queue {
	return &Queue{reconcile: fn, onError: onError, running: map[string]bool{}, dirty: map[string]bool{}}
}

// Start lets Enqueue run reconciles under ctx. Before Start, and once ctx is
// done, Enqueue does nothing.
func (q *Queue) Start(ctx context.Context) {
	q.mu.Lock()
	q.ctx = ctx
	q.mu.Unlock()
}

// Enqueue asks for a reconcile of key.
func (q *Queue) Enqueue(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctx == nil || q.ctx.Err() != nil {
		return
	}
	if q.running[key] {
		q.dirty[key] = true
		return
	}
	q.running[key] = true
	q.wg.Add(1)
	ctx := q.ctx
	go func() {
		defer q.wg.Done()
		for {
			if err := q.reconcile(ctx, key); err != nil && ctx.Err() == nil && q.onError != nil {
				q.onError(key, err)
			}
			q.mu.Lock()
			if !q.dirty[key] || ctx.Err() != nil {
				delete(q.running, key)
				delete(q.dirty, key)
				q.mu.Unlock()
				return
			}
			delete(q.dirty, key)
			q.mu.Unlock()
		}
	}()
}

// Wait blocks until no reconcile is running.
func (q *Queue) Wait() { q.wg.Wait() }

// Loop is the loop a controller runs around its queue until ctx is done or
// changes is closed: resync at once and on every tick, onChange with each
// change (which enqueues what it concerns). Then it waits for the
// reconciles in flight. Start q before calling it.
func Loop[E any](ctx context.Context, q *Queue, changes <-chan E, onChange func(E), tick <-chan time.Time, resync func()) {
	defer q.Wait()
	resync()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-changes:
			if !ok {
				return
			}
			onChange(e)
		case <-tick:
			resync()
		}
	}
}
