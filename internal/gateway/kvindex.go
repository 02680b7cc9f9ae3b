package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/events"
)

// Tiers a block may be reached from by one backend: its own GPU and CPU
// (L1), its node's tieredstorage (DISK) and Redis (REMOTE).
const (
	tierGPU uint8 = 1 << iota
	tierCPU
	tierDisk
	tierRemote
)

// kvIndex is the precise KV block index: where each block hash is, as the
// backends' own KV events say. One per gateway, shared by every kvaware
// route (hashes are seeded per model, so routes of different models never
// collide).
//
//   - GPU and CPU blocks are a backend's own, indexed per backend.
//   - DISK blocks (tieredstorage) are indexed per node: a block any replica
//     of the node stored there is as near to all of them. A backend whose
//     node is unknown shares nothing by node; its DISK blocks count for it
//     alone.
//   - REMOTE blocks (Redis) are indexed once, for every backend.
type kvIndex struct {
	mu     sync.RWMutex
	clock  clock.Clock
	blocks map[kv.BlockHash]map[string]uint8 // hash → backend → own tiers
	by     map[string]map[kv.BlockHash]struct{}
	// maxPerBackend bounds memory against a publisher that never removes.
	maxPerBackend int

	nodeOf map[string]string     // backend → node, from the routes
	disk   map[string]*sharedSet // diskKey → the node's DISK blocks
	remote *sharedSet            // REMOTE blocks
}

func newKVIndex(clk clock.Clock) *kvIndex {
	if clk == nil {
		clk = clock.Real{}
	}
	return &kvIndex{clock: clk, blocks: map[kv.BlockHash]map[string]uint8{}, by: map[string]map[kv.BlockHash]struct{}{},
		maxPerBackend: 1 << 22, nodeOf: map[string]string{}, disk: map[string]*sharedSet{},
		remote: newSharedSet(maxRemote, remoteTTL)}
}

// mediumBit maps an event's medium to its tier; an unknown medium counts
// as GPU, as vLLM's own events without one mean.
func mediumBit(m string) uint8 {
	switch m {
	case events.MediumCPU:
		return tierCPU
	case events.MediumDisk:
		return tierDisk
	case events.MediumRemote:
		return tierRemote
	}
	return tierGPU
}

// diskKey names the tieredstorage set a backend reads: its node's, or for
// a backend on no known node one of its own.
func diskKey(backend, node string) string {
	if node == "" {
		return "\x00" + backend
	}
	return node
}

// SetNodes replaces the backend → node map (every routed backend) and
// forgets the DISK sets of nodes no routed backend runs on any more: their
// store is out of reach, and node names come and go with the fleet.
func (x *kvIndex) SetNodes(nodeOf map[string]string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.nodeOf = nodeOf
	keep := make(map[string]struct{}, len(nodeOf))
	for b, n := range nodeOf {
		keep[diskKey(b, n)] = struct{}{}
	}
	for k := range x.disk {
		if _, ok := keep[k]; !ok {
			delete(x.disk, k)
		}
	}
}

// Apply folds one batch of a backend's events into the index.
func (x *kvIndex) Apply(backend string, b events.Batch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.clock.Now().UnixNano()
	x.remote.expire(now)
	for _, ev := range b.Events {
		switch e := ev.(type) {
		case events.BlockStored:
			x.store(backend, e.BlockHashes, mediumBit(e.Medium), now)
		case *events.BlockStored:
			x.store(backend, e.BlockHashes, mediumBit(e.Medium), now)
		case events.BlockRemoved:
			x.drop(backend, e.BlockHashes, mediumBit(e.Medium))
		case *events.BlockRemoved:
			x.drop(backend, e.BlockHashes, mediumBit(e.Medium))
		case events.AllBlocksCleared, *events.AllBlocksCleared:
			// The engine reset its own cache; the node's disk store and
			// Redis outlive that and keep their blocks.
			x.clearLocked(backend)
		}
	}
}

func (x *kvIndex) store(backend string, hs []uint64, bit uint8, now int64) {
	var set *sharedSet
	switch bit {
	case tierDisk:
		node, ok := x.nodeOf[backend]
		if !ok {
			return // no route has it (it left): its follower is stopping
		}
		k := diskKey(backend, node)
		if set = x.disk[k]; set == nil {
			set = newSharedSet(maxPerNode, 0)
			x.disk[k] = set
		}
	case tierRemote:
		set = x.remote
	default:
		x.add(backend, hs, bit)
		return
	}
	for _, h := range hs {
		set.put(kv.BlockHash(h), now)
	}
}

