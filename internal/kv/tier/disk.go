package tier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
)

// DiskOptions configure a tieredstorage store: one per node, in a directory
// every replica on the node opens.
type DiskOptions struct {
	// Dir is the node's store directory (created if missing).
	Dir string
	// CapacityBytes bounds the blocks held, counted at BlockBytes each. The
	// budget is the whole store's: every namespace and every process that
	// opens Dir shares it.
	CapacityBytes int64
	// BlockBytes is one KV block's simulated size: what capacity counts and
	// what the engine charges load time for. The files hold a small
	// checksummed record per block (52 bytes), not tensors.
	BlockBytes int64
	// Namespace keeps models apart (the engine passes its model id).
	Namespace string
	// Clock stamps recency (records' modification times); nil is the wall
	// clock. Every process sharing Dir must use the same one.
	Clock clock.Clock
}

// Limits OpenDisk enforces, so a typo cannot ask for an index of billions of
// entries.
const (
	// MaxDiskCapacityBytes is the largest store (1 PiB).
	MaxDiskCapacityBytes = 1 << 50
	// MaxDiskBlocks is the most blocks (CapacityBytes/BlockBytes) a store
	// may hold; a process's index costs about 64 bytes per block.
	MaxDiskBlocks = 1 << 21
)

// ErrDiskWrite is wrapped by every error of Put that comes from the disk (full,
// I/O error, unwritable directory): the blocks it names are simply not stored.
var ErrDiskWrite = errors.New("tier: tieredstorage write failed")

// DiskStats is a store's state as this process sees it. Blocks, Bytes and
// CapacityBytes describe the whole store (every namespace and process);
// the counters count this Disk's own operations.
type DiskStats struct {
	Blocks        int
	Bytes         int64 // sum of the records' BlockBytes
	CapacityBytes int64
	Hits, Misses  uint64 // blocks asked of MatchPrefix and found / not returned
	Corrupt       uint64 // records that failed their checksum or were short: misses, removed
	WriteErrors   uint64 // records not written (disk full, I/O error)
	Evictions     uint64 // records removed to stay within CapacityBytes
}

// Disk is the tieredstorage tier: a bounded, checksummed LRU store of KV
// block records on local disk, shared by the replicas (processes) of one
// node. It implements L2's contract: an error is a miss, never a failure.
//
// Layout under Dir:
//
//	tieredstorage.lock                      flock target; holds the usage record
//	<ns hash, 16 hex>-<BlockBytes>/         one directory per namespace and block size
//	    <2 hex>/<block hash, 16 hex>.kvb    one record per block (see disk_record.go)
//
// Reads take no lock: records are written to a temporary file and renamed
// into place, so a reader sees a whole record or none, and a record that is
// not exactly block h's (truncated, overwritten, misplaced) is a miss that is
// removed. A hit sets the record's modification time, which is the recency
// every process evicts by. A record this Disk has read whole is remembered
// by its file's identity (inode, size, modification time): while a stat
// finds the same, a hit costs that stat (and a touch at most once a second)
// instead of a read; any change to the file — rewritten, truncated, written
// to, touched by another process — makes it read and checked again.
//
// Every change (Put, and removing a corrupt record) runs under an exclusive
// flock on the lock file, which keeps the usage record exact: a Put reads it,
// evicts least recently used records until its blocks fit, writes them, and
// writes it back. Each process keeps an index of the records (a heap by
// modification time) that it rebuilds by rescanning the directory when it
// opens, when the usage record is unreadable, and when the oldest record it
// knows is no older than its last scan (records other processes wrote since
// then are missing from its index and may be older), so eviction is LRU over
// the whole store and a rescan costs O(records) about once per turnover of
// the store. Records are not fsynced: after a power loss the checksum turns
// what the crash left into misses.
//
// Known slack, all on the side of a miss: a hit that races another
// process's eviction of the same record still counts (the record was whole
// when read); record files deleted by hand leave the usage record high, so
// the store holds less than its budget until the next rescan; and every
// process opening Dir should pass the same CapacityBytes, since each evicts
// to its own. Put waits for the lock without watching its context; the lock
// is held for one Put's few small writes, or for a rescan.
//
// Safe for concurrent use by goroutines and by processes.
type Disk struct {
	dir    string
	opts   DiskOptions
	clk    clock.Clock
	nsHash uint64
	own    diskSpace // spaces[0]
	lockf  *os.File

	// mu serialises this Disk's changes; the flock serialises processes'.
	mu         sync.Mutex
	closed     atomic.Bool
	idx        diskIndex
	spaces     []diskSpace
	spaceIDs   map[string]uint32
	usage      diskUsage
	usageStale bool  // the usage record could not be written: rescan
	lastScan   int64 // UnixNano of the last scan
	complete   bool  // the index lists every record (scanned under the lock now held)

	hits, misses, corrupt, writeErrors, evictions atomic.Uint64
	seenBlocks, seenBytes                         atomic.Int64

	// write writes a record's bytes to its temporary file (a raw file
	// descriptor); tests replace it to fail like a full disk.
	write func(fd int, b []byte) error

	// verified holds the file identity of records this Disk read whole and
	// valid, so that a later hit costs a stat (and, at most once per
	// touchEvery, a touch) instead of open, read and close: a record is
	// read again only when its file changed — another inode (rewritten),
	// another size (truncated), another modification time (written to or
	// touched elsewhere). Cleared when it reaches maxVerified entries.
	vmu      sync.Mutex
	verified map[kv.BlockHash]fileID
}

