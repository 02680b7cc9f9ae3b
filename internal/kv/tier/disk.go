package tier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
)

// DiskOptions configure a tieredstorage store: one directory per node, which
// every replica on the node opens; each namespace (model) has its own file
// in it, bounded by its own CapacityBytes.
type DiskOptions struct {
	// Dir is the node's store directory (created if missing).
	Dir string
	// CapacityBytes bounds the blocks this namespace holds, counted at
	// BlockBytes each. It is the namespace's own budget, not the
	// directory's: every namespace has its own slot file. The capacity is
	// rounded down to whole 16-block sets (Stats reports the real one), and
	// it names the file, so processes of one namespace share blocks only
	// when they pass the same capacity and block size.
	CapacityBytes int64
	// BlockBytes is one KV block's simulated size: what capacity counts and
	// what the engine charges load time for. The file holds a small
	// checksummed record per block (a 64-byte slot), not tensors.
	BlockBytes int64
	// Namespace keeps models apart (the engine passes its model id).
	Namespace string
	// Clock stamps recency; nil is the wall clock. Every process sharing
	// Dir must use the same one.
	Clock clock.Clock
}

// Limits OpenDisk enforces, so a typo cannot ask for a file of billions of
// slots.
const (
	// MaxDiskCapacityBytes is the largest store (1 PiB).
	MaxDiskCapacityBytes = 1 << 50
	// MaxDiskBlocks is the most blocks (CapacityBytes/BlockBytes) a store
	// may hold; its slot file takes 64 bytes per block (128 MiB at most).
	MaxDiskBlocks = 1 << 21
)

// ErrDiskWrite is wrapped by every error of Put that comes from the disk (full,
// I/O error, unwritable file): the blocks it names are simply not stored.
var ErrDiskWrite = errors.New("tier: tieredstorage write failed")

// DiskStats is a store's state as this process sees it. Blocks, Bytes and
// CapacityBytes describe this namespace's slot file, as every process that
// opens it fills it; the counters count this Disk's own operations.
type DiskStats struct {
	Blocks        int    // occupied slots: valid records, and corrupt ones until a writer reuses them
	Bytes         int64  // Blocks × BlockBytes
	CapacityBytes int64  // the slots × BlockBytes: CapacityBytes rounded down to whole sets
	Hits, Misses  uint64 // blocks asked of MatchPrefix and found / not returned
	Corrupt       uint64 // reads of a block's record that failed its check: misses
	WriteErrors   uint64 // records not written (disk full, I/O error)
	Evictions     uint64 // valid records this Disk overwrote to store others
}

// Disk is the tieredstorage tier: a bounded, checksummed store of KV block
// records on local disk, shared by the replicas (processes) of one node,
// evicting the least recently used of the 32 records of a block's two
// candidate 16-way sets. It implements L2's contract: an error is a miss, never a failure.
//
// Layout under Dir (see disk_slots.go):
//
//	<ns hash, 16 hex>-<BlockBytes>-<blocks>.kvs   one slot file per namespace and geometry
//
// A slot file is a 4 KiB header (geometry, the count of occupied slots,
// evictions; checksummed) and CapacityBytes/BlockBytes 64-byte slots in sets
// of 16 (one set with fewer ways below 16 blocks). Block h may live in any
// slot of either of its two sets (diskGeometry.sets), so a lookup is one or
// two 1 KiB reads; a write takes the emptier set, which keeps sets from
// overflowing until the file is nearly full, and only when both are full
// evicts the least recently used of their records — not the file's: LRU
// holds within each pair of sets. A slot is a checksummed 52-byte record (disk_record.go)
// plus a recency stamp that hits refresh at most once per touchEvery.
// Files of other geometries (another capacity or block size) and of the
// previous one-file-per-block layout are left alone, not read or removed.
//
// Reads take no lock: a record is valid only if it is block h's, whole,
// with its checksum (a torn or damaged record is a miss, counted as
// corrupt, and the next writer into its set overwrites it first), and a
// file truncated by hand reads as empty slots past its end. Every write of
// a record (Put) runs under an exclusive flock on the slot file, which
// keeps the header's counts exact: a Put reads the header, writes each
// block into its set (an empty or corrupt slot, else over the set's least
// recently stamped record), and writes the header back. A header that fails
// its check when a Disk opens the file or a Put reads it resets the file:
// every record is then a miss. Nothing is fsynced: after a power loss the
// checksums turn what the crash left into misses.
//
// Known slack, all on the side of a miss: a hit that races another
// process's eviction of the same record still counts (the record was whole
// when read); recency is advisory (stamps written without the lock may be
// lost or land on the record that replaced the one hit); and bytes changed
// by hand can leave the header's count off by those slots until the file is
// truncated or reset. Put waits for the lock without watching its context;
// the lock is held for one Put's few small reads and writes.
//
// Safe for concurrent use by goroutines and by processes.
type Disk struct {
	path string
	opts DiskOptions
	clk  clock.Clock
	geo  diskGeometry
	want diskHeader // the header of an empty file of this geometry
	f    *os.File   // ReadAt/WriteAt: an in-flight call keeps the descriptor from reuse by Close

	// mu serialises this Disk's writers (they share f's open file
	// description, hence its flock); the flock serialises processes'.
	mu     sync.Mutex
	closed atomic.Bool

	hits, misses, corrupt, writeErrors, evictions atomic.Uint64
	seenBlocks                                    atomic.Int64 // the header's count as last read

	// write writes a slot (pwrite-style); tests replace it to fail like a
	// full disk.
	write func(f *os.File, b []byte, off int64) error

	// putBuf is Put's buffers (under mu): a buffer handed to ReadAt or
	// WriteAt escapes, and allocations per block would be most of Put's
	// garbage.
	putBuf ioBuf
}

