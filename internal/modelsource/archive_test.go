package modelsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// tarEntry is one member of a test archive.
type tarEntry struct {
	name string
	body []byte
	typ  byte // tar.TypeReg when 0
	link string
	size int64 // header size override (0: len(body))
}

// TarGz builds a gzip tar archive from entries.
func tarGz(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ, Linkname: e.link, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Typeflag == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestS3ArchiveAgainstMoto(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)
	w := weights(1<<16, 7)
	ctx := context.Background()

	fetchArchive := func(t *testing.T, f *Fetcher, key string) (Result, error) {
		t.Helper()
		src, err := FromModelData("s3://models/"+key, "")
		if err != nil {
			t.Fatal(err)
		}
		if !src.Archive {
			t.Fatalf("FromModelData(%s) = %+v, want an archive source", key, src)
		}
		return f.Fetch(ctx, src)
	}
	// cacheEntries lists what the cache holds for the archives (to prove a
	// refused archive leaves nothing behind).
	cacheEntries := func(t *testing.T, f *Fetcher) []string {
		t.Helper()
		ents, _ := os.ReadDir(filepath.Join(f.o.CacheDir, "s3-archive", "models"))
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}

	t.Run("good archive, config at the top", func(t *testing.T) {
		put(t, c, "models", "ft/model.tar.gz", tarGz(t,
			tarEntry{name: "./", typ: tar.TypeDir},
			tarEntry{name: "./config.json", body: cfg},
			tarEntry{name: "./model-00001-of-00001.safetensors", body: w},
			tarEntry{name: "tokenizer/", typ: tar.TypeDir},
			tarEntry{name: "tokenizer/tokenizer.json", body: []byte(`{}`)},
		), false)
		f := newS3Fetcher(t, ep)
		res, err := fetchArchive(t, f, "ft/model.tar.gz")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(readFile(t, filepath.Join(res.Dir, "config.json")), cfg) ||
			!bytes.Equal(readFile(t, filepath.Join(res.Dir, "model-00001-of-00001.safetensors")), w) ||
			string(readFile(t, filepath.Join(res.Dir, "tokenizer", "tokenizer.json"))) != `{}` {
			t.Fatalf("extracted folder %s does not hold the archive's files", res.Dir)
		}
		if res.Files != 3 || res.Bytes != int64(len(cfg)+len(w)+2) || res.Downloaded != 1 {
			t.Fatalf("result = %+v, want 3 files, %d bytes, 1 download", res, len(cfg)+len(w)+2)
		}
		if fi, err := os.Stat(filepath.Join(res.Dir, "config.json")); err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("config.json mode %v %v", fi, err)
		}
		// Unchanged: served from the cache without a download.
		res2, err := fetchArchive(t, f, "ft/model.tar.gz")
		if err != nil || res2.Downloaded != 0 || res2.Dir != res.Dir {
			t.Fatalf("re-fetch = %+v, %v; want the cached folder, no download", res2, err)
		}
		// Changed: extracted again and swapped in whole.
		put(t, c, "models", "ft/model.tar.gz", tarGz(t, tarEntry{name: "config.json", body: cfg}), false)
		res3, err := fetchArchive(t, f, "ft/model.tar.gz")
		if err != nil || res3.Downloaded != 1 || res3.Files != 1 {
			t.Fatalf("after a change = %+v, %v", res3, err)
		}
		if _, err := os.Stat(filepath.Join(res3.Dir, "model-00001-of-00001.safetensors")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("old file survived the new extraction: %v", err)
		}
	})

	t.Run("config one folder down", func(t *testing.T) {
		put(t, c, "models", "nested.tar.gz", tarGz(t,
			tarEntry{name: "my-model/", typ: tar.TypeDir},
			tarEntry{name: "my-model/config.json", body: cfg},
		), false)
		f := newS3Fetcher(t, ep)
		res, err := fetchArchive(t, f, "nested.tar.gz")
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(res.Dir) != "my-model" || !bytes.Equal(readFile(t, filepath.Join(res.Dir, "config.json")), cfg) {
			t.Fatalf("Dir = %s, want the my-model folder holding config.json", res.Dir)
		}
	})

	bad := []struct {
		name    string
		key     string
		body    []byte
		opts    func(*Options)
		reason  string
		mention []string
		noCfg   bool
	}{
		{name: "dot-dot entry", key: "escape.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "../../evil", body: []byte("x")}),
			reason: ReasonPathEscape, mention: []string{`"../../evil"`, "s3://models/escape.tar.gz"}},
		{name: "absolute entry", key: "abs.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "/etc/evil", body: []byte("x")}),
			reason: ReasonPathEscape, mention: []string{`"/etc/evil"`}},
		{name: "symlink entry", key: "link.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "weights", typ: tar.TypeSymlink, link: "/etc/passwd"}),
			reason: ReasonPathEscape, mention: []string{`"weights"`, "links are not allowed"}},
		{name: "hardlink entry", key: "hard.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "h", typ: tar.TypeLink, link: "config.json"}),
			reason: ReasonPathEscape, mention: []string{"links are not allowed"}},
		{name: "device entry", key: "dev.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "null", typ: tar.TypeChar}),
			reason: ReasonInvalidSource, mention: []string{`"null"`, "only regular files and folders"}},
		{name: "no config.json", key: "nocfg.tar.gz", body: tarGz(t,
			tarEntry{name: "weights.safetensors", body: w}, tarEntry{name: "a/b/config.json", body: cfg}),
			reason: ReasonNotFound, mention: []string{"s3://models/nocfg.tar.gz has no config.json"}, noCfg: true},
		{name: "oversized", key: "big.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "w.safetensors", body: w}),
			opts: func(o *Options) { o.MaxArchiveBytes = int64(len(cfg)) + 1000 }, reason: ReasonTooLarge, mention: []string{"expands past", "modelSources.maxArchiveBytes", `"w.safetensors"`}},
		{name: "too many entries", key: "many.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "a", body: []byte("a")}, tarEntry{name: "b", body: []byte("b")}),
			opts: func(o *Options) { o.MaxArchiveEntries = 2 }, reason: ReasonInvalidSource, mention: []string{"more than 2 entries"}},
		{name: "not gzip", key: "plain.tar.gz", body: []byte("config.json plain text"),
			reason: ReasonInvalidSource, mention: []string{"not a gzip archive"}},
		{name: "missing object", key: "absent.tar.gz", reason: ReasonNotFound, mention: []string{"absent.tar.gz"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if tc.body != nil {
				put(t, c, "models", tc.key, tc.body, false)
			}
			o := Options{CacheDir: t.TempDir(), S3Endpoint: ep, S3AccessKeyID: "test", S3SecretAccessKey: "test"}
			if tc.opts != nil {
				tc.opts(&o)
			}
			f, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = fetchArchive(t, f, tc.key)
			wantReason(t, err, tc.reason, tc.mention...)
			if got := errors.Is(err, ErrNoConfig); got != tc.noCfg {
				t.Fatalf("errors.Is(err, ErrNoConfig) = %v, want %v", got, tc.noCfg)
			}
			var se *SourceError
			errors.As(err, &se)
			if kind, _ := se.ModelDataProblem(); (kind == "NoConfig") != tc.noCfg || (!tc.noCfg && kind != tc.reason) {
				t.Fatalf("ModelDataProblem kind %q for %v", kind, err)
			}
			if left := cacheEntries(t, f); len(left) != 0 {
				t.Fatalf("a refused archive left %v in the cache", left)
			}
			if _, err := os.Lstat(filepath.Join(f.o.CacheDir, "..", "evil")); err == nil {
				t.Fatal("an entry escaped the cache")
			}
		})
	}

	t.Run("missing bucket", func(t *testing.T) {
		f := newS3Fetcher(t, ep)
		src, _ := FromModelData("s3://no-such-bucket/m.tar.gz", CompressionGzip)
		_, err := f.Fetch(ctx, src)
		wantReason(t, err, ReasonNotFound, "no-such-bucket")
	})

	t.Run("uncompressed prefix", func(t *testing.T) {
		put(t, c, "models", "plain/config.json", cfg, false)
		put(t, c, "models", "plain/w.safetensors", w, false)
		f := newS3Fetcher(t, ep)
		src, err := FromModelData("s3://models/plain/", CompressionNone)
		if err != nil || src.Archive {
			t.Fatalf("FromModelData = %+v, %v; want a prefix source", src, err)
		}
		res, err := f.Fetch(ctx, src)
		if err != nil || res.Files != 2 || !bytes.Equal(readFile(t, filepath.Join(res.Dir, "config.json")), cfg) {
			t.Fatalf("prefix fetch = %+v, %v", res, err)
		}
		put(t, c, "models", "nocfg-prefix/w.safetensors", w, false)
		src, _ = FromModelData("s3://models/nocfg-prefix/", CompressionNone)
		_, err = f.Fetch(ctx, src)
		if !errors.Is(err, ErrNoConfig) {
			t.Fatalf("prefix without config.json: %v, want ErrNoConfig", err)
		}
	})
}

