package tier

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strconv"

	"github.com/capstan-dev/capstan/internal/kv"
)

// A namespace's slot file, <ns hash, 16 hex>-<BlockBytes>-<capacity in
// blocks>.kvs, is a header followed by nsets sets of ways slots:
//
//	offset                      size
//	0                           4 KiB header (diskHeader; the rest zero)
//	4 KiB + s×ways×64           set s: ways slots of 64 bytes
//
// A slot is a block record (disk_record.go, 52 bytes), then its recency
// stamp (8 bytes, UnixNano, little-endian) and 4 reserved bytes. The stamp
// is outside the record's checksum: recency is advisory, and a torn stamp
// only changes which record a full set evicts. A slot whose record bytes are
// all zero is empty; one that is not empty and fails checkRecord is corrupt.
// Block h lives in any way of one of its two sets (diskGeometry.sets).
//
// The file is created at full size and sparse: only the sets written take
// disk space.
const (
	slotSize   = 64
	stampOff   = recSize // the stamp's offset in a slot
	setWays    = 16      // a set is 1 KiB: one read
	headerSize = 4096    // the sets start page-aligned
	maxSetSize = setWays * slotSize
	slotSuffix = ".kvs"
)

// diskGeometry is a slot file's shape: nsets sets of ways slots.
type diskGeometry struct {
	ways, nsets int64
}

// newDiskGeometry fits sets of setWays slots in at most slots slots; fewer
// slots than setWays make one set of that many ways. The capacity rounds
// down to whole sets.
func newDiskGeometry(slots int64) diskGeometry {
	if slots < setWays {
		return diskGeometry{ways: slots, nsets: 1}
	}
	return diskGeometry{ways: setWays, nsets: slots / setWays}
}

func (g diskGeometry) blocks() int64   { return g.ways * g.nsets }
func (g diskGeometry) setSize() int64  { return g.ways * slotSize }
func (g diskGeometry) fileSize() int64 { return headerSize + g.blocks()*slotSize }

// sets are the two sets block h may live in (the same one twice when the
// file has one set). Two independent choices, the emptier one taken on
// write ("the power of two choices"), keep sets from overflowing long before
// the file is full: with one choice a file 77 % full already overflows about
// one set in ten, and a prompt's chain of hundreds of blocks almost surely
// loses one of them, which ends every later prefix match there.
func (g diskGeometry) sets(h kv.BlockHash) (a, b int64) {
	n := uint64(g.nsets)
	a = int64(uint64(h) % n)
	if n == 1 {
		return a, a
	}
	// A second hash of h (a 64-bit finaliser) picks b among the other sets.
	x := uint64(h) ^ 0x9e3779b97f4a7c15
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	b = (a + 1 + int64(x%(n-1))) % int64(n)
	return a, b
}

// setOff is set s's offset in the file.
func (g diskGeometry) setOff(s int64) int64 { return headerSize + s*g.setSize() }

// slotFileName is a namespace's slot file: its hash, its block size and its
// capacity in blocks, so processes that disagree on either never share (and
// misread) a file.
func slotFileName(nsHash uint64, blockBytes int64, g diskGeometry) string {
	return hex16(nsHash) + "-" + strconv.FormatInt(blockBytes, 10) + "-" + strconv.FormatInt(g.blocks(), 10) + slotSuffix
}

// The header, little-endian:
//
//	off len field
//	  0   4 magic "CKVS"
//	  4   2 version (1)
//	  6   2 ways
//	  8   8 sets
//	 16   8 block bytes
//	 24   8 namespace hash
//	 32   8 blocks: occupied slots (valid records, and corrupt ones until reused)
//	 40   8 evictions: valid records overwritten, by every writer
//	 48   4 CRC32C of bytes 0..47
//
// Writers update the counts under the lock; readers of the header (Stats)
// take no lock, and a read torn by a writer fails the checksum.
const (
	hdrMagic   = "CKVS"
	hdrVersion = 2 // 2: two candidate sets per block (a version-1 file is reset)
	hdrLen     = 52
)

