package modelsource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
)

// Size limits of the model cache. An archive is bounded on its own
// (MaxArchiveBytes) and together with everything already in the cache
// (MaxCacheBytes); both are counted on the bytes actually written while
// extracting, not taken from the archive's headers alone.
const (
	// DefaultMaxArchiveBytes is the fixed part of the default bound on the
	// extracted size of one model archive: the default is the smaller of it
	// and DefaultArchiveFreeShare of the space free in the cache's file
	// system when the Fetcher starts.
	DefaultMaxArchiveBytes int64 = 64 << 30
	// DefaultMaxCacheBytes is the fixed part of the default bound on the
	// whole model cache: the default is the smaller of it and what the cache
	// holds at start plus DefaultCacheFreeShare of the space then free.
	DefaultMaxCacheBytes int64 = 1 << 40
	// DefaultArchiveFreeShare and DefaultCacheFreeShare are those shares,
	// in percent.
	DefaultArchiveFreeShare = 50
	DefaultCacheFreeShare   = 80
	// DefaultMaxArchiveEntries bounds the number of entries in one archive; a
	// model archive holds tens of files.
	DefaultMaxArchiveEntries = 10000

	// MaxArchiveRatio refuses, as a likely decompression bomb, an archive
	// whose content grows past MaxArchiveRatio times its compressed size
	// once past ratioFloor. Model weights barely compress (about 1.1:1),
	// tokenizers and configs about 5:1; gzip's best is about 1000:1.
	MaxArchiveRatio = 100
	ratioFloor      = 256 << 20
)

// Settings of the limits, as capstan.yaml names them (messages name them).
const (
	SettingMaxArchiveBytes = "modelSources.maxArchiveBytes"
	SettingMaxCacheBytes   = "modelSources.maxCacheBytes"
)

// ErrTooLarge is wrapped by the SourceError (Reason TooLarge) of an archive
// refused for its size: past MaxArchiveBytes, past MaxCacheBytes together
// with the cache, or past MaxArchiveRatio times its compressed size
// (errors.Is(err, ErrTooLarge)). Nothing of such an archive stays in the
// cache.
var ErrTooLarge = errors.New("over a size limit of the model cache")

// IsTooLarge reports whether err is a fetch refused for its size.
func IsTooLarge(err error) bool { return errors.Is(err, ErrTooLarge) }

// Limits are the size limits a Fetcher enforces (Options, or the defaults
// computed from the free space at New).
type Limits struct {
	MaxArchiveBytes int64
	MaxCacheBytes   int64
	// Defaulted says which were computed rather than configured.
	ArchiveDefaulted, CacheDefaulted bool
	// FreeBytes and CacheBytes are the free space of the cache's file system
	// and what the cache held when they were computed (-1: not measured).
	FreeBytes, CacheBytes int64
}

// Limits returns the size limits f enforces.
func (f *Fetcher) Limits() Limits { return f.limits }

// computeLimits fills in the limits o leaves at 0: the smaller of the fixed
// default and a share of the space free in dir's file system (for the whole
// cache: plus what the cache already holds). Without the file system's
// numbers the fixed defaults apply.
func computeLimits(o Options, dir string) (Limits, error) {
	l := Limits{MaxArchiveBytes: o.MaxArchiveBytes, MaxCacheBytes: o.MaxCacheBytes, FreeBytes: -1, CacheBytes: -1}
	if l.MaxArchiveBytes > 0 && l.MaxCacheBytes > 0 {
		return l, nil
	}
	free, err := freeBytes(dir)
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes, l.ArchiveDefaulted = DefaultMaxArchiveBytes, true
		if err == nil {
			l.MaxArchiveBytes = min(l.MaxArchiveBytes, free/100*DefaultArchiveFreeShare)
		}
	}
	if l.MaxCacheBytes <= 0 {
		l.MaxCacheBytes, l.CacheDefaulted = DefaultMaxCacheBytes, true
		if err == nil {
			l.CacheBytes = cacheUsage(dir)
			l.MaxCacheBytes = min(l.MaxCacheBytes, l.CacheBytes+free/100*DefaultCacheFreeShare)
		}
	}
	if err == nil {
		l.FreeBytes = free
	}
	return l, err
}

// freeBytes is the space an unprivileged process may still write in dir's
// file system.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil // the field types differ by platform
}

