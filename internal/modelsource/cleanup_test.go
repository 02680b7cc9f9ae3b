package modelsource

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
)

// plantTree creates files (name → content; a name ending in "/" is a
// folder) under root.
func plantTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if name[len(name)-1] == '/' {
			mkdir(t, p)
			continue
		}
		mkdir(t, filepath.Dir(p))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree lists every path under root (folders with a trailing "/"), without
// following symbolic links.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		if d.Type()&os.ModeSymlink != 0 {
			rel += "@"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// A download or extraction killed with -9 leaves its .capstan-part-*
// temporary file or folder behind; the next Fetcher removes them when it
// starts, inside its cache only, and keeps everything else.
func TestNewRemovesPartLeftovers(t *testing.T) {
	kept := map[string]string{
		// a complete archive extraction, and its state
		"s3-archive/models/ft/model.tar.gz/config.json":           `{"model_type":"llama"}`,
		"s3-archive/models/ft/model.tar.gz/.capstan-archive.json": `{}`,
		// a complete (or resumable) prefix mirror
		"s3/models/llama/config.json":         `{}`,
		"s3/models/llama/model.safetensors":   "w",
		"s3/models/llama/.capstan-fetch.json": `{}`,
		"s3/models/llama/tokenizer/vocab.txt": "v",
		"huggingface/org/m/main/config.json":  `{}`,
		// names that merely contain the marker
		"s3/models/llama/notes.capstan-part-1":  "n",
		"s3/models/llama/capstan-part-2/x.json": "x",
	}
	leftovers := map[string]string{
		// interrupted extractions (os.MkdirTemp beside the final folder) and
		// the old folder of an interrupted swap
		"s3-archive/models/ft/.capstan-part-123456/config.json":            `{"model_type"`,
		"s3-archive/models/ft/.capstan-part-123456/weights/a.safetensors":  "w",
		"s3-archive/models/.capstan-part-777/":                             "",
		"s3-archive/models/ft/.capstan-part-999.old/config.json":           `{}`,
		"s3-archive/models/ft/.capstan-part-999.old/.capstan-archive.json": `{}`,
		"s3-archive/models/ft/model.tar.gz/.capstan-part-42":               "state being written",
		// interrupted object downloads and state writes (os.CreateTemp)
		"s3/models/llama/.capstan-part-314159":      "half a weight file",
		"s3/models/llama/tokenizer/.capstan-part-1": "half",
		"huggingface/org/m/main/.capstan-part-2718": "half",
		".capstan-part-at-the-top":                  "x",
	}
	// Outside the cache, reachable only through symbolic links: untouched.
	outside := t.TempDir()
	plantTree(t, outside, map[string]string{
		".capstan-part-outside":     "not ours",
		"deep/.capstan-part-x/file": "not ours",
		"target/.capstan-part-y":    "not ours",
		"target/keep.txt":           "not ours",
	})

	outsideBefore := tree(t, outside)

	run := func(t *testing.T, cacheArg, cache string) {
		plantTree(t, cache, kept)
		plantTree(t, cache, leftovers)
		// A link into the outside folder: the link is kept, nothing behind
		// it is looked at.
		if err := os.Symlink(outside, filepath.Join(cache, "s3", "linked")); err != nil {
			t.Fatal(err)
		}
		// A leftover that is itself a link: the link goes, its target stays.
		if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(cache, "s3", "models", ".capstan-part-link")); err != nil {
			t.Fatal(err)
		}

		f, err := New(Options{CacheDir: cacheArg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })

		want := map[string]bool{"s3/linked@": true, cacheLockFile: true}
		for name := range kept {
			for p := name; p != "."; p = filepath.ToSlash(filepath.Dir(p)) {
				if p == name {
					want[p] = true
				} else {
					want[p+"/"] = true
				}
			}
		}
		got := tree(t, cache)
		var missing, extra []string
		seen := map[string]bool{}
		for _, p := range got {
			seen[p] = true
			if !want[p] {
				extra = append(extra, p)
			}
		}
		for p := range want {
			if !seen[p] {
				missing = append(missing, p)
			}
		}
		sort.Strings(missing)
		if len(extra) != 0 || len(missing) != 0 {
			t.Fatalf("after New the cache holds\n  %v\nleft over (want removed): %v\nmissing (want kept): %v", got, extra, missing)
		}
		for name, body := range kept {
			if b := readFile(t, filepath.Join(cache, filepath.FromSlash(name))); string(b) != body {
				t.Fatalf("%s changed: %q", name, b)
			}
		}
		if o := tree(t, outside); !slices.Equal(o, outsideBefore) {
			t.Fatalf("outside the cache: %v, want %v untouched", o, outsideBefore)
		}
	}

	t.Run("cache dir", func(t *testing.T) {
		cache := filepath.Join(t.TempDir(), "models")
		run(t, cache, cache)
	})
	// A cache dir that is itself a symbolic link (a bigger disk) is the cache:
	// its leftovers go too.
	t.Run("cache dir behind a link", func(t *testing.T) {
		real := filepath.Join(t.TempDir(), "models")
		mkdir(t, real)
		link := filepath.Join(t.TempDir(), "cache")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		run(t, link, real)
	})
}

// A Fetcher's temporary files are its downloads in progress while it lives:
// a second Fetcher of the same cache (another process, or this one) leaves
// them alone; once the first is gone, the next one cleans up.
func TestNewKeepsLiveFetchersParts(t *testing.T) {
	cache := t.TempDir()
	first, err := New(Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(cache, "s3", "models", "m", partPrefix+"123")
	plantTree(t, cache, map[string]string{"s3/models/m/" + partPrefix + "123": "downloading"})

	second, err := New(Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(part); err != nil {
		t.Fatalf("New removed a live Fetcher's download in progress: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := New(Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(part); err != nil {
		t.Fatalf("with the first Fetcher closed, the second still holds the cache: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if err := third.Close(); err != nil || third.Close() != nil {
		t.Fatalf("Close: %v", err)
	}
	fourth, err := New(Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	if _, err := os.Lstat(part); !os.IsNotExist(err) {
		t.Fatalf("no Fetcher alive, yet the leftover stays: %v", err)
	}
}
