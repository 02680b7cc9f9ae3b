package tier

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// flock takes an exclusive lock on f, blocking until it is free. flock locks
// belong to the open file description, so two Disks in one process (each with
// its own open of the slot file) exclude each other as two processes do, and
// the kernel drops the lock of a process that dies holding it. Goroutines
// sharing one Disk share its description: Disk.mu orders them.
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
