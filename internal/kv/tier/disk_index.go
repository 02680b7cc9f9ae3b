package tier

import "github.com/capstan-dev/capstan/internal/kv"

// idxKey names one record: its namespace directory (an index into
// Disk.spaces) and its block hash.
type idxKey struct {
	space uint32
	h     kv.BlockHash
}

type idxSlot struct {
	key   idxKey
	mtime int64 // UnixNano, as last seen
	pos   int32 // position in heap
}

// diskIndex is a process's view of the records in the store: a min-heap by
// modification time, so the least recently used record is found in O(1) and
// every update costs O(log n). Slots live in a slice and are recycled, like
// L1's. It holds one slot per record the process knows of, and the store's
// shared budget bounds the records, so it never outgrows
// CapacityBytes / (the smallest BlockBytes in the store) slots.
type diskIndex struct {
	slots []idxSlot
	free  []int32
	at    map[idxKey]int32
	heap  []int32
}

func newDiskIndex() diskIndex {
	return diskIndex{at: make(map[idxKey]int32)}
}

func (x *diskIndex) len() int { return len(x.at) }

// reset forgets every record, keeping the memory.
func (x *diskIndex) reset() {
	x.slots = x.slots[:0]
	x.free = x.free[:0]
	x.heap = x.heap[:0]
	clear(x.at)
}

// set records k with modification time mtime, inserting or updating it.
func (x *diskIndex) set(k idxKey, mtime int64) {
	if i, ok := x.at[k]; ok {
		old := x.slots[i].mtime
		x.slots[i].mtime = mtime
		switch {
		case mtime < old:
			x.up(int(x.slots[i].pos))
		case mtime > old:
			x.down(int(x.slots[i].pos))
		}
		return
	}
	var i int32
	if n := len(x.free); n > 0 {
		i = x.free[n-1]
		x.free = x.free[:n-1]
	} else {
		x.slots = append(x.slots, idxSlot{})
		i = int32(len(x.slots) - 1)
	}
	x.slots[i] = idxSlot{key: k, mtime: mtime, pos: int32(len(x.heap))}
	x.at[k] = i
	x.heap = append(x.heap, i)
	x.up(len(x.heap) - 1)
}

// remove forgets k if present.
func (x *diskIndex) remove(k idxKey) {
	i, ok := x.at[k]
	if !ok {
		return
	}
	delete(x.at, k)
	p := int(x.slots[i].pos)
	last := len(x.heap) - 1
	if p != last {
		x.swap(p, last)
	}
	x.heap = x.heap[:last]
	if p != last {
		x.down(p)
		x.up(p)
	}
	x.free = append(x.free, i)
}

// oldest returns the record with the smallest modification time.
func (x *diskIndex) oldest() (idxKey, int64, bool) {
	if len(x.heap) == 0 {
		return idxKey{}, 0, false
	}
	s := &x.slots[x.heap[0]]
	return s.key, s.mtime, true
}

func (x *diskIndex) less(a, b int) bool {
	return x.slots[x.heap[a]].mtime < x.slots[x.heap[b]].mtime
}

func (x *diskIndex) swap(a, b int) {
	x.heap[a], x.heap[b] = x.heap[b], x.heap[a]
	x.slots[x.heap[a]].pos = int32(a)
	x.slots[x.heap[b]].pos = int32(b)
}

func (x *diskIndex) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !x.less(j, p) {
			return
		}
		x.swap(j, p)
		j = p
	}
}

func (x *diskIndex) down(j int) {
	n := len(x.heap)
	for {
		c := 2*j + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && x.less(r, c) {
			c = r
		}
		if !x.less(c, j) {
			return
		}
		x.swap(j, c)
		j = c
	}
}
