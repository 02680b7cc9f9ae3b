package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/events"
)

// Tier bits a block may be held in on one backend.
const (
	tierGPU uint8 = 1 << iota
	tierCPU
)

// kvIndex is the precise KV block index: which backend holds which block
// hash, in which tier, as the backends' own KV events say. One per gateway,
// shared by every kvaware route (hashes are seeded per model, so routes of
// different models never collide).
type kvIndex struct {
	mu     sync.RWMutex
	blocks map[kv.BlockHash]map[string]uint8 // hash → backend → tiers
	by     map[string]map[kv.BlockHash]struct{}
	// maxPerBackend bounds memory against a publisher that never removes.
	maxPerBackend int
}

func newKVIndex() *kvIndex {
	return &kvIndex{blocks: map[kv.BlockHash]map[string]uint8{}, by: map[string]map[kv.BlockHash]struct{}{}, maxPerBackend: 1 << 22}
}

func mediumBit(m string) uint8 {
	if m == events.MediumCPU {
		return tierCPU
	}
	return tierGPU
}

// Apply folds one batch of a backend's events into the index.
func (x *kvIndex) Apply(backend string, b events.Batch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ev := range b.Events {
		switch e := ev.(type) {
		case events.BlockStored:
			x.add(backend, e.BlockHashes, mediumBit(e.Medium))
		case *events.BlockStored:
			x.add(backend, e.BlockHashes, mediumBit(e.Medium))
		case events.BlockRemoved:
			x.remove(backend, e.BlockHashes, mediumBit(e.Medium))
		case *events.BlockRemoved:
			x.remove(backend, e.BlockHashes, mediumBit(e.Medium))
		case events.AllBlocksCleared, *events.AllBlocksCleared:
			x.clearLocked(backend)
		}
	}
}

func (x *kvIndex) add(backend string, hs []uint64, bit uint8) {
	own := x.by[backend]
	if own == nil {
		own = map[kv.BlockHash]struct{}{}
		x.by[backend] = own
	}
	for _, h := range hs {
		k := kv.BlockHash(h)
		m := x.blocks[k]
		if m == nil {
			m = map[string]uint8{}
			x.blocks[k] = m
		}
		if _, ok := own[k]; !ok && len(own) >= x.maxPerBackend {
			continue
		}
		m[backend] |= bit
		own[k] = struct{}{}
	}
}

func (x *kvIndex) remove(backend string, hs []uint64, bit uint8) {
	for _, h := range hs {
		k := kv.BlockHash(h)
		m := x.blocks[k]
		if m == nil {
			continue
		}
		if m[backend] &^= bit; m[backend] == 0 {
			delete(m, backend)
			delete(x.by[backend], k)
			if len(m) == 0 {
				delete(x.blocks, k)
			}
		}
	}
}

// Clear forgets every block of the backend (a gap that replay cannot fill,
// or the backend left).
func (x *kvIndex) Clear(backend string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.clearLocked(backend)
}

func (x *kvIndex) clearLocked(backend string) {
	for k := range x.by[backend] {
		if m := x.blocks[k]; m != nil {
			delete(m, backend)
			if len(m) == 0 {
				delete(x.blocks, k)
			}
		}
	}
	delete(x.by, backend)
}

// Len is the number of blocks the backend holds by the index.
func (x *kvIndex) Len(backend string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.by[backend])
}

// Tiers returns the tiers the backend holds the block in (0: none).
func (x *kvIndex) Tiers(backend string, h kv.BlockHash) uint8 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.blocks[h][backend]
}