// ioBuf holds a set as read, and a slot or a stamp to write.
type ioBuf struct {
	set, set2 [maxSetSize]byte
	slot      [slotSize]byte
}

// ioBufs are MatchPrefix's buffers, for the same reason.
var ioBufs = sync.Pool{New: func() any { return new(ioBuf) }}

// touchEvery bounds how often a record is stamped: recency finer than a
// second changes no eviction that matters, and every stamp is a write.
const touchEvery = int64(time.Second)

var _ L2 = (*Disk)(nil)

// Validate reports the first invalid field, by name.
func (o DiskOptions) Validate() error {
	switch {
	case o.Dir == "":
		return errors.New("tier: DiskOptions.Dir must be set")
	case o.CapacityBytes <= 0:
		return fmt.Errorf("tier: DiskOptions.CapacityBytes must be positive, got %d", o.CapacityBytes)
	case o.CapacityBytes > MaxDiskCapacityBytes:
		return fmt.Errorf("tier: DiskOptions.CapacityBytes %d exceeds the maximum %d (1 PiB)", o.CapacityBytes, int64(MaxDiskCapacityBytes))
	case o.BlockBytes <= 0:
		return fmt.Errorf("tier: DiskOptions.BlockBytes must be positive, got %d", o.BlockBytes)
	case o.CapacityBytes < o.BlockBytes:
		return fmt.Errorf("tier: DiskOptions.CapacityBytes %d holds no block of DiskOptions.BlockBytes %d", o.CapacityBytes, o.BlockBytes)
	case o.CapacityBytes/o.BlockBytes > MaxDiskBlocks:
		return fmt.Errorf("tier: DiskOptions.CapacityBytes/BlockBytes is %d blocks, more than the maximum %d", o.CapacityBytes/o.BlockBytes, MaxDiskBlocks)
	case o.Namespace == "" || len(o.Namespace) > MaxNamespaceLen:
		return fmt.Errorf("tier: DiskOptions.Namespace must be 1..%d bytes, got %d", MaxNamespaceLen, len(o.Namespace))
	}
	return nil
}

// OpenDisk opens (creating) the namespace's slot file in o.Dir; a file
// whose header fails its check is reset.
func OpenDisk(o DiskOptions) (*Disk, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dir := filepath.Clean(o.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tier: tieredstorage DiskOptions.Dir %s: %w", dir, err)
	}
	nsHash := diskNamespaceHash(o.Namespace)
	geo := newDiskGeometry(o.CapacityBytes / o.BlockBytes)
	path := filepath.Join(dir, slotFileName(nsHash, o.BlockBytes, geo))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tier: tieredstorage DiskOptions.Dir %s: %w", dir, err)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	d := &Disk{
		path:  path,
		opts:  o,
		clk:   clk,
		geo:   geo,
		want:  diskHeader{geo: geo, blockBytes: o.BlockBytes, nsHash: nsHash},
		f:     f,
		write: writeAt,
	}
	if err := d.prepare(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return d, nil
}

