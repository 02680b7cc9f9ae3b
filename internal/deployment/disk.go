package deployment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/capstan-dev/capstan/internal/catalog"
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

// minDefaultTieredBytes is the smallest default budget worth a store: a
// data directory with less room refuses a tieredstorage replica whose
// manifest sets no l2CacheSize.
const minDefaultTieredBytes = 1 << 30

// tieredBudget is the tieredstorage budget replica starts get on node, or
// why they may not start. The store's file system must have room for it
// (free space plus what the store already holds): an l2CacheSize that does
// not fit is refused; the default (manifest.DefaultTieredStorageBytes)
// shrinks to the room there is, whole GiB, and note says so. A store that
// fills the disk later degrades to misses in the engine; this refuses only
// a budget that cannot fit from the start.
func (c *Controller) tieredBudget(p *plan, it catalog.InstanceType, node string) (budget int64, note, why string) {
	if c.o.DataDir == "" {
		return 0, "", "tieredstorage needs capstan serve's data directory to keep blocks in, and none is configured"
	}
	dir := tieredDir(c.o.DataDir, p.cluster, node)
	room, err := c.room(dir)
	if err != nil {
		return 0, "", fmt.Sprintf("tieredstorage on node %s: %v", node, err)
	}
	if p.l2Size > 0 {
		if room < p.l2Size {
			return 0, "", fmt.Sprintf("tieredstorage on node %s needs %s (spec.kvCacheSpec.l2CacheSpec.l2CacheSize) in %s, but its file system has %s free; free disk space or lower l2CacheSize",
				node, manifest.FormatBytes(p.l2Size), dir, manifest.FormatBytes(room))
		}
		return p.l2Size, "", ""
	}
	def, _ := c.defaultTiered(p.cluster, it)
	switch {
	case def <= 0:
		return 0, "", fmt.Sprintf("tieredstorage on node %s: %s has no local storage; set spec.kvCacheSpec.l2CacheSpec.l2CacheSize or use redis", node, it.Name)
	case room >= def:
		return def, "", ""
	case room < minDefaultTieredBytes:
		return 0, "", fmt.Sprintf("tieredstorage on node %s needs at least %s in %s, but its file system has %s free; free disk space or use redis",
			node, manifest.FormatBytes(minDefaultTieredBytes), dir, manifest.FormatBytes(room))
	}
	budget = room &^ (1<<30 - 1)
	return budget, fmt.Sprintf("tieredstorage on node %s gets %s, not the default %s: that is the room in %s (set spec.kvCacheSpec.l2CacheSpec.l2CacheSize to choose)",
		node, manifest.FormatBytes(budget), manifest.FormatBytes(def), dir), ""
}

// room is what a store in dir may grow to: its file system's free space
// plus what the store already holds.
func (c *Controller) room(dir string) (int64, error) {
	free, err := c.diskFree(existing(dir))
	if err != nil {
		return 0, err
	}
	held, err := dirBytes(dir)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", dir, err)
	}
	return free + held, nil
}
