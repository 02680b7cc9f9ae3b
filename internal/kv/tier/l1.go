package tier

import (
	"sync"

	"github.com/capstan-dev/capstan/internal/kv"
)

// nilIdx marks the end of the intrusive list.
const nilIdx = -1

// l1Node is one slot of the L1 slab. Nodes live in a slice and link by index,
// so a full cache recycles evicted slots and Put allocates nothing for the
// cache itself.
type l1Node struct {
	hash       kv.BlockHash
	prev, next int32
}

// L1 is a node-local CPU-memory block cache: an LRU over block hashes bounded
// by bytes (capacity in blocks = capacityBytes/blockBytes). Every operation is
// O(1) per block. Safe for concurrent use.
//
// Hashes are treated as prefix chains: a block is useless without the blocks
// before it, so MatchPrefix and Put leave the earlier blocks of a chain more
// recently used than the later ones, and eviction takes chain tails first.
type L1 struct {
	mu    sync.Mutex
	cap   int
	index map[kv.BlockHash]int32
	nodes []l1Node
	// head is the most recently used node, tail the least.
	head, tail int32
	// free is a stack of unused slots (filled only by Remove/Clear).
	free []int32
}

// NewL1 returns an empty L1 holding capacityBytes/blockBytes blocks. A
// non-positive blockBytes or a capacity below one block gives a cache that
// stores nothing.
func NewL1(capacityBytes, blockBytes int64) *L1 {
	n := 0
	if blockBytes > 0 && capacityBytes > 0 {
		n64 := capacityBytes / blockBytes
		// The slab links by int32; beyond that the byte budget is fiction anyway.
		n = int(min(n64, int64(1<<31-1)))
	}
	// Preallocate modestly: a big budget with few blocks in use should not
	// cost its full slab up front.
	pre := min(n, 1<<16)
	return &L1{
		cap:   n,
		index: make(map[kv.BlockHash]int32, pre),
		nodes: make([]l1Node, 0, pre),
		head:  nilIdx,
		tail:  nilIdx,
	}
}

// CapacityBlocks is how many blocks the cache can hold.
func (c *L1) CapacityBlocks() int { return c.cap }

// Len is how many blocks the cache holds now.
func (c *L1) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}

// Contains reports whether h is cached, without touching it.
func (c *L1) Contains(h kv.BlockHash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.index[h]
	return ok
}

// MatchPrefix returns the number of leading hashes present and touches them,
// leaving hashes[0] the most recently used.
func (c *L1) MatchPrefix(hashes []kv.BlockHash) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Remember the slots found so touching them needs no second lookup;
	// the stack buffer covers typical prompts without allocating.
	var stack [128]int32
	found := stack[:0]
	for _, h := range hashes {
		idx, ok := c.index[h]
		if !ok {
			break
		}
		found = append(found, idx)
	}
	for i := len(found) - 1; i >= 0; i-- {
		c.moveToFront(found[i])
	}
	return len(found)
}

// Put inserts or touches the hashes and returns the hashes that fell out to
// make room (nil when none did). Hashes are inserted back to front, so
// hashes[0] ends most recently used; when one call brings more blocks than
// fit, the chain's tail is what gets evicted, possibly including hashes
// inserted by this very call (they are then reported as evicted).
func (c *L1) Put(hashes ...kv.BlockHash) (evicted []kv.BlockHash) {
	if c.cap == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		if idx, ok := c.index[h]; ok {
			c.moveToFront(idx)
			continue
		}
		var idx int32
		switch {
		case len(c.free) > 0:
			idx = c.free[len(c.free)-1]
			c.free = c.free[:len(c.free)-1]
		case len(c.nodes) < c.cap:
			c.nodes = append(c.nodes, l1Node{})
			idx = int32(len(c.nodes) - 1)
		default:
			// Full: recycle the least recently used slot.
			idx = c.tail
			old := c.nodes[idx].hash
			c.unlink(idx)
			delete(c.index, old)
			if evicted == nil {
				// At most one eviction per remaining hash: allocate once.
				evicted = make([]kv.BlockHash, 0, i+1)
			}
			evicted = append(evicted, old)
		}
		c.nodes[idx].hash = h
		c.index[h] = idx
		c.pushFront(idx)
	}
	return evicted
}

// Remove drops h if present and reports whether it was.
func (c *L1) Remove(h kv.BlockHash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx, ok := c.index[h]
	if !ok {
		return false
	}
	c.unlink(idx)
	delete(c.index, h)
	c.free = append(c.free, idx)
	return true
}

// Clear drops every block.
func (c *L1) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.index)
	c.nodes = c.nodes[:0]
	c.free = c.free[:0]
	c.head, c.tail = nilIdx, nilIdx
}

// unlink detaches idx from the list. Caller holds mu.
func (c *L1) unlink(idx int32) {
	n := &c.nodes[idx]
	if n.prev != nilIdx {
		c.nodes[n.prev].next = n.next
	} else {
		c.head = n.next
	}
	if n.next != nilIdx {
		c.nodes[n.next].prev = n.prev
	} else {
		c.tail = n.prev
	}
	n.prev, n.next = nilIdx, nilIdx
}

// pushFront links a detached idx as the most recently used. Caller holds mu.
func (c *L1) pushFront(idx int32) {
	n := &c.nodes[idx]
	n.prev = nilIdx
	n.next = c.head
	if c.head != nilIdx {
		c.nodes[c.head].prev = idx
	}
	c.head = idx
	if c.tail == nilIdx {
		c.tail = idx
	}
}

// moveToFront touches idx. Caller holds mu.
func (c *L1) moveToFront(idx int32) {
	if c.head == idx {
		return
	}
	c.unlink(idx)
	c.pushFront(idx)
}

// order returns the hashes from most to least recently used (for tests).
func (c *L1) order() []kv.BlockHash {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]kv.BlockHash, 0, len(c.index))
	for i := c.head; i != nilIdx; i = c.nodes[i].next {
		out = append(out, c.nodes[i].hash)
	}
	return out
}