// prepare makes the file usable: a valid header (resetting the file when
// it has none) and its full size (a file truncated by hand is extended and
// its slots counted again).
func (d *Disk) prepare() error {
	if err := flock(d.f); err != nil {
		return fmt.Errorf("tier: tieredstorage %s: %w", d.path, err)
	}
	defer d.unlock()
	hdr, ok := readHeader(d.f, d.want)
	if !ok {
		var err error
		if hdr, err = d.reset(); err != nil {
			return fmt.Errorf("tier: tieredstorage %s: %w", d.path, err)
		}
	}
	fi, err := d.f.Stat()
	if err != nil {
		return fmt.Errorf("tier: tieredstorage %s: %w", d.path, err)
	}
	if fi.Size() < d.geo.fileSize() {
		if err := d.regrow(&hdr); err != nil {
			return fmt.Errorf("tier: tieredstorage %s: %w", d.path, err)
		}
	}
	d.seenBlocks.Store(hdr.blocks)
	return nil
}

// MatchPrefix implements L2: the number of leading hashes whose records are
// present and valid, one or two reads of a set per hash. A hit makes the record
// most recently used in its set, hashes[0] most of all (a chain's tail is
// evicted before its head). A record that fails its check ends the prefix
// and counts as corrupt.
func (d *Disk) MatchPrefix(ctx context.Context, hashes []kv.BlockHash) (int, error) {
	if d.closed.Load() {
		return 0, ErrClosed
	}
	now := d.clk.Now().UnixNano()
	buf := ioBufs.Get().(*ioBuf)
	defer ioBufs.Put(buf)
	set := buf.set[:d.geo.setSize()]
	n := 0
	var err error
	for i, h := range hashes {
		if err = ctx.Err(); err != nil {
			break
		}
		off, w, st := d.find(set, h)
		if st != slotValid {
			break
		}
		// Recency is advisory: a record evicted since it was read was
		// still whole when read, so the hit stands, and a stamp that lands
		// on its successor only makes that one look recent.
		if at := now - int64(i); at-slotStamp(set[w*slotSize:]) >= touchEvery {
			stamp := buf.slot[:8]
			putStamp(stamp, at)
			_, _ = d.f.WriteAt(stamp, off+int64(w)*slotSize+stampOff)
		}
		n++
	}
	d.hits.Add(uint64(n))
	d.misses.Add(uint64(len(hashes) - n))
	if err == nil && n < len(hashes) && d.closed.Load() {
		err = ErrClosed
	}
	return n, err
}

// find looks for block h's valid record in its two sets, in turn, reading
// each into set: it returns the offset of the set that holds it and the way
// (slotValid; set then holds that set), else slotCorrupt (counted) when a
// slot naming h failed its check twice, else slotEmpty.
func (d *Disk) find(set []byte, h kv.BlockHash) (int64, int, slotState) {
	a, b := d.geo.sets(h)
	st := slotEmpty
	for i, s := range [2]int64{a, b} {
		if i == 1 && b == a {
			break
		}
		off := d.geo.setOff(s)
		w, sst := d.lookup(set, off, h)
		if sst == slotCorrupt {
			// Readers take no lock, so a writer may have been mid-way
			// through the slot: a second read tells that from damage.
			w, sst = d.lookup(set, off, h)
		}
		switch sst {
		case slotValid:
			return off, w, slotValid
		case slotCorrupt:
			st = slotCorrupt
		}
	}
	if st == slotCorrupt {
		d.corrupt.Add(1)
	}
	return -1, -1, st
}

// lookup reads the set at off into set and returns the way holding block
// h's valid record (slotValid), else slotCorrupt when a slot names h but
// fails its check, else slotEmpty. A set that cannot be read is a miss.
func (d *Disk) lookup(set []byte, off int64, h kv.BlockHash) (int, slotState) {
	if _, err := readFull(d.f, set, off); err != nil {
		return -1, slotEmpty
	}
	st := slotEmpty
	for w := 0; w < len(set); w += slotSize {
		rec := (*[recSize]byte)(set[w : w+recSize])
		// The hash field first: a set holds 16 records, one of them h's.
		if kv.BlockHash(binary.LittleEndian.Uint64(rec[16:24])) != h || isZero(rec[:]) {
			continue
		}
		if checkRecord(rec, d.want.nsHash, h, d.opts.BlockBytes) == "" {
			return w / slotSize, slotValid
		}
		st = slotCorrupt
	}
	return -1, st
}

