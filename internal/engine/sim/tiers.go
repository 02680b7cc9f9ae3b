package sim

import (
	"context"
	"time"

	"github.com/capstan-dev/capstan/internal/kv"
)

// storedEvent records BlockStored (GPU) for s's prompt blocks [from, to),
// extending the previous event when it is the same sequence's chain.
func (e *Engine) storedEvent(s *seq, from, to int) {
	if e.events == nil {
		return
	}
	bs := e.opts.BlockSize
	if n := len(e.pending); n > 0 && from > 0 {
		last := &e.pending[n-1]
		if last.Kind == BlockStored && last.Medium == "GPU" && len(last.Hashes) > 0 && last.Hashes[len(last.Hashes)-1] == uint64(s.hashes[from-1]) {
			for k := from; k < to; k++ {
				last.Hashes = append(last.Hashes, uint64(s.hashes[k]))
			}
			last.TokenIDs = append(last.TokenIDs, s.prompt[from*bs:to*bs]...)
			return
		}
	}
	ev := KVEvent{Kind: BlockStored, Medium: "GPU", BlockSize: bs, Hashes: make([]uint64, 0, to-from)}
	for k := from; k < to; k++ {
		ev.Hashes = append(ev.Hashes, uint64(s.hashes[k]))
	}
	if from > 0 {
		p := uint64(s.hashes[from-1])
		ev.Parent = &p
	}
	ev.TokenIDs = append([]uint32(nil), s.prompt[from*bs:to*bs]...)
	e.pending = append(e.pending, ev)
}

func hashList(hs []kv.BlockHash) []uint64 {
	out := make([]uint64, len(hs))
	for i, h := range hs {
		out[i] = uint64(h)
	}
	return out
}

// offload handles the blocks this step evicted from the GPU: BlockRemoved
// (GPU) events, and a copy to L1 (CPU BlockStored, plus CPU BlockRemoved for
// what L1 itself evicted to make room).
func (e *Engine) offload() {
	ev := e.bm.drainEvicted()
	if len(ev) == 0 {
		return
	}
	if e.events != nil {
		e.pending = append(e.pending, KVEvent{Kind: BlockRemoved, Medium: "GPU", Hashes: hashList(ev)})
	}
	if e.l1 == nil {
		return
	}
	out := e.l1.Put(ev...)
	e.metrics.TierBytes.WithLabelValues("l1", "store").Add(float64(int64(len(ev)) * e.kvBlock))
	if e.events == nil {
		return
	}
	gone := make(map[kv.BlockHash]struct{}, len(out))
	for _, h := range out {
		gone[h] = struct{}{}
	}
	stored := make([]uint64, 0, len(ev))
	for _, h := range ev {
		if _, g := gone[h]; !g {
			stored = append(stored, uint64(h))
		}
	}
	if len(stored) > 0 {
		e.pending = append(e.pending, KVEvent{Kind: BlockStored, Medium: "CPU", BlockSize: e.opts.BlockSize, Hashes: stored})
	}
	if len(out) > 0 {
		e.pending = append(e.pending, KVEvent{Kind: BlockRemoved, Medium: "CPU", Hashes: hashList(out)})
	}
}

// flushEvents publishes the step's events as one batch.
func (e *Engine) flushEvents() {
	if e.l2Writes != nil && len(e.l2Pending) > 0 {
		batch := append([]kv.BlockHash(nil), e.l2Pending...)
		e.l2Pending = e.l2Pending[:0]
		select {
		case e.l2Writes <- batch:
		default:
			// The writer is behind (Redis slow or down): drop the write; the
			// blocks are simply not shared.
			e.metrics.L2DroppedWrites.Add(float64(len(batch)))
		}
	}
	if e.events == nil || len(e.pending) == 0 {
		return
	}
	ts := e.simEpoch.Add(e.simNow)
	e.events.Publish(EventBatch{TS: float64(ts.UnixNano()) / 1e9, Events: e.pending})
	e.pending = nil
}

// clearCache drops every cached GPU block and queues AllBlocksCleared for
// the step's batch. Engine goroutine only.
func (e *Engine) clearCache() {
	e.bm.reset()
	if e.events != nil {
		e.pending = append(e.pending, KVEvent{Kind: AllBlocksCleared})
	}
}

// queueL2 schedules a newly computed block for write-through to L2.
func (e *Engine) queueL2(h kv.BlockHash) {
	if e.l2Writes != nil {
		e.l2Pending = append(e.l2Pending, h)
	}
}

// startL2Writer starts the goroutine that writes computed blocks to L2 off
// the engine loop. It stops when ctx ends.
func (e *Engine) startL2Writer(ctx context.Context) {
	if e.l2 == nil {
		return
	}
	e.l2Writes = make(chan []kv.BlockHash, 1024)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case b := <-e.l2Writes:
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := e.l2.Put(wctx, b)
				cancel()
				if err != nil {
					e.log.Debug("L2 write failed", "blocks", len(b), "err", err)
					continue
				}
				e.metrics.TierBytes.WithLabelValues("l2", "store").Add(float64(int64(len(b)) * e.kvBlock))
			}
		}
	}()
}
