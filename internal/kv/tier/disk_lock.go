package tier

import (
	"fmt"
	"os"
	"syscall"

	"github.com/capstan-dev/capstan/internal/fslock"
)

// flock takes an exclusive lock on f, blocking until it is free. flock locks
// belong to the open file description, so two Disks in one process (each with
// its own open of the slot file) exclude each other as two processes do, and
// the kernel drops the lock of a process that dies holding it. Goroutines
// sharing one Disk share its description: Disk.mu orders them.
func flock(f *os.File) error {
	if err := fslock.Flock(f, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("tier: tieredstorage lock: %w", err)
	}
	return nil
}

func funlock(f *os.File) error {
	if err := fslock.Flock(f, syscall.LOCK_UN); err != nil {
		return fmt.Errorf("tier: tieredstorage lock: %w", err)
	}
	return nil
}