// Put implements L2: it writes the records missing from the store and makes
// every named record recent, hashes[0] most of all; a block whose two sets
// are full replaces their least recently used record. When one call names
// more blocks of a pair of sets than they have ways, the chain's tail is
// what gets evicted. A disk error stops the call with an error wrapping ErrDiskWrite;
// the records written before it stay.
func (d *Disk) Put(ctx context.Context, hashes []kv.BlockHash) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if len(hashes) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return ErrClosed
	}
	if err := flock(d.f); err != nil {
		d.writeErrors.Add(uint64(len(hashes)))
		return fmt.Errorf("%w: %w", ErrDiskWrite, err)
	}
	defer d.unlock()
	hdr, ok := readHeader(d.f, d.want)
	if !ok {
		var err error
		if hdr, err = d.reset(); err != nil {
			d.writeErrors.Add(uint64(len(hashes)))
			return fmt.Errorf("%w: %s: %w", ErrDiskWrite, d.path, err)
		}
	}
	now := d.clk.Now().UnixNano()
	var err error
	truncated := false
	// Back to front, so the head of the chain ends the most recent.
	for i := len(hashes) - 1; i >= 0; i-- {
		r := d.putOne(hashes[i], now-int64(i))
		hdr.blocks += r.added
		hdr.evictions += r.evicted
		truncated = truncated || r.short
		if r.err != nil {
			err = r.err
			d.writeErrors.Add(uint64(i + 1))
			break
		}
	}
	if truncated {
		if rerr := d.regrow(&hdr); rerr != nil && err == nil {
			err = fmt.Errorf("%w: %s: %w", ErrDiskWrite, d.path, rerr)
		}
	}
	hdr.blocks = min(max(hdr.blocks, 0), d.geo.blocks())
	if herr := d.writeHeader(hdr); herr != nil && err == nil {
		err = fmt.Errorf("%w: %s: header: %w", ErrDiskWrite, d.path, herr)
	}
	d.seenBlocks.Store(hdr.blocks)
	return err
}

// putResult is what putOne changed: slots newly occupied, valid records
// overwritten, whether the set lay (partly) past the end of the file.
type putResult struct {
	added, evicted int64
	short          bool
	err            error
}

// putOne makes block h's record present with stamp at (or refreshes its
// stamp). It reads both of h's sets; a new record goes into a corrupt slot
// of either, else an empty slot of the emptier set, else over the older of
// the two sets' least recently used records. Caller holds mu and the lock.
func (d *Disk) putOne(h kv.BlockHash, at int64) putResult {
	sa, sb := d.geo.sets(h)
	sets := [2]struct {
		off  int64
		buf  []byte
		free int
	}{{off: d.geo.setOff(sa), buf: d.putBuf.set[:d.geo.setSize()]}, {off: d.geo.setOff(sb), buf: d.putBuf.set2[:d.geo.setSize()]}}
	n := 2
	if sb == sa {
		n = 1
	}
	short := false
	type pick struct {
		set, way int
		at       int64
	}
	empty, corrupt, oldest := pick{set: -1}, pick{set: -1}, pick{set: -1}
	for i := range n {
		s := &sets[i]
		sh, err := readFull(d.f, s.buf, s.off)
		if err != nil {
			return putResult{err: fmt.Errorf("%w: %s: read: %w", ErrDiskWrite, d.path, err)}
		}
		short = short || sh
		firstEmpty := -1
		for w := 0; w < int(d.geo.ways); w++ {
			slot := s.buf[w*slotSize : (w+1)*slotSize]
			bh, st := classifySlot(slot, d.want.nsHash, d.opts.BlockBytes)
			switch {
			case st == slotValid && bh == h:
				if at-slotStamp(slot) >= touchEvery {
					stamp := d.putBuf.slot[:8]
					putStamp(stamp, at)
					// Advisory, as a hit's stamp: a failure leaves the record older.
					_, _ = d.f.WriteAt(stamp, s.off+int64(w)*slotSize+stampOff)
				}
				return putResult{short: short}
			case st == slotValid:
				if oldest.set < 0 || slotStamp(slot) < oldest.at {
					oldest = pick{i, w, slotStamp(slot)}
				}
			case st == slotEmpty:
				s.free++
				if firstEmpty < 0 {
					firstEmpty = w
				}
			case st == slotCorrupt && corrupt.set < 0:
				corrupt = pick{set: i, way: w}
			}
		}
		if firstEmpty >= 0 && (empty.set < 0 || s.free > sets[empty.set].free) {
			empty = pick{set: i, way: firstEmpty}
		}
	}
	// A corrupt slot is reused first: it holds nothing, yet it is counted
	// as occupied and ends the prefix of a reader that finds it.
	victim, was := corrupt, slotCorrupt
	switch {
	case victim.set >= 0:
	case empty.set >= 0:
		victim, was = empty, slotEmpty
	default:
		victim, was = oldest, slotValid
	}
	slot := &d.putBuf.slot
	encodeRecord((*[recSize]byte)(slot[:recSize]), d.want.nsHash, h, d.opts.BlockBytes)
	putStamp(slot[stampOff:], at)
	clear(slot[stampOff+8:])
	slotOff := sets[victim.set].off + int64(victim.way)*slotSize
	if err := d.write(d.f, slot[:], slotOff); err != nil {
		r := putResult{short: short, err: fmt.Errorf("%w: %s: %w", ErrDiskWrite, d.path, err)}
		// The count follows what the failed write left: part of a record
		// in an empty slot occupies it (as a corrupt slot).
		if _, rerr := readFull(d.f, slot[:], slotOff); rerr == nil && was == slotEmpty && !isZero(slot[:recSize]) {
			r.added = 1
		}
		return r
	}
	switch was {
	case slotEmpty:
		return putResult{added: 1, short: short}
	case slotValid:
		d.evictions.Add(1)
		return putResult{evicted: 1, short: short}
	}
	return putResult{short: short}
}