// fileID is what a stat tells of a record file.
type fileID struct {
	ino         uint64
	size, mtime int64
}

const (
	maxVerified = 1 << 16
	// touchEvery bounds how often a hit on an unchanged record is
	// stamped: recency finer than a second changes no eviction that
	// matters, and every touch is a system call.
	touchEvery = int64(time.Second)
)

// diskSpace is one namespace directory and the weight of its records.
type diskSpace struct {
	dir    string
	weight int64
}

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

// OpenDisk opens (creating) the store in o.Dir and indexes what it holds.
func OpenDisk(o DiskOptions) (*Disk, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dir := filepath.Clean(o.Dir)
	nsHash := diskNamespaceHash(o.Namespace)
	own := diskSpace{dir: filepath.Join(dir, spaceDirName(nsHash, o.BlockBytes)), weight: o.BlockBytes}
	if err := os.MkdirAll(own.dir, 0o755); err != nil {
		return nil, fmt.Errorf("tier: tieredstorage DiskOptions.Dir %s: %w", dir, err)
	}
	lockf, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tier: tieredstorage DiskOptions.Dir %s: %w", dir, err)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	d := &Disk{
		dir:      dir,
		opts:     o,
		clk:      clk,
		nsHash:   nsHash,
		own:      own,
		lockf:    lockf,
		idx:      newDiskIndex(),
		spaces:   []diskSpace{own},
		spaceIDs: map[string]uint32{filepath.Base(own.dir): 0},
		write:    writeAll,
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.lock(); err != nil {
		_ = lockf.Close()
		return nil, err
	}
	err = d.scan()
	d.unlock()
	if err != nil {
		_ = lockf.Close()
		return nil, err
	}
	return d, nil
}

// MatchPrefix implements L2: the number of leading hashes whose records are
// present and valid. A hit makes the record most recently used, hashes[0]
// most of all (a chain's tail is evicted before its head). A record that
// fails validation ends the prefix and is removed.
func (d *Disk) MatchPrefix(ctx context.Context, hashes []kv.BlockHash) (int, error) {
	if d.closed.Load() {
		return 0, ErrClosed
	}
	now := d.clk.Now().UnixNano()
	n := 0
	var err error
	for i, h := range hashes {
		if err = ctx.Err(); err != nil {
			break
		}
		p := recordPath(d.own.dir, h)
		// A hit is touched as it is read. Recency is advisory: a record
		// evicted since it was read was still whole when read, so the hit
		// stands.
		at := now - int64(i)
		var fi syscall.Stat_t
		if err := syscall.Stat(p, &fi); err != nil {
			break // missing (or unreadable): a miss either way
		}
		id := fileID{ino: fi.Ino, size: fi.Size, mtime: fi.Mtim.Nano()}
		if d.isVerified(h, id) {
			if at-id.mtime >= touchEvery && syscall.UtimesNano(p, []syscall.Timespec{syscall.NsecToTimespec(at), syscall.NsecToTimespec(at)}) == nil {
				id.mtime = at
				d.setVerified(h, id)
			}
			n++
			continue
		}
		st, _ := readRecord(p, d.nsHash, h, d.own.weight, at)
		if st == recOK {
			id.mtime = at
			d.setVerified(h, id)
			n++
			continue
		}
		if st == recCorrupt {
			d.corrupt.Add(1)
			d.dropCorrupt(p, h)
		}
		break
	}
	d.hits.Add(uint64(n))
	d.misses.Add(uint64(len(hashes) - n))
	return n, err
}

