package tier

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/capstan-dev/capstan/internal/kv"
)

// A block record is one small file, fixed-size, little-endian:
//
//	off len field
//	  0   4 magic "CKVB"
//	  4   2 version (1)
//	  6   2 reserved (0)
//	  8   8 namespace hash (diskNamespaceHash)
//	 16   8 block hash
//	 24   8 block bytes (the simulated size capacity counts)
//	 32  16 payload: derived from the two hashes (recordPayload)
//	 48   4 CRC32C (Castagnoli) of bytes 0..47
//
// The payload stands in for the block's KV tensors: a record put under the
// wrong file name, or left over from another block, fails the comparison even
// when its checksum is intact, so a hit is never someone else's tokens.
const (
	recMagic   = "CKVB"
	recVersion = 1
	recSize    = 52
	recSuffix  = ".kvb"
	// tempPrefix starts the temporary file a record is written to before it
	// is renamed into place.
	tempPrefix = ".kvb-"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// diskNamespaceHash names a namespace on disk; arbitrary model ids become 16
// hex digits, so no namespace can reach outside the store directory.
func diskNamespaceHash(ns string) uint64 {
	return xxhash.Sum64String("capstan-tieredstorage:" + ns)
}

// spaceDirName is a namespace's directory: its hash and its block size, so a
// scan learns every record's weight from the path alone.
func spaceDirName(nsHash uint64, blockBytes int64) string {
	return hex16(nsHash) + "-" + strconv.FormatInt(blockBytes, 10)
}

// parseSpaceDirName is spaceDirName's inverse; ok is false for any other name.
func parseSpaceDirName(name string) (weight int64, ok bool) {
	if len(name) < 18 || name[16] != '-' || !isHex(name[:16]) {
		return 0, false
	}
	digits := name[17:]
	if digits[0] == '0' {
		return 0, false
	}
	w, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || w <= 0 {
		return 0, false
	}
	return w, true
}

// parseRecordName returns the block hash of a record file name
// "<16 hex>.kvb" in the subdirectory named by its first two digits.
func parseRecordName(sub, name string) (kv.BlockHash, bool) {
	if len(name) != 16+len(recSuffix) || name[16:] != recSuffix || name[:2] != sub || !isHex(name[:16]) {
		return 0, false
	}
	v, err := strconv.ParseUint(name[:16], 16, 64)
	if err != nil {
		return 0, false
	}
	return kv.BlockHash(v), true
}

const hexDigits = "0123456789abcdef"

func hex16(v uint64) string {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// recordPath is the file of block h in the namespace directory spaceDir:
// spaceDir/<first 2 hex>/<16 hex>.kvb (256 subdirectories keep directories
// small at a few hundred thousand records).
func recordPath(spaceDir string, h kv.BlockHash) string {
	x := hex16(uint64(h))
	return spaceDir + string(os.PathSeparator) + x[:2] + string(os.PathSeparator) + x + recSuffix
}

// splitmix64 is a cheap, well-mixed bijection on uint64.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// recordPayload is the deterministic stand-in for block h's tensors.
func recordPayload(nsHash uint64, h kv.BlockHash) (uint64, uint64) {
	a := splitmix64(nsHash ^ uint64(h))
	return a, splitmix64(a)
}

// encodeRecord fills b with block h's record.
func encodeRecord(b *[recSize]byte, nsHash uint64, h kv.BlockHash, blockBytes int64) {
	copy(b[0:4], recMagic)
	binary.LittleEndian.PutUint16(b[4:6], recVersion)
	binary.LittleEndian.PutUint16(b[6:8], 0)
	binary.LittleEndian.PutUint64(b[8:16], nsHash)
	binary.LittleEndian.PutUint64(b[16:24], uint64(h))
	binary.LittleEndian.PutUint64(b[24:32], uint64(blockBytes))
	p0, p1 := recordPayload(nsHash, h)
	binary.LittleEndian.PutUint64(b[32:40], p0)
	binary.LittleEndian.PutUint64(b[40:48], p1)
	binary.LittleEndian.PutUint32(b[48:52], crc32.Checksum(b[:48], castagnoli))
}

// recState is what reading a record found.
type recState uint8

const (
	recOK      recState = iota
	recMissing          // no file
	recCorrupt          // a file that is not block h's record
	recIOError          // the file could not be read
)

// Reasons a record is corrupt (for tests and debugging).
const (
	badShort     = "short"
	badLong      = "long"
	badChecksum  = "checksum"
	badMagic     = "magic"
	badVersion   = "version"
	badNamespace = "namespace"
	badHash      = "hash"
	badSize      = "block size"
	badPayload   = "payload"
)

// readRecord reads the file at path and checks it is block h's record in
// namespace nsHash with size blockBytes; a valid record gets modification
// time touchAt (unless 0) through the open descriptor. For recCorrupt,
// reason says why; for recIOError, it is the error's text. It uses raw
// system calls: os.Open's poller registration would double the calls on
// this hot path.
func readRecord(path string, nsHash uint64, h kv.BlockHash, blockBytes int64, touchAt int64) (st recState, reason string) {
	fd, err := retryEINTR(func() (int, error) { return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		// ENOTDIR: a path component is not a directory, so no record.
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			return recMissing, ""
		}
		return recIOError, err.Error()
	}
	defer syscall.Close(fd)
	// One byte more than a record, to tell an exact record from a longer file.
	var buf [recSize + 1]byte
	n := 0
	for n < len(buf) {
		m, err := retryEINTR(func() (int, error) { return syscall.Read(fd, buf[n:]) })
		if err != nil {
			return recIOError, err.Error()
		}
		n += m
		// A short read of a regular file is its end (records are renamed
		// into place whole, never appended to): no second call to see 0.
		if m == 0 || n < len(buf) {
			break
		}
	}
	switch {
	case n > recSize:
		return recCorrupt, badLong
	case n < recSize:
		return recCorrupt, badShort
	}
	if why := checkRecord((*[recSize]byte)(buf[:recSize]), nsHash, h, blockBytes); why != "" {
		return recCorrupt, why
	}
	if touchAt != 0 {
		// Recency is advisory: a failure leaves the record older, no worse.
		_ = futimens(fd, touchAt)
	}
	return recOK, ""
}

// futimens sets an open file's access and modification times to mt (Unix
// nanoseconds): utimensat(fd, NULL, …), which the syscall package only
// offers by path (one more path walk per record).
func futimens(fd int, mt int64) error {
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(mt), syscall.NsecToTimespec(mt)}
	_, _, errno := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// retryEINTR repeats a system call interrupted by a signal.
func retryEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// checkRecord returns "" when b is block h's record, else why not.
func checkRecord(b *[recSize]byte, nsHash uint64, h kv.BlockHash, blockBytes int64) string {
	le := binary.LittleEndian
	switch {
	case crc32.Checksum(b[:48], castagnoli) != le.Uint32(b[48:52]):
		return badChecksum
	case string(b[0:4]) != recMagic:
		return badMagic
	case le.Uint16(b[4:6]) != recVersion:
		return badVersion
	case le.Uint64(b[8:16]) != nsHash:
		return badNamespace
	case le.Uint64(b[16:24]) != uint64(h):
		return badHash
	case le.Uint64(b[24:32]) != uint64(blockBytes):
		return badSize
	}
	p0, p1 := recordPayload(nsHash, h)
	if le.Uint64(b[32:40]) != p0 || le.Uint64(b[40:48]) != p1 {
		return badPayload
	}
	return ""
}

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
