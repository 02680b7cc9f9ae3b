package modelsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/capstan-dev/capstan/internal/fslock"
)

// archiveDir is the cache folder of archive sources.
const archiveDir = "s3-archive"

// ErrCacheShared is returned by RemoveUnused when another live Fetcher (a
// second server) uses the same cache dir: what its models use is not known
// here, so nothing is removed.
var ErrCacheShared = errors.New("the model cache is in use by another capstan process; nothing is removed from it")

// errNoCacheLock is RemoveUnusedModelData's error when the Fetcher holds no
// lock on its cache (it could not take it at New, or after Close).
var errNoCacheLock = errors.New("this fetcher holds no lock on the model cache (see the log at start), so it cannot tell whether another process uses it; nothing is removed from it")

// RemoveUnusedModelData removes the extracted model archives (the folders
// under CacheDir/s3-archive/ that a fetch completed, one per bucket and
// key) that no folder of inUse is at, inside or around, and returns the
// folders removed; inUse lists the model folders still used (as
// FetchModelData returned them; the same folder under another path, e.g.
// through a symbolic link, counts). It implements endpoint.ModelDataCache.
// Object mirrors (s3 prefixes), Hugging Face downloads and everything else
// in the cache are never removed: manifests share them.
//
// It is safe against fetches of the same source: a folder whose source is
// being fetched is kept, and while a folder is removed a fetch of its
// source waits, then fetches it afresh. A folder is first renamed to a
// temporary name (so a removal cut short by a crash leaves a leftover that
// New removes), then deleted. It removes nothing and returns
// ErrCacheShared while another live Fetcher holds the cache (see
// openCache), or another error when this one holds no lock on it (after
// Close). Other errors are the first folder that could not be removed (it
// goes on past them) or ctx's.
func (f *Fetcher) RemoveUnusedModelData(ctx context.Context, inUse []string) (removed []string, err error) {
	unlock, err := f.lockCacheAlone()
	if err != nil {
		return nil, err
	}
	defer unlock()
	used := newFolderSet(inUse)
	root := filepath.Join(f.o.CacheDir, archiveDir)
	for _, dir := range extractedArchives(root) {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		rel, _ := filepath.Rel(root, dir)
		bucket, key, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if !ok {
			continue
		}
		src := Source{Type: TypeS3, Bucket: bucket, Location: key, Archive: true}
		done, rerr := f.removeArchive(src.key(), dir, used.uses)
		if done {
			removed = append(removed, dir)
			f.log.Info("model cache: removed an extracted archive nothing uses", "source", src.String(), "dir", dir)
		}
		if rerr != nil {
			f.log.Warn("model cache: could not remove an extracted archive", "source", src.String(), "dir", dir, "err", rerr)
			if err == nil {
				err = fmt.Errorf("removing the extraction of %s: %w", src, rerr)
			}
		}
	}
	return removed, err
}

// folderSet is the model folders in use, by path and by file identity.
type folderSet struct {
	paths []string
	infos []os.FileInfo // each folder and its parent (an archive's model may be one folder down)
}

func newFolderSet(dirs []string) folderSet {
	var s folderSet
	for _, d := range dirs {
		if d == "" {
			continue
		}
		d = filepath.Clean(d)
		s.paths = append(s.paths, d)
		for _, p := range []string{d, filepath.Dir(d)} {
			if fi, err := os.Stat(p); err == nil {
				s.infos = append(s.infos, fi)
			}
		}
	}
	return s
}

// uses reports whether a folder in use is dir, inside it or around it.
func (s folderSet) uses(dir string) bool {
	within := func(a, b string) bool { return strings.HasPrefix(a, b+string(filepath.Separator)) }
	for _, p := range s.paths {
		if p == dir || within(p, dir) || within(dir, p) {
			return true
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	for _, u := range s.infos {
		if os.SameFile(fi, u) {
			return true
		}
	}
	return false
}

// removeArchive removes dir, the extraction of source key k, unless a
// fetch of k is in flight or inUse(dir). It holds k's fetch slot while it
// decides and renames, so no fetch of k runs meanwhile.
func (f *Fetcher) removeArchive(k, dir string, inUse func(string) bool) (bool, error) {
	f.mu.Lock()
	if _, busy := f.inflight[k]; busy {
		f.mu.Unlock()
		return false, nil // being fetched: someone is about to use it
	}
	c := &call{done: make(chan struct{}), removal: true}
	f.inflight[k] = c
	f.mu.Unlock()
	release := func() {
		f.mu.Lock()
		delete(f.inflight, k)
		f.mu.Unlock()
		close(c.done)
	}
	if inUse(dir) {
		release()
		return false, nil
	}
	trash, err := os.MkdirTemp(filepath.Dir(dir), partPrefix+"*")
	if err == nil {
		if err = os.Rename(dir, filepath.Join(trash, "x")); err != nil {
			os.Remove(trash)
		}
	}
	release()
	if err != nil {
		return false, err
	}
	return true, os.RemoveAll(trash)
}

// extractedArchives lists the folders under root that hold a completed
// extraction (an archive state file), without entering them or following
// links; temporary folders are skipped.
func extractedArchives(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), partPrefix) {
			return fs.SkipDir
		}
		if p != root && regular(filepath.Join(p, archiveStateFile)) {
			out = append(out, p)
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// lockCacheAlone takes the cache lock exclusively, which succeeds only
// while no other live Fetcher holds it, and returns the function that
// gives it back (shared again). A failed attempt has dropped the shared
// hold (flock converts by unlocking first), so it is taken again.
func (f *Fetcher) lockCacheAlone() (unlock func(), err error) {
	f.mu.Lock()
	lock := f.lock
	f.mu.Unlock()
	if lock == nil {
		return nil, errNoCacheLock
	}
	if err := fslock.Flock(lock, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if rerr := fslock.Flock(lock, syscall.LOCK_SH); rerr != nil {
			f.log.Warn("model cache: lock", "dir", f.o.CacheDir, "err", rerr)
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrCacheShared
		}
		return nil, err
	}
	return func() {
		if err := fslock.Flock(lock, syscall.LOCK_SH); err != nil {
			f.log.Warn("model cache: lock", "dir", f.o.CacheDir, "err", err)
		}
	}, nil
}
