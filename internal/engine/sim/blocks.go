package sim

import (
	"sync"

	"github.com/capstan-dev/capstan/internal/kv"
)

const noBlock = int32(-1)

// block is one paged KV block on the (simulated) GPU.
type block struct {
	hash       kv.BlockHash
	cached     bool  // hash is valid and indexed in byHash
	ref        int32 // sequences using the block
	prev, next int32 // free-queue links while ref == 0
}

// blockManager is vLLM's KV block pool with automatic prefix caching: blocks
// are ref-counted; a full prompt block is indexed by its chained hash so later
// requests reuse it; unreferenced blocks sit in a free queue ordered by
// eviction priority (least recently used cached blocks first, uncached ones
// before them) and are evicted lazily when allocation needs them. It is owned
// by the engine goroutine and not safe for concurrent use, except
// residentPrefix.
type blockManager struct {
	blocks []block
	// byHash is written by the engine goroutine under hashMu, and read by
	// it without the lock; other goroutines read it under hashMu's read lock
	// (residentPrefix).
	byHash  map[kv.BlockHash]int32
	hashMu  sync.RWMutex
	head    int32 // next block to hand out (evict)
	tail    int32
	numFree int
	evicted []kv.BlockHash // hashes evicted since the last drain, in order
}

func newBlockManager(n int) *blockManager {
	m := &blockManager{blocks: make([]block, n), byHash: make(map[kv.BlockHash]int32, min(n, 1<<16)), head: noBlock, tail: noBlock}
	for i := range m.blocks {
		m.blocks[i].prev, m.blocks[i].next = noBlock, noBlock
		m.pushTail(int32(i))
	}
	return m
}

func (m *blockManager) total() int { return len(m.blocks) }

// usage is the fraction of blocks referenced by sequences (cached but idle
// blocks count as free, as in vLLM's kv_cache_usage_perc).
func (m *blockManager) usage() float64 {
	if len(m.blocks) == 0 {
		return 0
	}
	return 1 - float64(m.numFree)/float64(len(m.blocks))
}

func (m *blockManager) unlink(i int32) {
	b := &m.blocks[i]
	if b.prev != noBlock {
		m.blocks[b.prev].next = b.next
	} else {
		m.head = b.next
	}
	if b.next != noBlock {
		m.blocks[b.next].prev = b.prev
	} else {
		m.tail = b.prev
	}
	b.prev, b.next = noBlock, noBlock
	m.numFree--
}

func (m *blockManager) pushTail(i int32) {
	b := &m.blocks[i]
	b.prev, b.next = m.tail, noBlock
	if m.tail != noBlock {
		m.blocks[m.tail].next = i
	} else {
		m.head = i
	}
	m.tail = i
	m.numFree++
}

func (m *blockManager) pushHead(i int32) {
	b := &m.blocks[i]
	b.prev, b.next = noBlock, m.head
	if m.head != noBlock {
		m.blocks[m.head].prev = i
	} else {
		m.tail = i
	}
	m.head = i
	m.numFree++
}

// match counts the leading hashes whose blocks are on the GPU, and how many
// of those are idle (in the free queue, so acquiring them uses free capacity).
func (m *blockManager) match(hashes []kv.BlockHash) (n, idle int) {
	for _, h := range hashes {
		i, ok := m.byHash[h]
		if !ok {
			break
		}
		if m.blocks[i].ref == 0 {
			idle++
		}
		n++
	}
	return n, idle
}

// acquire references the cached blocks of hashes (all must be present, as
// just reported by match) and appends their ids to dst.
func (m *blockManager) acquire(dst []int32, hashes []kv.BlockHash) []int32 {
	for _, h := range hashes {
		i := m.byHash[h]
		if m.blocks[i].ref == 0 {
			m.unlink(i)
		}
		m.blocks[i].ref++
		dst = append(dst, i)
	}
	return dst
}

// allocate appends n fresh blocks to dst, evicting cached idle blocks as
// needed; ok is false (and nothing changes) when fewer than n are free.
func (m *blockManager) allocate(dst []int32, n int) ([]int32, bool) {
	if n > m.numFree {
		return dst, false
	}
	for range n {
		i := m.head
		m.unlink(i)
		b := &m.blocks[i]
		if b.cached {
			m.hashMu.Lock()
			delete(m.byHash, b.hash)
			m.hashMu.Unlock()
			b.cached = false
			m.evicted = append(m.evicted, b.hash)
		}
		b.ref = 1
		dst = append(dst, i)
	}
	return dst, true
}

// release drops one reference from each block, last block first, so a
// sequence's tail is evicted before its (more shareable) head.
func (m *blockManager) release(ids []int32) {
	for k := len(ids) - 1; k >= 0; k-- {
		i := ids[k]
		b := &m.blocks[i]
		b.ref--
		if b.ref > 0 {
			continue
		}
		if b.cached {
			m.pushTail(i)
		} else {
			m.pushHead(i)
		}
	}
}

// commit indexes block i under h once its KV is complete. It reports false
// when another block already holds h (two sequences computed the same block
// concurrently); the duplicate then stays private, as in vLLM.
func (m *blockManager) commit(i int32, h kv.BlockHash) bool {
	if _, dup := m.byHash[h]; dup {
		return false
	}
	b := &m.blocks[i]
	b.hash, b.cached = h, true
	m.hashMu.Lock()
	m.byHash[h] = i
	m.hashMu.Unlock()
	return true
}

// residentPrefix counts the leading hashes whose blocks are cached on the
// GPU now. Safe to call from any goroutine: handlers use it to skip asking
// the shared tiers for blocks the GPU already holds.
func (m *blockManager) residentPrefix(hashes []kv.BlockHash) int {
	m.hashMu.RLock()
	defer m.hashMu.RUnlock()
	for n, h := range hashes {
		if _, ok := m.byHash[h]; !ok {
			return n
		}
	}
	return len(hashes)
}

// drainEvicted returns and forgets the hashes evicted since the last call.
// The returned slice is reused by the next call.
func (m *blockManager) drainEvicted() []kv.BlockHash {
	out := m.evicted
	m.evicted = m.evicted[:0]
	return out
}

// reset forgets every cached hash (blocks in use stay allocated but become
// private) and reports whether anything was cached.
func (m *blockManager) reset() bool {
	had := len(m.byHash) > 0
	m.hashMu.Lock()
	for h, i := range m.byHash {
		m.blocks[i].cached = false
		delete(m.byHash, h)
	}
	m.hashMu.Unlock()
	m.evicted = m.evicted[:0]
	return had
}