// cacheUsage sums the sizes of the regular files under dir (links are not
// followed). Unreadable folders are skipped.
func cacheUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// cacheBudget bounds the bytes extractions add to the cache. While at least
// one extraction runs, used is the cache's size measured when the first of
// them began plus every byte they wrote since (less what failed ones
// removed); it is measured again when the next extraction begins after
// all have ended. Bytes other fetches add meanwhile (object downloads) are
// seen at the next measurement.
type cacheBudget struct {
	mu     sync.Mutex
	max    int64
	dir    string
	active int
	used   int64
}

// begin opens an extraction's use of the budget; end closes it.
func (b *cacheBudget) begin() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active == 0 {
		b.used = cacheUsage(b.dir)
	}
	b.active++
}

func (b *cacheBudget) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active--
}

// take adds n bytes unless that would pass max; it returns the bytes in use
// before.
func (b *cacheBudget) take(n int64) (ok bool, used int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.max-b.used {
		return false, b.used
	}
	b.used += n
	return true, b.used - n
}

// give returns n bytes (an extraction that was removed).
func (b *cacheBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// room is what the cache may still take.
func (b *cacheBudget) room() (room, used int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max - b.used, b.used
}

// archiveQuota is what one extraction may still write: its own limit, the
// compression ratio and the cache budget, checked before each write.
type archiveQuota struct {
	maxBytes   int64 // MaxArchiveBytes
	compressed int64 // the archive's size in S3 (0: unknown, no ratio check)
	ratioFloor int64 // no ratio check below this many bytes (ratioFloor; tests lower it)
	cache      *cacheBudget
	written    int64 // content bytes written so far
	taken      int64 // bytes taken from cache (given back on failure)
}

// check refuses n more bytes of entry (before anything is written) when
// they would pass a limit; the error is a *SourceError wrapping
// ErrTooLarge that names the limit and its setting.
func (q *archiveQuota) check(n int64, entry string) error {
	if n > q.maxBytes-q.written {
		return srcErr(ReasonTooLarge, ErrTooLarge, "the archive expands past %s, the limit on one extracted model archive (%s in capstan.yaml), at entry %q; nothing of it was kept",
			sizeText(q.maxBytes), SettingMaxArchiveBytes, entry)
	}
	if q.compressed > 0 {
		if lim := max(q.compressed*MaxArchiveRatio, q.ratioFloor); n > lim-q.written {
			return srcErr(ReasonTooLarge, ErrTooLarge, "the archive expands past %d times its compressed size of %s, at entry %q: refused as a likely decompression bomb "+
				"(model weights barely compress; if it is genuine, upload the folder uncompressed and use CompressionType None); nothing of it was kept",
				MaxArchiveRatio, sizeText(q.compressed), entry)
		}
	}
	if q.cache != nil {
		if room, used := q.cache.room(); n > room {
			return q.cacheFull(used, entry)
		}
	}
	return nil
}

func (q *archiveQuota) cacheFull(used int64, entry string) error {
	return srcErr(ReasonTooLarge, ErrTooLarge, "extracting the archive would take the model cache past %s, the limit on the whole model cache (%s in capstan.yaml; %s were in use), at entry %q; nothing of it was kept: delete models that are no longer needed, or raise the limit",
		sizeText(q.cache.max), SettingMaxCacheBytes, sizeText(used), entry)
}

// add counts n bytes about to be written, taking them from the cache
// budget; it refuses, writing nothing, bytes past a limit.
func (q *archiveQuota) add(n int64, entry string) error {
	if err := q.check(n, entry); err != nil {
		return err
	}
	if q.cache != nil {
		ok, used := q.cache.take(n)
		if !ok {
			return q.cacheFull(used, entry)
		}
		q.taken += n
	}
	q.written += n
	return nil
}

// release gives back to the cache budget what an extraction that was
// removed had taken.
func (q *archiveQuota) release() {
	if q.cache != nil && q.taken > 0 {
		q.cache.give(q.taken)
		q.taken = 0
	}
}

// quotaWriter writes to w what q allows, counting each write before it is
// made.
type quotaWriter struct {
	w     io.Writer
	q     *archiveQuota
	entry string
}

func (w *quotaWriter) Write(p []byte) (int, error) {
	if err := w.q.add(int64(len(p)), w.entry); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

// sizeText is "1048576 bytes (1 MiB)": exact, and readable.
func sizeText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d bytes (%d %s)", n, int64(v), units[u])
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, v, units[u])
}
