package reconcile

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A key enqueued while its reconcile runs is reconciled exactly once more,
// never concurrently with itself; other keys run alongside.
func TestQueueCoalescesPerKey(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := map[string]int{}
	active := map[string]int{}
	entered := make(chan string, 10)
	release := make(chan struct{})
	q := New(func(_ context.Context, key string) error {
		mu.Lock()
		calls[key]++
		active[key]++
		if active[key] > 1 {
			t.Errorf("key %s reconciled concurrently", key)
		}
		first := calls[key] == 1
		mu.Unlock()
		if first && key == "a" {
			entered <- key
			<-release
		}
		mu.Lock()
		active[key]--
		mu.Unlock()
		return nil
	}, nil)
	q.Start(ctx)
	q.Enqueue("a")
	<-entered
	for range 5 { // coalesce into one more run
		q.Enqueue("a")
	}
	q.Enqueue("b")
	close(release)
	q.Wait()
	if calls["a"] != 2 || calls["b"] != 1 {
		t.Fatalf("calls %v, want a:2 b:1", calls)
	}
}

func TestQueueErrorsAndLifecycle(t *testing.T) {
	boom := errors.New("boom")
	var got []string
	var mu sync.Mutex
	q := New(func(context.Context, string) error { return boom }, func(key string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, boom) {
			got = append(got, key)
		}
	})
	q.Enqueue("before-start") // ignored
	ctx, cancel := context.WithCancel(context.Background())
	q.Start(ctx)
	q.Enqueue("x")
	q.Wait()
	cancel()
	q.Enqueue("after-cancel") // ignored
	q.Wait()
	if len(got) != 1 || got[0] != "x" {
		t.Fatalf("errors reported for %v, want [x]", got)
	}
}

// Loop resyncs at once and on every tick, hands each change to onChange,
// and returns once changes is closed (or ctx is done), but only after the
// reconciles in flight.
func TestLoop(t *testing.T) {
	for _, stop := range []string{"changes closed", "context done"} {
		t.Run(stop, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			release := make(chan struct{})
			var mu sync.Mutex
			var reconciled []string
			q := New(func(_ context.Context, key string) error {
				<-release
				mu.Lock()
				defer mu.Unlock()
				reconciled = append(reconciled, key)
				return nil
			}, nil)
			q.Start(ctx)
			changes, tick := make(chan string), make(chan time.Time)
			resyncs := make(chan struct{}, 4)
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				Loop(ctx, q, changes, func(k string) {
					if k != "not mine" {
						q.Enqueue(k)
					}
				}, tick, func() { resyncs <- struct{}{} })
			}()
			<-resyncs // at once
			tick <- time.Time{}
			<-resyncs // on the tick
			changes <- "a"
			changes <- "not mine"
			if stop == "changes closed" {
				close(changes)
			} else {
				cancel()
			}
			select {
			case <-returned:
				t.Fatal("Loop returned with a reconcile still running")
			case <-time.After(20 * time.Millisecond):
			}
			close(release)
			<-returned
			if len(reconciled) != 1 || reconciled[0] != "a" {
				t.Fatalf("reconciled %v, want [a]", reconciled)
			}
			if len(resyncs) != 0 {
				t.Fatalf("%d extra resyncs", len(resyncs))
			}
		})
	}
}
