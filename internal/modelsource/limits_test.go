package modelsource

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// noise is n bytes that do not compress (a model's weights barely do).
func noise(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newLimitedFetcher(t *testing.T, ep string, maxArchive, maxCache int64) *Fetcher {
	t.Helper()
	f, err := New(Options{CacheDir: t.TempDir(), S3Endpoint: ep, S3AccessKeyID: "test", S3SecretAccessKey: "test",
		MaxArchiveBytes: maxArchive, MaxCacheBytes: maxCache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// wantTooLarge checks a size refusal: Reason TooLarge wrapping ErrTooLarge,
// shown to a client as kind TooLarge with the message alone (no cause).
func wantTooLarge(t *testing.T, f *Fetcher, key string, mentions ...string) {
	t.Helper()
	err, kind, detail := archiveProblem(t, f, key)
	wantReason(t, err, ReasonTooLarge, mentions...)
	if !IsTooLarge(err) || kind != ReasonTooLarge || strings.Contains(detail, ErrTooLarge.Error()) {
		t.Fatalf("IsTooLarge = %v, kind %q, detail %q", IsTooLarge(err), kind, detail)
	}
	noServerPath(t, err, detail, f.o.CacheDir)
	t.Logf("%s: %s", key, detail)
}

// A gzip bomb is refused once its content passes the per-archive limit,
// the whole cache's limit or the compression-ratio bound, and nothing of it
// stays in the cache.
func TestArchiveSizeLimits(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)

	t.Run("per archive", func(t *testing.T) {
		// 2 MiB of zeros is a 2 KiB object: a small gzip bomb.
		put(t, c, "models", "bomb/model.tar.gz", tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "zeros.bin", body: make([]byte, 2<<20)}), false)
		// Two files each within the limit, past it together.
		put(t, c, "models", "two/model.tar.gz", tarGz(t, tarEntry{name: "config.json", body: cfg},
			tarEntry{name: "a.bin", body: noise(600<<10, 1)}, tarEntry{name: "b.bin", body: noise(600<<10, 2)}), false)
		f := newLimitedFetcher(t, ep, 1<<20, 64<<20)
		wantTooLarge(t, f, "bomb/model.tar.gz", "s3://models/bomb/model.tar.gz: the archive expands past 1048576 bytes (1 MiB), "+
			"the limit on one extracted model archive (modelSources.maxArchiveBytes in capstan.yaml), at entry \"zeros.bin\"; nothing of it was kept")
		wantTooLarge(t, f, "two/model.tar.gz", "expands past 1048576 bytes (1 MiB)", `"b.bin"`, "modelSources.maxArchiveBytes")
		if left := cacheLeft(t, f); len(left) != 0 {
			t.Fatalf("a refused archive left %v in the cache", left)
		}
		if _, used := f.budget.room(); used > int64(len(cfg))+64<<10 {
			t.Fatalf("the cache budget still counts %d bytes of refused extractions", used)
		}
	})

	t.Run("whole cache", func(t *testing.T) {
		put(t, c, "models", "a/model.tar.gz", tarGz(t, tarEntry{name: "config.json", body: cfg}, tarEntry{name: "w.bin", body: noise(800<<10, 3)}), false)
		put(t, c, "models", "b/model.tar.gz", tarGz(t, tarEntry{name: "config.json", body: cfg}, tarEntry{name: "w.bin", body: noise(800<<10, 4)}), false)
		f := newLimitedFetcher(t, ep, 1<<20, 3<<19) // 1 MiB each, 1.5 MiB in all
		dirA, _, err := f.FetchModelData(context.Background(), "s3://models/a/model.tar.gz", "", "")
		if err != nil {
			t.Fatal(err)
		}
		wantTooLarge(t, f, "b/model.tar.gz", "s3://models/b/model.tar.gz: extracting the archive would take the model cache past 1572864 bytes (1.5 MiB), "+
			"the limit on the whole model cache (modelSources.maxCacheBytes in capstan.yaml;", `were in use), at entry "w.bin"; nothing of it was kept`)
		if left := cacheLeft(t, f); len(left) != 3 || !regular(filepath.Join(dirA, "w.bin")) {
			t.Fatalf("the cache holds %v; want a's extraction alone, complete", left)
		}
		// Removing a makes room for b.
		removed, err := f.RemoveUnusedModelData(context.Background(), nil)
		if err != nil || len(removed) != 1 || removed[0] != dirA {
			t.Fatalf("RemoveUnusedModelData = %v, %v; want a's folder %s", removed, err, dirA)
		}
		if _, _, err := f.FetchModelData(context.Background(), "s3://models/b/model.tar.gz", "", ""); err != nil {
			t.Fatalf("b after a was removed: %v", err)
		}
	})

	t.Run("compression ratio", func(t *testing.T) {
		put(t, c, "models", "zeros/model.tar.gz", tarGz(t, tarEntry{name: "config.json", body: cfg}, tarEntry{name: "zeros.bin", body: make([]byte, 512<<10)}), false)
		put(t, c, "models", "dense/model.tar.gz", tarGz(t, tarEntry{name: "config.json", body: cfg}, tarEntry{name: "w.bin", body: noise(512<<10, 5)}), false)
		f := newLimitedFetcher(t, ep, 64<<20, 64<<20)
		f.ratioFloor = 64 << 10
		wantTooLarge(t, f, "zeros/model.tar.gz", "the archive expands past 100 times its compressed size", `"zeros.bin"`, "likely decompression bomb", "CompressionType None")
		if _, _, err := f.FetchModelData(context.Background(), "s3://models/dense/model.tar.gz", "", ""); err != nil {
			t.Fatalf("an archive of incompressible weights: %v", err)
		}
	})
}

// The writer refuses a write that would pass a limit before writing any of
// it, and an extraction stopped by a limit never had more on disk than the
// limit allows.
func TestQuotaCountsBytesAsWritten(t *testing.T) {
	budget := &cacheBudget{max: 100}
	q := &archiveQuota{maxBytes: 1000, cache: budget}
	var buf bytes.Buffer
	w := &quotaWriter{w: &buf, q: q, entry: "e"}
	if _, err := w.Write(make([]byte, 60)); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write(make([]byte, 60)); n != 0 || !IsTooLarge(err) || !strings.Contains(err.Error(), SettingMaxCacheBytes) {
		t.Fatalf("write past the cache limit = %d, %v", n, err)
	}
	if buf.Len() != 60 || budget.used != 60 {
		t.Fatalf("wrote %d bytes, budget counts %d; want 60 and 60", buf.Len(), budget.used)
	}
	q.release()
	if budget.used != 0 {
		t.Fatalf("released budget counts %d", budget.used)
	}

	q = &archiveQuota{maxBytes: 50}
	buf.Reset()
	w = &quotaWriter{w: &buf, q: q, entry: "e"}
	if _, err := w.Write(make([]byte, 40)); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write(make([]byte, 20)); n != 0 || !IsTooLarge(err) || !strings.Contains(err.Error(), SettingMaxArchiveBytes) {
		t.Fatalf("write past the archive limit = %d, %v", n, err)
	}

	// extractTarGz into a folder left as it was when the limit stopped it.
	dir := t.TempDir()
	bomb := tarGz(t, tarEntry{name: "config.json", body: []byte(`{}`)}, tarEntry{name: "zeros.bin", body: make([]byte, 1<<20)})
	_, err := extractTarGz(context.Background(), bytes.NewReader(bomb), dir, &archiveQuota{maxBytes: 1 << 20, cache: &cacheBudget{max: 100 << 10}}, 10)
	if !IsTooLarge(err) {
		t.Fatalf("extractTarGz = %v, want a size refusal", err)
	}
	if got := cacheUsage(dir); got > 100<<10 {
		t.Fatalf("%d bytes were written before the refusal; the limit is %d", got, 100<<10)
	}
}

func TestComputeLimits(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "held"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := computeLimits(Options{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !l.ArchiveDefaulted || !l.CacheDefaulted || l.FreeBytes <= 0 || l.CacheBytes != 4096 {
		t.Fatalf("limits %+v", l)
	}
	if want := min(DefaultMaxArchiveBytes, l.FreeBytes/100*DefaultArchiveFreeShare); l.MaxArchiveBytes != want {
		t.Fatalf("default maxArchiveBytes %d, want %d (free %d)", l.MaxArchiveBytes, want, l.FreeBytes)
	}
	if want := min(DefaultMaxCacheBytes, 4096+l.FreeBytes/100*DefaultCacheFreeShare); l.MaxCacheBytes != want {
		t.Fatalf("default maxCacheBytes %d, want %d (free %d)", l.MaxCacheBytes, want, l.FreeBytes)
	}
	l, err = computeLimits(Options{MaxArchiveBytes: 10, MaxCacheBytes: 20}, dir)
	if err != nil || l.MaxArchiveBytes != 10 || l.MaxCacheBytes != 20 || l.ArchiveDefaulted || l.CacheDefaulted {
		t.Fatalf("configured limits = %+v, %v", l, err)
	}
	for n, want := range map[int64]string{512: "512 bytes", 1 << 20: "1048576 bytes (1 MiB)", 3 << 19: "1572864 bytes (1.5 MiB)", 64 << 30: "68719476736 bytes (64 GiB)"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// RemoveUnusedModelData removes exactly the extracted archives no folder in
// use is at or in, never one being fetched, never an object mirror, and
// nothing while another Fetcher shares the cache.
func TestRemoveUnusedModelData(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)
	ctx := context.Background()
	put(t, c, "models", "k1/model.tar.gz", tarGz(t, tarEntry{name: "config.json", body: cfg}), false)
	put(t, c, "models", "k2/model.tar.gz", tarGz(t, tarEntry{name: "m/", typ: tar.TypeDir}, tarEntry{name: "m/config.json", body: cfg}), false)
	put(t, c, "models", "prefix/config.json", cfg, false)
	f := newLimitedFetcher(t, ep, 0, 0)
	fetch := func(uri, comp string) string {
		t.Helper()
		dir, _, err := f.FetchModelData(ctx, uri, comp, "")
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	d1 := fetch("s3://models/k1/model.tar.gz", "")
	d2 := fetch("s3://models/k2/model.tar.gz", "") // …/k2/model.tar.gz/m: the model is one folder down
	dp := fetch("s3://models/prefix/", CompressionNone)
	archive2 := filepath.Dir(d2)

	if removed, err := f.RemoveUnusedModelData(ctx, []string{d1, d2}); err != nil || len(removed) != 0 {
		t.Fatalf("both in use: removed %v, %v", removed, err)
	}
	// The same folder through a link counts as in use.
	link := filepath.Join(t.TempDir(), "cache")
	if err := os.Symlink(f.o.CacheDir, link); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(f.o.CacheDir, d2)
	removed, err := f.RemoveUnusedModelData(ctx, []string{filepath.Join(link, rel)})
	if err != nil || len(removed) != 1 || removed[0] != d1 {
		t.Fatalf("k2 in use through a link: removed %v, %v; want k1's folder alone", removed, err)
	}
	if _, err := os.Lstat(d1); !errors.Is(err, os.ErrNotExist) || !regular(filepath.Join(d2, "config.json")) || !regular(filepath.Join(dp, "config.json")) {
		t.Fatalf("after removing k1: k1 %v, k2 and the prefix mirror must stay", err)
	}
	if left := cacheLeft(t, f); len(left) != 2 { // k2's config.json and state file
		t.Fatalf("the cache holds %v", left)
	}

	t.Run("kept while fetched, fetched afresh after", func(t *testing.T) {
		// A fetch in flight keeps its folder.
		client, err := f.s3Client(ctx, "us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		gate := &countingS3{s3API: client, gate: make(chan struct{})}
		f.mu.Lock()
		f.s3["us-east-1"] = gate
		f.mu.Unlock()
		defer func() { f.mu.Lock(); f.s3["us-east-1"] = client; f.mu.Unlock() }()
		put(t, c, "models", "k2/model.tar.gz", tarGz(t, tarEntry{name: "m/config.json", body: cfg}, tarEntry{name: "m/new.bin", body: []byte("x")}), false)
		done := make(chan error, 1)
		go func() { _, _, err := f.FetchModelData(ctx, "s3://models/k2/model.tar.gz", "", ""); done <- err }()
		for gate.gets.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		if removed, err := f.RemoveUnusedModelData(ctx, nil); err != nil || len(removed) != 0 {
			t.Fatalf("while k2 is fetched: removed %v, %v", removed, err)
		}
		close(gate.gate)
		if err := <-done; err != nil || !regular(filepath.Join(d2, "new.bin")) {
			t.Fatalf("the fetch in flight: %v", err)
		}
		// A fetch that comes while the folder is removed waits, then
		// extracts it again.
		var wg sync.WaitGroup
		var fetchErr error
		fetched := make(chan struct{})
		removedNow, rerr := f.removeArchive(Source{Type: TypeS3, Bucket: "models", Location: "k2/model.tar.gz", Archive: true}.key(), archive2, func(string) bool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, fetchErr = f.FetchModelData(ctx, "s3://models/k2/model.tar.gz", "", "")
				close(fetched)
			}()
			select {
			case <-fetched:
				t.Error("a fetch ran while the folder was being removed")
			case <-time.After(200 * time.Millisecond):
			}
			return false
		})
		wg.Wait()
		if !removedNow || rerr != nil || fetchErr != nil || !regular(filepath.Join(d2, "new.bin")) {
			t.Fatalf("removed %v (%v); the fetch that waited: %v, its folder must be back", removedNow, rerr, fetchErr)
		}
	})

	t.Run("shared cache", func(t *testing.T) {
		g, err := New(Options{CacheDir: f.o.CacheDir})
		if err != nil {
			t.Fatal(err)
		}
		if removed, err := f.RemoveUnusedModelData(ctx, nil); !errors.Is(err, ErrCacheShared) || len(removed) != 0 || !regular(filepath.Join(d2, "config.json")) {
			t.Fatalf("with a second Fetcher on the cache: removed %v, %v; want nothing, ErrCacheShared", removed, err)
		}
		g.Close()
		// f still holds the cache after the refused attempt: a New beside
		// it leaves a temporary file alone.
		part := filepath.Join(f.o.CacheDir, partPrefix+"download")
		if err := os.WriteFile(part, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := New(Options{CacheDir: f.o.CacheDir})
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
		if !regular(part) {
			t.Fatal("New removed a live Fetcher's temporary file: the refused removal dropped the cache lock")
		}
		os.Remove(part)
		if removed, err := f.RemoveUnusedModelData(ctx, nil); err != nil || len(removed) != 1 || removed[0] != archive2 {
			t.Fatalf("alone again: removed %v, %v; want k2's folder", removed, err)
		}
		if !regular(filepath.Join(dp, "config.json")) {
			t.Fatal("the prefix mirror was removed")
		}
	})
}
