//go:build !linux

package spaces

import (
	"errors"
	"syscall"
)

// cgroupSet tracks nothing off Linux: the process group and the
// environment sweep are all there is.
type cgroupSet struct{}

func openCgroups(string) (*cgroupSet, error) {
	return &cgroupSet{}, errors.New("cgroups are Linux-only")
}

func (c *cgroupSet) enter(string) (int, error) { return -1, nil }
func setCgroup(*syscall.SysProcAttr, int)      {}
func (c *cgroupSet) kill(string) int           { return 0 }
func (c *cgroupSet) sweep() int                { return 0 }
func (c *cgroupSet) release()                  {}
