package sim

import (
	"context"
	"time"

	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/events"
)

// maxSharedTiers bounds the shared tiers (tieredstorage, Redis) so a
// request carries their lookup results in a fixed array, not a slice.
const maxSharedTiers = 2

// writeQueueBatches bounds each shared tier's write queue, in engine steps'
// worth of blocks: a slow or dead store makes the engine drop writes, never
// wait.
const writeQueueBatches = 1024

// sharedWriteTimeout bounds one write-through call.
const sharedWriteTimeout = 2 * time.Second

// maxWriteBlocks bounds the blocks a writer coalesces into one call when
// batches queue up behind a slow store: one round trip instead of many, yet
// short enough that one replica's write does not hold the node's
// tieredstorage lock for long.
const maxWriteBlocks = 256

// span is the run of prompt blocks [from, to) a shared tier said it holds.
type span struct{ from, to int32 }

// sharedTier is one KV tier below L1 that other replicas read too: the
// node's tieredstorage (shared by the replicas of one node), then Redis
// (shared by all). Lookups run on the request's handler goroutine
// (prepare), loads are charged at the tier's bandwidth in the admission
// step (plan), and blocks are written through by the tier's own writer
// goroutine; the engine goroutine only appends to pending and hands one
// batch per step to the writer, never waiting on the store.
type sharedTier struct {
	name          string // tier label of the metrics
	medium        string // KV event medium of the blocks written to it
	store         L2Cache
	bandwidth     float64 // bytes/s into the GPU
	lookupTimeout time.Duration
	m             tierCounters
	writes        chan []kv.BlockHash
	pending       []kv.BlockHash // engine goroutine only
}

// setShared installs the shared tiers in lookup order, tieredstorage first
// (local disk) then Redis (network); a nil store leaves its tier out.
// Before Run only.
func (e *Engine) setShared(tieredStorage, redis L2Cache) {
	e.shared = e.shared[:0]
	add := func(name, medium string, store L2Cache, bw float64, timeout time.Duration) {
		if store == nil {
			return
		}
		e.shared = append(e.shared, &sharedTier{name: name, medium: medium, store: store, bandwidth: bw,
			lookupTimeout: timeout, m: e.metrics.tier(name), writes: make(chan []kv.BlockHash, writeQueueBatches)})
	}
	add(tierTieredStorage, events.MediumDisk, tieredStorage, e.opts.TieredStorageBandwidth, diskLookupTimeout)
	add(tierRedis, events.MediumRemote, redis, e.opts.L2Bandwidth, l2LookupTimeout)
}

// lookupShared asks each shared tier, in order, how many of the prompt's
// matchable blocks it holds after those this replica holds itself (GPU, L1)
// and those the tiers before it reported, so a lower tier is only asked for
// what the upper ones lack: most requests whose prefix is on the GPU ask no
// shared tier at all. A failed or timed out lookup is a miss, counted; the
// next tier is then asked from the same block. (Should the GPU or L1 drop
// the blocks before admission, the spans no longer reach back to them and
// the request recomputes them: a miss, never a wrong block.)
func (e *Engine) lookupShared(ctx context.Context, r *request, limit int) {
	from := e.localPrefix(r.hashes[:limit])
	for i, t := range e.shared {
		if from >= limit {
			return
		}
		tctx, cancel := context.WithTimeout(ctx, t.lookupTimeout)
		n, err := t.store.MatchPrefix(tctx, r.hashes[from:limit])
		cancel()
		if err != nil {
			t.m.lookupErrors.Inc()
			e.log.Debug("KV tier lookup failed; treating as a miss", "tier", t.name, "err", err)
			continue
		}
		n = min(max(n, 0), limit-from)
		r.shared[i] = span{int32(from), int32(from + n)}
		from += n
	}
}

// sharedHits extends the run of covered leading blocks (GPU and L1) with
// the shared tiers' spans, in order, and returns how many blocks each tier
// serves and the new end of the run. A span that starts beyond the run
// cannot extend it (the chain has a hole), nor can one it already covers.
func (e *Engine) sharedHits(s *seq, covered, limit int) (got [maxSharedTiers]int, end int) {
	for i := range e.shared {
		sp := s.shared[i]
		to := min(int(sp.to), limit)
		if int(sp.from) <= covered && to > covered {
			got[i] = to - covered
			covered = to
		}
	}
	return got, covered
}

// queueShared schedules a newly computed block for write-through to every
// shared tier.
func (e *Engine) queueShared(h kv.BlockHash) {
	for _, t := range e.shared {
		t.pending = append(t.pending, h)
	}
}

// flushShared hands each tier's pending blocks to its writer as one batch;
// a full queue drops the batch (counted): the blocks are simply not shared.
func (e *Engine) flushShared() {
	for _, t := range e.shared {
		if len(t.pending) == 0 {
			continue
		}
		batch := append([]kv.BlockHash(nil), t.pending...)
		t.pending = t.pending[:0]
		select {
		case t.writes <- batch:
		default:
			t.m.dropped.Add(float64(len(batch)))
		}
	}
}

// startWriters starts one goroutine per shared tier that writes its queued
// batches; they stop when ctx ends.
func (e *Engine) startWriters(ctx context.Context) {
	for _, t := range e.shared {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case b := <-t.writes:
					e.write(ctx, t, t.coalesce(b))
				}
			}
		}()
	}
}

// drainWrites writes every queued batch on the calling goroutine: the
// writers' synchronous cycle, for tests and benchmarks that step the engine
// with RunStep instead of Run.
func (e *Engine) drainWrites(ctx context.Context) {
	for _, t := range e.shared {
		for more := true; more; {
			select {
			case b := <-t.writes:
				e.write(ctx, t, t.coalesce(b))
			default:
				more = false
			}
		}
	}
}

// coalesce appends the batches queued behind b, up to maxWriteBlocks.
func (t *sharedTier) coalesce(b []kv.BlockHash) []kv.BlockHash {
	for len(b) < maxWriteBlocks {
		select {
		case more := <-t.writes:
			b = append(b, more...)
		default:
			return b
		}
	}
	return b
}

// write puts one batch into t. On success it counts the bytes and publishes
// BlockStored with the tier's medium (DISK or REMOTE) for the batch; on
// failure it counts the error and publishes nothing, since the blocks are
// not there.
func (e *Engine) write(ctx context.Context, t *sharedTier, b []kv.BlockHash) {
	wctx, cancel := context.WithTimeout(ctx, sharedWriteTimeout)
	err := t.store.Put(wctx, b)
	cancel()
	if err != nil {
		t.m.writeErrors.Inc()
		e.log.Debug("KV tier write failed", "tier", t.name, "blocks", len(b), "err", err)
		return
	}
	t.m.store.Add(float64(int64(len(b)) * e.kvBlock))
	if e.events == nil {
		return
	}
	ts := e.simEpoch.Add(time.Duration(e.simClock.Load()))
	e.events.Publish(EventBatch{TS: float64(ts.UnixNano()) / 1e9, Events: []KVEvent{
		{Kind: BlockStored, Medium: t.medium, BlockSize: e.opts.BlockSize, Hashes: hashList(b)},
	}})
}
