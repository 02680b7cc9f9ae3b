package deployment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// tieredDir is where the replicas of node keep their shared tieredstorage
// store: <dataDir>/tieredstorage/<cluster>/<node>.
func tieredDir(dataDir, cluster, node string) string {
	return filepath.Join(dataDir, "tieredstorage", cluster, node)
}

// freeBytes is what the file system holding path lets an unprivileged
// writer add (statfs's available blocks).
func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // Bsize is uint32 on some systems
}

// existing is dir or its nearest ancestor that exists: what to statfs
// before the store's directory is created.
func existing(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}

// dirBytes is the size of the files under dir (0 when it does not exist).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, err
}

// tieredRoom says why a node's tieredstorage store of budget bytes in dir
// cannot be opened ("" when it can): the data directory must be set, and
// its file system must have room for the budget beside what the store
// already holds. A store that fills the disk later degrades to misses in
// the engine; this refuses only a budget that cannot fit from the start.
func (c *Controller) tieredRoom(dir string, budget int64, node string) string {
	if c.o.DataDir == "" {
		return "tieredstorage needs capstan serve's data directory to keep blocks in, and none is configured"
	}
	if budget <= 0 {
		return fmt.Sprintf("tieredstorage on node %s has no budget: its instance type has no local storage; set spec.kvCacheSpec.l2CacheSpec.l2CacheSize or use redis", node)
	}
	free, err := c.diskFree(existing(dir))
	if err != nil {
		return fmt.Sprintf("tieredstorage on node %s: cannot read the free space of %s: %v", node, dir, err)
	}
	held, err := dirBytes(dir)
	if err != nil {
		return fmt.Sprintf("tieredstorage on node %s: cannot read %s: %v", node, dir, err)
	}
	if free+held < budget {
		return fmt.Sprintf("tieredstorage on node %s needs %s (spec.kvCacheSpec.l2CacheSpec.l2CacheSize) in %s, but its file system has %s free; free disk space or lower l2CacheSize",
			node, manifest.FormatBytes(budget), dir, manifest.FormatBytes(free+held))
	}
	return ""
}
