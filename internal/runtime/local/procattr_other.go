//go:build !linux && unix

package local

import "syscall"

// sysProcAttr puts the replica in its own process group; Pdeathsig is
// Linux-only, so elsewhere only Stop/Close reap replicas.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
