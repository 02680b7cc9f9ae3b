//go:build linux

package spaces

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupSet gives each running space a cgroup (v2) of its own, under one
// parent per spaces directory in capstan's own cgroup. A process cannot
// leave its cgroup by starting a new session or scrubbing its environment
// (`setsid env -i …`), which the process group and the environment sweep
// both miss; stopping a space kills its whole cgroup, and a restart after
// kill -9 kills what the previous run's cgroups still hold. A process
// running as root can still move itself to another cgroup: only a sandbox
// stops that (docs/security.md).
type cgroupSet struct {
	parent string // "" when no cgroup v2 hierarchy is writable here
}

// openCgroups finds the cgroup v2 hierarchy and capstan's place in it, and
// makes the parent for spacesDir's spaces. Without a writable one it
// returns a set that tracks nothing and the reason.
func openCgroups(spacesDir string) (*cgroupSet, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return &cgroupSet{}, err
	}
	self, err := ownCgroup()
	if err != nil {
		return &cgroupSet{}, err
	}
	sum := sha256.Sum256([]byte(spacesDir))
	parent := filepath.Join(mount, self, parentPrefix+hex.EncodeToString(sum[:6]))
	pruneEmpty(filepath.Dir(parent))
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return &cgroupSet{}, fmt.Errorf("create cgroup %s: %w", parent, err)
	}
	return &cgroupSet{parent: parent}, nil
}

// parentPrefix names the parent cgroups, one per spaces directory.
const parentPrefix = "capstan-spaces-"

// pruneEmpty removes the space cgroups in dir that no process is in,
// and the parents they leave empty: a server killed with SIGKILL leaves
// its cgroups, and one whose data directory is gone never sweeps them. A
// cgroup with a process in it stays for its own server's next start; a
// parent another server still uses is made again by its next enter.
func pruneEmpty(dir string) {
	parents, _ := filepath.Glob(filepath.Join(dir, parentPrefix+"*"))
	for _, p := range parents {
		spaces, _ := os.ReadDir(p)
		for _, e := range spaces {
			if d := filepath.Join(p, e.Name()); e.IsDir() && !populated(d) {
				_ = syscall.Rmdir(d)
			}
		}
		_ = syscall.Rmdir(p)
	}
}

// cgroup2Mount is where the cgroup v2 hierarchy is mounted
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options... - fstype source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(postFields) >= 1 && postFields[0] == "cgroup2" {
			return fields[4], nil
		}
	}
	return "", errors.New("no cgroup2 hierarchy is mounted")
}

// ownCgroup is capstan's cgroup v2 path ("0::/path" in /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Clean("/" + p), nil
		}
	}
	return "", errors.New("capstan is in no cgroup v2 group")
}

// dir is key's cgroup ("ns/name" → "ns_name": neither part holds a '_').
func (c *cgroupSet) dir(key string) string {
	return filepath.Join(c.parent, strings.ReplaceAll(key, "/", "_"))
}

// enter creates key's cgroup and returns a descriptor of it for the
// space's launch (the process is born in it), or -1 when there is none.
func (c *cgroupSet) enter(key string) (int, error) {
	if c.parent == "" {
		return -1, nil
	}
	d := c.dir(key)
	// MkdirAll: another server's start may have pruned the parent while no
	// space of ours ran.
	if err := os.MkdirAll(d, 0o755); err != nil {
		return -1, fmt.Errorf("create cgroup %s: %w", d, err)
	}
	fd, err := syscall.Open(d, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open cgroup %s: %w", d, err)
	}
	return fd, nil
}

// setCgroup has a launch start the process in the cgroup fd (enter's).
func setCgroup(a *syscall.SysProcAttr, fd int) {
	if fd >= 0 {
		a.UseCgroupFD, a.CgroupFD = true, fd
	}
}

// kill SIGKILLs everything in key's cgroup and removes it; it returns how
// many processes it held.
func (c *cgroupSet) kill(key string) int {
	if c.parent == "" {
		return 0
	}
	return killCgroup(c.dir(key))
}

// sweep kills and removes every space cgroup (a previous run's, after
// kill -9), returning how many processes they held.
func (c *cgroupSet) sweep() int {
	if c.parent == "" {
		return 0
	}
	ents, err := os.ReadDir(c.parent)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			n += killCgroup(filepath.Join(c.parent, e.Name()))
		}
	}
	return n
}

// release kills what the spaces' cgroups hold and removes them and their
// parent (the server's stop).
func (c *cgroupSet) release() {
	if c.parent == "" {
		return
	}
	c.sweep()
	_ = syscall.Rmdir(c.parent)
}

// emptyWaits bounds how long killCgroup waits for killed processes to
// leave their cgroup (10ms each): SIGKILL is not held up by the process,
// only by the kernel tearing it down.
const emptyWaits = 200

// killCgroup kills every process in dir and the cgroups below it (a space
// may make some), waits for them to exit and removes the cgroups.
// cgroup.kill (Linux 5.14) does it in one write; before it, each listed
// process is signalled. A cgroup whose processes have not exited within
// the wait stays, for the next sweep.
func killCgroup(dir string) int {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	n := 0
	for _, d := range dirs {
		n += len(cgroupPids(d))
	}
	if n > 0 && os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) != nil {
		for _, d := range dirs {
			for _, pid := range cgroupPids(d) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for i := 0; n > 0 && i < emptyWaits && populated(dir); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	for i := len(dirs) - 1; i >= 0; i-- { // the deepest first
		_ = syscall.Rmdir(dirs[i])
	}
	return n
}

// populated reports whether a process is left in dir or below it
// (cgroup.events' "populated 1").
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	return err == nil && strings.Contains(string(b), "populated 1")
}

// cgroupPids lists the processes directly in the cgroup dir.
func cgroupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
