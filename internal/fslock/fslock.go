// Package fslock is flock(2) on an open file, for the on-disk stores that
// share a directory between processes (the KV tier's slot file, the model
// cache). flock locks belong to the open file description, so two opens in
// one process exclude each other as two processes do, and the kernel drops
// the lock of a process that dies holding it.
package fslock

import (
	"errors"
	"os"
	"syscall"
)

// Flock applies the flock(2) operation how (syscall.LOCK_EX, LOCK_SH,
// LOCK_UN, optionally with LOCK_NB) to f, retrying when a signal interrupts
// it. A LOCK_NB that finds the lock held fails with syscall.EWOULDBLOCK.
func Flock(f *os.File, how int) error {
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
	return opErr
}
