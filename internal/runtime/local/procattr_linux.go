//go:build linux

package local

import "syscall"

// sysProcAttr puts the replica in its own process group (so a stop signals
// the whole tree) and has the kernel SIGKILL it if capstan dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
