package triggers

import (
	"maps"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
)

// fakeSource is a hand-fed Source: Snapshot returns what the test set last
// and counts calls (the real Source, the gateway, is tested in its package).
type fakeSource struct {
	mu    sync.Mutex
	snap  gateway.EndpointSnapshot
	asked []string
}

var _ Source = (*fakeSource)(nil)

func (f *fakeSource) Snapshot(endpoint string) gateway.EndpointSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, endpoint)
	// A fresh map per snapshot, as the gateway returns: history must not
	// change under the reader.
	s := f.snap
	s.Variants = maps.Clone(f.snap.Variants)
	return s
}

func (f *fakeSource) set(mut func(s *gateway.EndpointSnapshot)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mut(&f.snap)
}

func (f *fakeSource) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakes() (*fakeSource, *clock.Fake) { return &fakeSource{}, clock.NewFake(t0) }
