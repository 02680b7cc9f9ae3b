//go:build linux

package spaces

import "syscall"

// sysProcAttr puts a space in its own process group (a stop signals the
// whole tree) and has the kernel SIGKILL it if capstan dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
