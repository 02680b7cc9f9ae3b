package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"syscall"
)

// lockFileName is the store's lock file. Every process that changes the store
// holds an exclusive flock(2) on it, and its content is the usage record: the
// bytes and records the whole store holds, across namespaces and processes.
//
//	off len field
//	  0   4 magic "CKVU"
//	  4   2 version (1)
//	  6   2 reserved
//	  8   8 bytes (sum of the records' block bytes)
//	 16   8 records
//	 24   4 CRC32C of bytes 0..23
//
// A missing, short or failed-checksum usage record (a first open, a crash in
// mid-write) makes the next change rescan the directory and rewrite it.
const (
	lockFileName = "tieredstorage.lock"
	usageMagic   = "CKVU"
	usageSize    = 28
)

// diskUsage is what the store holds.
type diskUsage struct {
	bytes, blocks int64
}

func encodeUsage(u diskUsage) [usageSize]byte {
	var b [usageSize]byte
	copy(b[0:4], usageMagic)
	binary.LittleEndian.PutUint16(b[4:6], 1)
	binary.LittleEndian.PutUint64(b[8:16], uint64(u.bytes))
	binary.LittleEndian.PutUint64(b[16:24], uint64(u.blocks))
	binary.LittleEndian.PutUint32(b[24:28], crc32.Checksum(b[:24], castagnoli))
	return b
}

// readUsage reads the usage record; ok is false when it is absent or torn.
func readUsage(f *os.File) (diskUsage, bool) {
	var b [usageSize]byte
	// ReadAt may report io.EOF with a full read; only the count matters.
	if n, _ := f.ReadAt(b[:], 0); n != usageSize {
		return diskUsage{}, false
	}
	le := binary.LittleEndian
	if string(b[0:4]) != usageMagic || le.Uint16(b[4:6]) != 1 ||
		crc32.Checksum(b[:24], castagnoli) != le.Uint32(b[24:28]) {
		return diskUsage{}, false
	}
	u := diskUsage{bytes: int64(le.Uint64(b[8:16])), blocks: int64(le.Uint64(b[16:24]))}
	if u.bytes < 0 || u.blocks < 0 {
		return diskUsage{}, false
	}
	return u, true
}

func writeUsage(f *os.File, u diskUsage) error {
	b := encodeUsage(u)
	if _, err := f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("tier: tieredstorage usage record: %w", err)
	}
	return nil
}

// flock takes an exclusive lock on f, blocking until it is free. flock locks
// belong to the open file description, so two Disks in one process (each with
// its own open of the lock file) exclude each other as two processes do, and
// the kernel drops the lock of a process that dies holding it.
func flock(f *os.File) error {
	return flockOp(f, syscall.LOCK_EX)
}

func funlock(f *os.File) error {
	return flockOp(f, syscall.LOCK_UN)
}

func flockOp(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			opErr = syscall.Flock(int(fd), how)
			if !errors.Is(opErr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if opErr != nil {
		return fmt.Errorf("tier: tieredstorage lock: %w", opErr)
	}
	return nil
}
