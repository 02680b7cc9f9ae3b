package local

import (
	"context"
	"sync"

	"github.com/capstan-dev/capstan/internal/runtime"
)

// subscriber delivers changes to one callback, in order, from its own
// goroutine, through an unbounded queue so a slow callback never stalls a
// replica's supervisor.
type subscriber struct {
	mu    sync.Mutex
	queue []runtime.Replica
	wake  chan struct{}
}

func newSubscriber(ctx context.Context, fn func(runtime.Replica), gone func()) *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	go func() {
		defer gone()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			}
			for {
				s.mu.Lock()
				if len(s.queue) == 0 {
					s.mu.Unlock()
					break
				}
				rep := s.queue[0]
				s.queue = s.queue[1:]
				s.mu.Unlock()
				if ctx.Err() != nil {
					return
				}
				fn(rep)
			}
		}
	}()
	return s
}

func (s *subscriber) push(rep runtime.Replica) {
	s.mu.Lock()
	s.queue = append(s.queue, rep)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