// drop removes blocks from the tier: a DISK removal from any replica of a
// node removes the block for the whole node, a REMOTE one for everyone.
func (x *kvIndex) drop(backend string, hs []uint64, bit uint8) {
	var set *sharedSet
	k := ""
	switch bit {
	case tierDisk:
		if node, ok := x.nodeOf[backend]; ok {
			k = diskKey(backend, node)
			set = x.disk[k]
		}
	case tierRemote:
		set = x.remote
	default:
		x.remove(backend, hs, bit)
		return
	}
	if set == nil {
		return
	}
	for _, h := range hs {
		set.del(kv.BlockHash(h))
	}
	if bit == tierDisk && set.len() == 0 {
		delete(x.disk, k)
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

// Clear forgets every block of the backend's own tiers (a gap that replay
// cannot fill, or the backend left). The shared tiers keep theirs: the
// node's store and Redis still hold them, whatever this backend missed.
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

// Len is the number of blocks the backend holds itself (GPU or CPU) by the
// index.
func (x *kvIndex) Len(backend string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.by[backend])
}

// Tiers returns the tiers the backend holds the block in itself (0: none).
func (x *kvIndex) Tiers(backend string, h kv.BlockHash) uint8 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.blocks[h][backend]
}

// blockReach answers, for one block, which tier each candidate reaches it
// from; it looks the block up once per tier, not once per candidate. The
// index's lock must be held.
type blockReach struct {
	x      *kvIndex
	h      kv.BlockHash
	now    int64
	own    map[string]uint8
	remote int8 // 0 unknown, 1 yes, -1 no
}

func (x *kvIndex) block(h kv.BlockHash, now int64) blockReach {
	return blockReach{x: x, h: h, now: now, own: x.blocks[h]}
}

// tier is the best tier the backend reaches the block from (0: none): own
// GPU, own CPU, its node's DISK set dset, then REMOTE.
func (r *blockReach) tier(backend string, dset *sharedSet) uint8 {
	own := r.own[backend]
	switch {
	case own&tierGPU != 0:
		return tierGPU
	case own&tierCPU != 0:
		return tierCPU
	case dset != nil && dset.has(r.h, r.now):
		return tierDisk
	}
	if r.remote == 0 {
		r.remote = -1
		if r.x.remote.has(r.h, r.now) {
			r.remote = 1
		}
	}
	if r.remote > 0 {
		return tierRemote
	}
	return 0
}

// match returns, per candidate, the tier-weighted count of consecutive
// blocks from the first that the candidate reaches (each from the best tier
// it can), and the plain count.
func (x *kvIndex) match(hs []kv.BlockHash, cands []Candidate, tw tierWeights) ([]float64, []int) {
	w := make([]float64, len(cands))
	n := make([]int, len(cands))
	alive := make([]bool, len(cands))
	for i := range alive {
		alive[i] = true
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	now := x.clock.Now().UnixNano()
	dsets := make([]*sharedSet, len(cands))
	for i, c := range cands {
		dsets[i] = x.disk[diskKey(c.Backend.ID, c.Backend.Node)]
	}
	for _, h := range hs {
		r := x.block(h, now)
		any := false
		for i, c := range cands {
			if !alive[i] {
				continue
			}
			t := r.tier(c.Backend.ID, dsets[i])
			if t == 0 {
				alive[i] = false
				continue
			}
			w[i] += tw.of(t)
			n[i]++
			any = true
		}
		if !any {
			break
		}
	}
	return w, n
}

// picked records a routing decision: the chosen backend will hold every
// block of the prompt on its GPU (speculatively, until its own events say
// so), and the leading blocks it reaches only through a shared tier are
// read from there, which refreshes them as the store's LRU does. It returns
// how many leading blocks the backend reached.
func (x *kvIndex) picked(hs []kv.BlockHash, c Candidate) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.clock.Now().UnixNano()
	dset := x.disk[diskKey(c.Backend.ID, c.Backend.Node)]
	n := 0
	for _, h := range hs {
		r := x.block(h, now)
		t := r.tier(c.Backend.ID, dset)
		if t == 0 {
			break
		}
		switch t {
		case tierDisk:
			dset.touch(h, now)
		case tierRemote:
			x.remote.touch(h, now)
		}
		n++
	}
	raw := make([]uint64, len(hs))
	for i, h := range hs {
		raw[i] = uint64(h)
	}
	x.add(c.Backend.ID, raw, tierGPU)
	return n
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