func TestFromModelData(t *testing.T) {
	tests := []struct {
		uri, comp string
		archive   bool
		bucket    string
		loc       string
		wantErr   string
	}{
		{"s3://b-1/models/m.tar.gz", "", true, "b-1", "models/m.tar.gz", ""},
		{"s3://b-1/models/m.tar.gz", "Gzip", true, "b-1", "models/m.tar.gz", ""},
		{"s3://b-1/models/m/", "None", false, "b-1", "models/m/", ""},
		{"s3://b-1/models/m/", "", false, "b-1", "models/m/", ""},
		{"s3://b-1/models/m/", "Gzip", false, "", "", "not a prefix"},
		{"s3://b-1/", "Gzip", false, "", "", "not a prefix"},
		{"s3://b-1/a/../b.tar.gz", "", false, "", "", "plain object key"},
		{"https://b-1/m.tar.gz", "", false, "", "", "not an S3 URI"},
		{"s3://B_ad/m.tar.gz", "", false, "", "", "not a valid bucket name"},
		{"s3://b-1/m.tar.gz", "Zstd", false, "", "", "compression type"},
	}
	for _, tc := range tests {
		t.Run(tc.uri+"/"+tc.comp, func(t *testing.T) {
			src, err := FromModelData(tc.uri, tc.comp)
			if tc.wantErr != "" {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || src.Archive != tc.archive || src.Bucket != tc.bucket || src.Location != tc.loc {
				t.Fatalf("got %+v, %v", src, err)
			}
		})
	}
}