// Put implements L2: it writes the records missing from the store and makes
// every named record recent, hashes[0] most of all, evicting least recently
// used records to stay within CapacityBytes. When one call names more blocks
// than fit, the chain's tail is what gets evicted. A disk error stops the
// call with an error wrapping ErrDiskWrite; the records written before it
// stay.
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
	if err := d.lock(); err != nil {
		d.writeErrors.Add(uint64(len(hashes)))
		return fmt.Errorf("%w: %w", ErrDiskWrite, err)
	}
	defer d.unlock()
	if err := d.refreshUsage(); err != nil {
		d.writeErrors.Add(uint64(len(hashes)))
		return err
	}
	now := d.clk.Now().UnixNano()
	var err error
	// Back to front, so the head of the chain ends the most recent.
	for i := len(hashes) - 1; i >= 0; i-- {
		if err = d.putOne(hashes[i], now-int64(i)); err != nil {
			d.writeErrors.Add(uint64(i + 1))
			break
		}
	}
	if uerr := d.saveUsage(); uerr != nil && err == nil {
		err = uerr
	}
	return err
}

// Stats returns the store's counters.
func (d *Disk) Stats() DiskStats {
	// Read without the lock: a torn read fails its checksum and the last
	// usage this Disk saw stands in.
	u, ok := readUsage(d.lockf)
	if !ok {
		u = diskUsage{bytes: d.seenBytes.Load(), blocks: d.seenBlocks.Load()}
	}
	return DiskStats{
		Blocks:        int(u.blocks),
		Bytes:         u.bytes,
		CapacityBytes: d.opts.CapacityBytes,
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
	return d.lockf.Close()
}

// putOne makes block h's record present and recent (modification time mt).
// Caller holds mu and the lock.
func (d *Disk) putOne(h kv.BlockHash, mt int64) error {
	p := recordPath(d.own.dir, h)
	key := idxKey{space: 0, h: h}
	switch st, why := readRecord(p, d.nsHash, h, d.own.weight, mt); st {
	case recOK:
		d.idx.set(key, mt)
		return nil
	case recCorrupt:
		d.corrupt.Add(1)
		if err := d.removeRecord(p, key, d.own.weight); err != nil {
			return fmt.Errorf("%w: remove corrupt %s: %w", ErrDiskWrite, p, err)
		}
	case recIOError:
		return fmt.Errorf("%w: read %s: %s", ErrDiskWrite, p, why)
	}
	if err := d.makeRoom(d.own.weight); err != nil {
		return err
	}
	if err := d.writeRecord(p, h, mt); err != nil {
		return err
	}
	d.usage.bytes += d.own.weight
	d.usage.blocks++
	d.idx.set(key, mt)
	return nil
}

// makeRoom evicts least recently used records until w more bytes fit.
// Caller holds mu and the lock.
func (d *Disk) makeRoom(w int64) error {
	// Each turn removes an index entry, scans (once per lock), or moves an
	// entry forward to its file's newer time; refreshes are bounded only so
	// that records other processes keep touching cannot hold the loop forever.
	refreshes := 0
	for d.usage.bytes+w > d.opts.CapacityBytes {
		k, mt, ok := d.idx.oldest()
		// Records written since the last scan are missing from the index and
		// are no older than the scan: the oldest known record is the least
		// recently used one only when it predates the scan.
		if (!ok || mt >= d.lastScan) && !d.complete {
			if err := d.scan(); err != nil {
				return err
			}
			continue
		}
		if !ok || refreshes > d.idx.len()+64 {
			return fmt.Errorf("%w: no room: %d of %d bytes used, nothing evictable", ErrDiskWrite, d.usage.bytes, d.opts.CapacityBytes)
		}
		sp := d.spaces[k.space]
		p := recordPath(sp.dir, k.h)
		fi, err := os.Lstat(p)
		if err != nil {
			// Gone: another process evicted it and counted that.
			d.idx.remove(k)
			continue
		}
		if cur := fi.ModTime().UnixNano(); cur > mt {
			// A hit (here or elsewhere) made it recent since it was indexed.
			d.idx.set(k, cur)
			refreshes++
			continue
		}
		if err := syscall.Unlink(p); err == nil {
			d.usage.bytes -= sp.weight
			d.usage.blocks--
			d.evictions.Add(1)
		}
		d.idx.remove(k)
	}
	return nil
}

// writeRecord writes block h's record atomically: to a temporary file, then
// renamed over p. Writers hold the lock, so one temporary name per
// subdirectory suffices, and one left by a writer that died is reused.
func (d *Disk) writeRecord(p string, h kv.BlockHash, mt int64) error {
	var rec [recSize]byte
	encodeRecord(&rec, d.nsHash, h, d.own.weight)
	sub := filepath.Dir(p)
	tmp := sub + string(os.PathSeparator) + tempPrefix + "tmp"
	create := func() (int, error) {
		return retryEINTR(func() (int, error) {
			return syscall.Open(tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
		})
	}
	fd, err := create()
	if errors.Is(err, syscall.ENOENT) {
		if err = os.MkdirAll(sub, 0o755); err == nil {
			fd, err = create()
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDiskWrite, tmp, err)
	}
	err = d.write(fd, rec[:])
	if err == nil {
		err = futimens(fd, mt)
	}
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		// syscall.Rename: os.Rename would first stat the target.
		err = syscall.Rename(tmp, p)
	}
	if err != nil {
		_ = syscall.Unlink(tmp)
		return fmt.Errorf("%w: %s: %w", ErrDiskWrite, p, err)
	}
	return nil
}

// writeAll writes b to fd, the default Disk.write.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := retryEINTR(func() (int, error) { return syscall.Write(fd, b) })
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// removeRecord deletes a record and accounts for it. A record already gone
// was accounted for by whoever removed it. Caller holds mu and the lock.
func (d *Disk) removeRecord(p string, k idxKey, weight int64) error {
	err := syscall.Unlink(p)
	switch {
	case err == nil:
		d.usage.bytes -= weight
		d.usage.blocks--
	case errors.Is(err, syscall.ENOENT):
	default:
		return err
	}
	d.idx.remove(k)
	return nil
}

// dropCorrupt removes a record MatchPrefix found corrupt, unless a writer
// has replaced it since.
func (d *Disk) dropCorrupt(p string, h kv.BlockHash) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() || d.lock() != nil {
		return
	}
	defer d.unlock()
	if d.refreshUsage() != nil {
		return
	}
	if st, _ := readRecord(p, d.nsHash, h, d.own.weight, 0); st != recCorrupt {
		return
	}
	_ = d.removeRecord(p, idxKey{space: 0, h: h}, d.own.weight)
	_ = d.saveUsage()
}

