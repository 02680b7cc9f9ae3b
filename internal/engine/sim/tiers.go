package sim

import "github.com/capstan-dev/capstan/internal/kv"

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
	e.metrics.l1.store.Add(float64(int64(len(ev)) * e.kvBlock))
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

// flushEvents hands the step's new blocks to the shared tiers' writers and
// publishes the step's events as one batch.
func (e *Engine) flushEvents() {
	e.flushShared()
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