// diskHeader is a slot file's header.
type diskHeader struct {
	geo        diskGeometry
	blockBytes int64
	nsHash     uint64
	blocks     int64
	evictions  int64
}

func (h diskHeader) encode() [hdrLen]byte {
	var b [hdrLen]byte
	le := binary.LittleEndian
	copy(b[0:4], hdrMagic)
	le.PutUint16(b[4:6], hdrVersion)
	le.PutUint16(b[6:8], uint16(h.geo.ways))
	le.PutUint64(b[8:16], uint64(h.geo.nsets))
	le.PutUint64(b[16:24], uint64(h.blockBytes))
	le.PutUint64(b[24:32], h.nsHash)
	le.PutUint64(b[32:40], uint64(h.blocks))
	le.PutUint64(b[40:48], uint64(h.evictions))
	le.PutUint32(b[48:52], crc32Castagnoli(b[:48]))
	return b
}

// decodeHeader returns the header in b; ok is false when b is short, fails
// its checksum, or describes another file than want (geometry, block size,
// namespace).
func decodeHeader(b []byte, want diskHeader) (h diskHeader, ok bool) {
	if len(b) < hdrLen {
		return diskHeader{}, false
	}
	le := binary.LittleEndian
	if string(b[0:4]) != hdrMagic || le.Uint16(b[4:6]) != hdrVersion || crc32Castagnoli(b[:48]) != le.Uint32(b[48:52]) {
		return diskHeader{}, false
	}
	h = diskHeader{
		geo:        diskGeometry{ways: int64(le.Uint16(b[6:8])), nsets: int64(le.Uint64(b[8:16]))},
		blockBytes: int64(le.Uint64(b[16:24])),
		nsHash:     le.Uint64(b[24:32]),
		blocks:     int64(le.Uint64(b[32:40])),
		evictions:  int64(le.Uint64(b[40:48])),
	}
	if h.geo != want.geo || h.blockBytes != want.blockBytes || h.nsHash != want.nsHash ||
		h.blocks < 0 || h.blocks > h.geo.blocks() || h.evictions < 0 {
		return diskHeader{}, false
	}
	return h, true
}

// readHeader reads f's header; ok is false when it is missing, torn or
// damaged.
func readHeader(f *os.File, want diskHeader) (diskHeader, bool) {
	var b [hdrLen]byte
	n, _ := f.ReadAt(b[:], 0)
	return decodeHeader(b[:n], want)
}

// slotState is what a slot holds.
type slotState uint8

const (
	slotEmpty   slotState = iota
	slotValid             // a valid record of this file's namespace and block size
	slotCorrupt           // anything else
)

// classifySlot says what slot (slotSize bytes) holds and, when valid, whose
// record it is.
func classifySlot(slot []byte, nsHash uint64, blockBytes int64) (kv.BlockHash, slotState) {
	rec := (*[recSize]byte)(slot[:recSize])
	if isZero(rec[:]) {
		return 0, slotEmpty
	}
	h := kv.BlockHash(binary.LittleEndian.Uint64(rec[16:24]))
	if checkRecord(rec, nsHash, h, blockBytes) != "" {
		return 0, slotCorrupt
	}
	return h, slotValid
}

// slotStamp is a slot's recency stamp.
func slotStamp(slot []byte) int64 {
	return int64(binary.LittleEndian.Uint64(slot[stampOff : stampOff+8]))
}

func putStamp(b []byte, at int64) { binary.LittleEndian.PutUint64(b, uint64(at)) }

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readFull reads len(b) bytes at off. What lies past the end of the file (a
// truncated file) reads as zeros, i.e. empty slots; short reports it.
func readFull(f *os.File, b []byte, off int64) (short bool, err error) {
	n, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		clear(b[n:])
		return true, nil
	}
	return false, err
}

// writeAt is Disk.write's default: pwrite all of b at off.
func writeAt(f *os.File, b []byte, off int64) error {
	_, err := f.WriteAt(b, off)
	return err
}