// lock takes the store's lock. Caller holds mu.
func (d *Disk) lock() error { return flock(d.lockf) }

// unlock releases it; other processes may write again, so the index is no
// longer complete. Caller holds mu.
func (d *Disk) unlock() {
	d.complete = false
	_ = funlock(d.lockf)
}

// refreshUsage loads the usage record, rescanning when it is unusable.
// Caller holds mu and the lock.
func (d *Disk) refreshUsage() error {
	if u, ok := readUsage(d.lockf); ok && !d.usageStale {
		d.usage = u
		d.publishUsage()
		return nil
	}
	return d.scan()
}

// saveUsage writes the usage record. Caller holds mu and the lock.
func (d *Disk) saveUsage() error {
	d.publishUsage()
	if err := writeUsage(d.lockf, d.usage); err != nil {
		d.usageStale = true
		return fmt.Errorf("%w: %w", ErrDiskWrite, err)
	}
	d.usageStale = false
	return nil
}

func (d *Disk) publishUsage() {
	d.seenBytes.Store(d.usage.bytes)
	d.seenBlocks.Store(d.usage.blocks)
}

func (d *Disk) isVerified(h kv.BlockHash, id fileID) bool {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	v, ok := d.verified[h]
	return ok && v == id
}

func (d *Disk) setVerified(h kv.BlockHash, id fileID) {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	if d.verified == nil || len(d.verified) >= maxVerified {
		d.verified = make(map[kv.BlockHash]fileID)
	}
	d.verified[h] = id
}