// match returns, per candidate, the tier-weighted count of consecutive
// blocks from the first that the candidate holds, and the plain count.
func (x *kvIndex) match(hs []kv.BlockHash, cands []Candidate, gpuW, cpuW float64) ([]float64, []int) {
	w := make([]float64, len(cands))
	n := make([]int, len(cands))
	alive := make([]bool, len(cands))
	for i := range alive {
		alive[i] = true
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, h := range hs {
		m := x.blocks[h]
		any := false
		for i, c := range cands {
			if !alive[i] {
				continue
			}
			t := m[c.Backend.ID]
			switch {
			case t&tierGPU != 0:
				w[i] += gpuW
			case t&tierCPU != 0:
				w[i] += cpuW
			default:
				alive[i] = false
				continue
			}
			n[i]++
			any = true
		}
		if !any {
			break
		}
	}
	return w, n
}

// replayFunc fetches a publisher's buffered batches from a sequence number.
type replayFunc func(ctx context.Context, endpoint string, from uint64) ([]events.Message, error)

// follower applies one backend's event stream, repairing gaps.
type follower struct {
	backend  string
	replayEP string
	idx      *kvIndex
	replay   replayFunc
	next     uint64 // expected next sequence number
	started  bool
	gaps     func(outcome string)
}

// handle applies one received message. On a gap it asks the replay endpoint
// for the missed batches; when that fails (or there is none), the backend's
// entries are cleared, since the index can no longer vouch for them. Joining
// a stream already under way (ZeroMQ's slow joiner) is a gap from 0.
func (f *follower) handle(ctx context.Context, m events.Message) {
	if m.Gap && (f.started || m.Seq != 0) {
		from := f.next
		if !f.started {
			from = 0
		}
		outcome := "cleared"
		if f.fill(ctx, from, m.Seq) {
			outcome = "replayed"
		} else {
			f.idx.Clear(f.backend)
		}
		if f.gaps != nil {
			f.gaps(outcome)
		}
	}
	f.started = true
	f.next = m.Seq + 1
	f.idx.Apply(f.backend, m.Batch)
}

// fill applies the batches [from, to) from the replay endpoint; false when
// they cannot all be had, in order (the index was then left untouched).
func (f *follower) fill(ctx context.Context, from, to uint64) bool {
	if f.replayEP == "" || f.replay == nil || to <= from {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	missed, err := f.replay(rctx, f.replayEP, from)
	cancel()
	if err != nil || len(missed) == 0 || missed[0].Seq != from || anyGap(missed) || missed[len(missed)-1].Seq < to-1 {
		return false
	}
	if !f.started {
		f.idx.Clear(f.backend) // replaying from the start rebuilds everything
	}
	for _, mm := range missed {
		if mm.Seq >= to {
			break
		}
		f.idx.Apply(f.backend, mm.Batch)
	}
	return true
}

func anyGap(ms []events.Message) bool {
	for _, m := range ms {
		if m.Gap {
			return true
		}
	}
	return false
}

// follow subscribes to a backend's KV events until ctx ends.
func (g *Gateway) follow(ctx context.Context, b Backend) {
	f := &follower{backend: b.ID, replayEP: b.KVEventsReplay, idx: g.kvIndex, replay: events.Replay,
		gaps: func(o string) { g.metrics.kvGaps.WithLabelValues(b.ID, o).Inc() }}
	defer g.kvIndex.Clear(b.ID)
	sub, err := events.NewSubscriber(ctx, b.KVEventsEndpoint, "")
	if err != nil {
		g.log.Warn("kv events: cannot subscribe", "backend", b.ID, "endpoint", b.KVEventsEndpoint, "err", err)
		return
	}
	defer sub.Close()
	for {
		m, err := sub.Recv(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, events.ErrClosed) {
				g.log.Warn("kv events: receive", "backend", b.ID, "err", err)
			}
			return
		}
		f.handle(ctx, m)
	}
}

// syncSubscriptions starts a follower for every backend with a KV events
// endpoint and stops those of backends that left.
func (g *Gateway) syncSubscriptions(ctx context.Context, bs map[string]Backend, subs map[string]context.CancelFunc) {
	want := map[string]Backend{}
	for _, b := range bs {
		if b.KVEventsEndpoint != "" {
			want[b.ID+"\x00"+b.KVEventsEndpoint] = b
		}
	}
	for k, cancel := range subs {
		if _, ok := want[k]; !ok {
			cancel()
			delete(subs, k)
		}
	}
	for k, b := range want {
		if _, ok := subs[k]; ok {
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		subs[k] = cancel
		go g.follow(sctx, b)
	}
}
