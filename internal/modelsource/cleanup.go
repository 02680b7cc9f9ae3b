package modelsource

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/capstan-dev/capstan/internal/fslock"
)

// cacheLockFile, at the top of the cache dir, is held shared by every live
// Fetcher of that cache (flock: the kernel drops it when the process dies,
// kill -9 included). New takes it exclusively for the moment it removes
// leftovers, so no Fetcher removes another's download in progress.
const cacheLockFile = ".capstan-cache.lock"

// openCache locks the cache dir for f and, when no other Fetcher holds it,
// removes the leftovers of downloads and extractions that were cut short
// (see removeLeftovers). A cache whose lock cannot be taken is used without
// the cleanup: it is logged, not an error.
func (f *Fetcher) openCache() {
	root, err := os.OpenRoot(f.o.CacheDir)
	if err != nil {
		f.log.Warn("model cache: not removing leftovers of interrupted downloads", "dir", f.o.CacheDir, "err", err)
		return
	}
	defer root.Close()
	lock, err := root.OpenFile(cacheLockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		f.log.Warn("model cache: not removing leftovers of interrupted downloads", "dir", f.o.CacheDir, "err", err)
		return
	}
	err = fslock.Flock(lock, syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.log.Info("model cache: in use by another fetcher, leftovers of interrupted downloads stay", "dir", f.o.CacheDir)
	case err != nil:
		f.log.Warn("model cache: not removing leftovers of interrupted downloads", "dir", f.o.CacheDir, "err", err)
	default:
		removed, err := removeLeftovers(root)
		if removed > 0 || err != nil {
			f.log.Info("model cache: removed leftovers of interrupted downloads", "dir", f.o.CacheDir, "removed", removed, "err", err)
		}
	}
	// Shared from now on (waiting, if another New is cleaning, for it to
	// finish): a later New sees this Fetcher alive and leaves its temporary
	// files alone.
	if err := fslock.Flock(lock, syscall.LOCK_SH); err != nil {
		f.log.Warn("model cache: lock", "dir", f.o.CacheDir, "err", err)
		lock.Close()
		return
	}
	f.lock = lock
}

// removeLeftovers removes, anywhere under root, every file, folder or
// symbolic link whose name starts with partPrefix: a download, extraction,
// state write or folder swap that never finished (nothing else uses the
// prefix: safeRel refuses it in object keys and archive entries). The walk
// goes through root, so it never leaves it: links are not followed, a
// leftover link is removed itself, not what it points to. It returns how
// many it removed and the first error; it goes on past errors.
func removeLeftovers(root *os.Root) (removed int, first error) {
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if first == nil {
				first = err
			}
			return nil // an unreadable folder: skipped
		}
		if p == "." || !strings.HasPrefix(d.Name(), partPrefix) {
			return nil
		}
		if err := root.RemoveAll(p); err != nil {
			if first == nil {
				first = fmt.Errorf("removing %s: %w", p, err)
			}
		} else {
			removed++
		}
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	return removed, first
}

// Close releases the Fetcher's hold on its cache dir, after which a new
// Fetcher of that cache removes the leftovers of interrupted downloads
// again. Fetches still work after Close but are no longer protected from
// that cleanup. The server never calls it (the hold ends with the process);
// it is for tests and embedders. Calling it twice is harmless.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	lock := f.lock
	f.lock = nil
	f.mu.Unlock()
	if lock == nil {
		return nil
	}
	return lock.Close()
}
