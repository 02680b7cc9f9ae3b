//go:build !linux

package spaces

import "syscall"

// sysProcAttr: Pdeathsig is Linux-only, so elsewhere only Stop and the
// next start's sweep reap spaces.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
