package tier

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/cespare/xxhash/v2"

	"github.com/capstan-dev/capstan/internal/kv"
)

// A block record is fixed-size, little-endian, the first 52 bytes of a slot
// of the namespace's slot file (disk_slots.go):
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
// The payload stands in for the block's KV tensors: a record copied into
// another slot file, or left over from another block, fails the comparison
// even when its checksum is intact, so a hit is never someone else's tokens.
const (
	recMagic   = "CKVB"
	recVersion = 1
	recSize    = 52
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// diskNamespaceHash names a namespace on disk; arbitrary model ids become 16
// hex digits, so no namespace can reach outside the store directory.
func diskNamespaceHash(ns string) uint64 {
	return xxhash.Sum64String("capstan-tieredstorage:" + ns)
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

// Reasons a record is corrupt (for tests and debugging).
const (
	badChecksum  = "checksum"
	badMagic     = "magic"
	badVersion   = "version"
	badNamespace = "namespace"
	badHash      = "hash"
	badSize      = "block size"
	badPayload   = "payload"
)

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