// reset empties the file and writes a fresh header: every record is gone.
// Caller holds the lock (and mu, or is OpenDisk).
func (d *Disk) reset() (diskHeader, error) {
	h := d.want
	if err := d.f.Truncate(0); err != nil {
		return h, err
	}
	if err := d.writeHeader(h); err != nil {
		return h, err
	}
	return h, d.f.Truncate(d.geo.fileSize())
}

// regrow extends a file truncated below its size (the lost slots read as
// empty) and counts its occupied slots again into h. Caller holds the lock.
func (d *Disk) regrow(h *diskHeader) error {
	fi, err := d.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < d.geo.fileSize() {
		if err := d.f.Truncate(d.geo.fileSize()); err != nil {
			return err
		}
	}
	buf := make([]byte, 64<<10)
	var n int64
	for off, end := int64(headerSize), d.geo.fileSize(); off < end; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), end-off)]
		if _, err := readFull(d.f, b, off); err != nil {
			return err
		}
		for s := 0; s < len(b); s += slotSize {
			if !isZero(b[s : s+recSize]) {
				n++
			}
		}
	}
	h.blocks = n
	return nil
}

// writeHeader writes h. The header's page is allocated when the file is
// created, so, unlike a slot, it does not go through d.write (a full disk
// cannot refuse it).
func (d *Disk) writeHeader(h diskHeader) error {
	b := h.encode()
	_, err := d.f.WriteAt(b[:], 0)
	return err
}

// unlock releases the lock; a failure cannot be acted on, and closing the
// file releases it anyway.
func (d *Disk) unlock() { _ = funlock(d.f) }

// Stats returns the store's counters.
func (d *Disk) Stats() DiskStats {
	// Read without the lock: a torn read fails its checksum and the last
	// count this Disk saw stands in.
	blocks := d.seenBlocks.Load()
	if !d.closed.Load() {
		if h, ok := readHeader(d.f, d.want); ok {
			blocks = h.blocks
			d.seenBlocks.Store(blocks)
		}
	}
	return DiskStats{
		Blocks:        int(blocks),
		Bytes:         blocks * d.opts.BlockBytes,
		CapacityBytes: d.geo.blocks() * d.opts.BlockBytes,
		Hits:          d.hits.Load(),
		Misses:        d.misses.Load(),
		Corrupt:       d.corrupt.Load(),
		WriteErrors:   d.writeErrors.Load(),
		Evictions:     d.evictions.Load(),
	}
}

// Close implements L2; later calls fail with ErrClosed. The records stay.
func (d *Disk) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Swap(true) {
		return nil
	}
	return d.f.Close()
}
