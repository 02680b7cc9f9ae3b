package modelsource

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/engines"
)

// ggufBody is a small file llama.cpp's loader would start reading: the GGUF
// magic, then incompressible bytes (weights barely compress).
func ggufBody(n int, seed uint64) []byte {
	return append([]byte("GGUF"), noise(n, seed)...)
}

// wantGGUFProblem checks a refusal as SageMaker shows it: the reason, the
// sentinel wrapped, ModelDataProblem's kind NoConfig, the mentions in the
// client's detail, and no server path.
func wantGGUFProblem(t *testing.T, f *Fetcher, err error, reason string, sentinel error, mentions ...string) {
	t.Helper()
	var se *SourceError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *SourceError", err)
	}
	kind, detail := se.ModelDataProblem()
	if se.Reason != reason || !errors.Is(err, sentinel) || kind != "NoConfig" {
		t.Fatalf("err = %v (reason %s, kind %q); want reason %s wrapping %q, kind NoConfig", err, se.Reason, kind, reason, sentinel)
	}
	for _, m := range mentions {
		if !strings.Contains(detail, m) {
			t.Fatalf("detail %q does not mention %q", detail, m)
		}
	}
	noServerPath(t, err, detail, f.o.CacheDir)
	t.Logf("%s", detail)
}

// A llama.cpp model archive holds a .gguf file, no config.json: fetched as
// FormatGGUF it is checked for one, starting with the GGUF magic bytes;
// fetched as a Hugging Face folder it is refused as before.
func TestGGUFArchives(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)
	w := ggufBody(64<<10, 1)
	ctx := context.Background()

	for _, tt := range []struct {
		name    string
		entries []tarEntry
		format  engines.ModelFormat
		// a fetch that works: the folder (relative to the extraction; ""
		// the top), the file GGUFFile picks in it, the catalog model
		dir, file, model string
		// a refusal
		reason   string
		sentinel error
		mentions []string
	}{
		{name: "gguf at the top", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "./", typ: tar.TypeDir}, {name: "./model-q4_k_m.gguf", body: w}, {name: "./README.md", body: []byte("hi")}},
			file:    "model-q4_k_m.gguf"},
		{name: "gguf one folder down names the model", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "qwen2.5-7b-instruct/", typ: tar.TypeDir}, {name: "qwen2.5-7b-instruct/qwen-q8_0.gguf", body: w}},
			dir:     "qwen2.5-7b-instruct", file: "qwen-q8_0.gguf", model: "qwen2.5-7b"},
		{name: "a split model picks shard 00001", format: engines.FormatGGUF,
			entries: []tarEntry{
				{name: "m/model-00002-of-00002.gguf", body: ggufBody(1000, 2)},
				{name: "m/model-00001-of-00002.gguf", body: ggufBody(1000, 3)},
			},
			dir: "m", file: "model-00001-of-00002.gguf"},
		{name: "config.json beside the gguf is fine", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "config.json", body: cfg}, {name: "model.GGUF", body: w}},
			file:    "model.GGUF"},
		{name: "gguf archive fetched as huggingface", format: engines.FormatHF,
			entries: []tarEntry{{name: "model.gguf", body: w}},
			reason:  ReasonNotFound, sentinel: ErrNoConfig, mentions: []string{"has no config.json (looked at the top of the archive and one folder down)"}},
		{name: "no gguf", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "config.json", body: cfg}, {name: "model.safetensors", body: w}},
			reason:  ReasonNotFound, sentinel: ErrNoGGUF, mentions: []string{"has no .gguf file, which llama.cpp loads (looked at the top of the archive and one folder down)"}},
		{name: "gguf two folders down", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "a/b/model.gguf", body: w}},
			reason:  ReasonNotFound, sentinel: ErrNoGGUF, mentions: []string{"has no .gguf file"}},
		{name: "not GGUF magic", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "m/x.gguf", body: append([]byte("PK\x03\x04"), noise(100, 4)...)}},
			reason:  ReasonInvalidSource, sentinel: ErrInvalidGGUF, mentions: []string{`m/x.gguf is not a GGUF file: it starts with "PK\x03\x04", not the magic bytes "GGUF"`}},
		{name: "too short for the magic", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "x.gguf", body: []byte("GG")}},
			reason:  ReasonInvalidSource, sentinel: ErrInvalidGGUF, mentions: []string{"x.gguf is 2 bytes, too short to be a GGUF file"}},
		{name: "a bad second shard", format: engines.FormatGGUF,
			entries: []tarEntry{
				{name: "model-00001-of-00002.gguf", body: ggufBody(100, 5)},
				{name: "model-00002-of-00002.gguf", body: noise(100, 6)},
			},
			reason: ReasonInvalidSource, sentinel: ErrInvalidGGUF, mentions: []string{"model-00002-of-00002.gguf is not a GGUF file"}},
		{name: "two unrelated gguf files", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "m/a.gguf", body: w}, {name: "m/b.gguf", body: ggufBody(100, 7)}},
			reason:  ReasonInvalidSource, sentinel: ErrInvalidGGUF, mentions: []string{"the model has 2 .gguf files (m/a.gguf, m/b.gguf)", "keep one .gguf file"}},
		{name: "gguf in two folders", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "a/x.gguf", body: w}, {name: "b/y.gguf", body: w}},
			reason:  ReasonInvalidSource, sentinel: ErrInvalidGGUF, mentions: []string{".gguf files in both a/ and b/", "holds one model"}},
		{name: "one gguf entry twice", format: engines.FormatGGUF,
			entries: []tarEntry{{name: "model.gguf", body: ggufBody(10, 8)}, {name: "./model.gguf", body: w}},
			reason:  ReasonInvalidSource, sentinel: ErrInvalidGGUF, mentions: []string{`the archive has 2 entries for model.gguf ("model.gguf", "./model.gguf")`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := strings.NewReplacer(" ", "-", ".", "").Replace(tt.name) + "/model.tar.gz"
			put(t, c, "models", key, tarGz(t, tt.entries...), false)
			f := newS3Fetcher(t, ep)
			dir, model, err := f.FetchModelData(ctx, "s3://models/"+key, "", tt.format)
			if tt.reason != "" {
				wantGGUFProblem(t, f, err, tt.reason, tt.sentinel, append([]string{"s3://models/" + key}, tt.mentions...)...)
				if left := cacheLeft(t, f); len(left) != 0 {
					t.Fatalf("a refused archive left %v in the cache", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(f.o.CacheDir, archiveDir, "models", filepath.FromSlash(key), filepath.FromSlash(tt.dir))
			if dir != want || model != tt.model {
				t.Fatalf("FetchModelData = %s, %q; want %s, %q", dir, model, want, tt.model)
			}
			got, err := engines.GGUFFile(dir)
			if err != nil || got != filepath.Join(dir, tt.file) {
				t.Fatalf("GGUFFile(dir) = %s, %v; want %s", got, err, tt.file)
			}
			if b := readFile(t, got); !bytes.HasPrefix(b, []byte("GGUF")) {
				t.Fatalf("%s does not hold the archive's file", got)
			}
		})
	}
}

// One archive fetched as GGUF and as a Hugging Face folder shares one cache
// folder: each fetch applies its own format's check to the cached
// extraction, an unchanged archive is never downloaded again, and a
// refusal for one format leaves the other's extraction in place.
func TestGGUFArchiveCache(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)
	ctx := context.Background()

	counting := func(t *testing.T, f *Fetcher, gate bool) *countingS3 {
		t.Helper()
		client, err := f.s3Client(ctx, "us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		cs := &countingS3{s3API: client}
		if gate {
			cs.gate = make(chan struct{})
		}
		f.mu.Lock()
		f.s3["us-east-1"] = cs
		f.mu.Unlock()
		return cs
	}
	fetch := func(f *Fetcher, key string, format engines.ModelFormat) (Result, error) {
		return f.Fetch(ctx, Source{Type: TypeS3, Bucket: "models", Location: key, Archive: true, Format: format})
	}

	t.Run("gguf only", func(t *testing.T) {
		put(t, c, "models", "llama/model.tar.gz", tarGz(t, tarEntry{name: "llama/model.gguf", body: ggufBody(256<<10, 9)}), false)
		f := newS3Fetcher(t, ep)
		cs := counting(t, f, false)
		res, err := fetch(f, "llama/model.tar.gz", engines.FormatGGUF)
		if err != nil || res.Downloaded != 1 || res.Files != 1 || res.Bytes != 256<<10+4 || filepath.Base(res.Dir) != "llama" {
			t.Fatalf("first fetch = %+v, %v; want one download of 1 file, the folder llama", res, err)
		}
		res2, err := fetch(f, "llama/model.tar.gz", engines.FormatGGUF)
		if err != nil || res2.Downloaded != 0 || res2.Dir != res.Dir || res2.Files != 1 || cs.gets.Load() != 1 {
			t.Fatalf("re-fetch = %+v, %v, %d GETs; want the cached folder, no download", res2, err, cs.gets.Load())
		}
		// As a Hugging Face folder it has no config.json: refused (after
		// one more download, as an older capstan's extraction would be),
		// and the GGUF extraction stays.
		_, err = fetch(f, "llama/model.tar.gz", engines.FormatHF)
		wantGGUFProblem(t, f, err, ReasonNotFound, ErrNoConfig, "has no config.json")
		res3, err := fetch(f, "llama/model.tar.gz", engines.FormatGGUF)
		if err != nil || res3.Downloaded != 0 || res3.Dir != res.Dir || cs.gets.Load() != 2 {
			t.Fatalf("GGUF fetch after the refusal = %+v, %v, %d GETs; want the cached folder, no download", res3, err, cs.gets.Load())
		}
	})

	t.Run("one archive, both formats", func(t *testing.T) {
		put(t, c, "models", "both/model.tar.gz", tarGz(t,
			tarEntry{name: "hf/config.json", body: cfg},
			tarEntry{name: "hf/model.safetensors", body: noise(1000, 10)},
			tarEntry{name: "model.gguf", body: ggufBody(1000, 11)},
		), false)
		f := newS3Fetcher(t, ep)
		cs := counting(t, f, false)
		hf, err := fetch(f, "both/model.tar.gz", "")
		if err != nil || filepath.Base(hf.Dir) != "hf" || hf.Downloaded != 1 {
			t.Fatalf("HF fetch = %+v, %v; want the folder hf, one download", hf, err)
		}
		gg, err := fetch(f, "both/model.tar.gz", engines.FormatGGUF)
		if err != nil || gg.Dir != filepath.Dir(hf.Dir) || gg.Model != "" || gg.Downloaded != 0 || cs.gets.Load() != 1 {
			t.Fatalf("GGUF fetch = %+v, %v, %d GETs; want the top of the extraction, no model, from the cache", gg, err, cs.gets.Load())
		}
	})

	t.Run("concurrent fetches of two formats do not share a result", func(t *testing.T) {
		put(t, c, "models", "both2/model.tar.gz", tarGz(t,
			tarEntry{name: "config.json", body: cfg},
			tarEntry{name: "gguf/model.gguf", body: ggufBody(1000, 12)},
		), false)
		f := newS3Fetcher(t, ep)
		cs := counting(t, f, true)
		var wg sync.WaitGroup
		var hf, gg Result
		var hfErr, ggErr error
		wg.Add(1)
		go func() { defer wg.Done(); hf, hfErr = fetch(f, "both2/model.tar.gz", engines.FormatHF) }()
		for cs.gets.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		wg.Add(1)
		go func() { defer wg.Done(); gg, ggErr = fetch(f, "both2/model.tar.gz", engines.FormatGGUF) }()
		time.Sleep(50 * time.Millisecond) // the GGUF fetch waits for the slot
		f.mu.Lock()
		if cur := f.inflight[Source{Type: TypeS3, Bucket: "models", Location: "both2/model.tar.gz", Archive: true}.key()]; cur == nil || cur.waiters != 0 {
			f.mu.Unlock()
			t.Fatalf("in flight: %+v; want the HF fetch with no one sharing it", cur)
		}
		f.mu.Unlock()
		close(cs.gate)
		wg.Wait()
		if hfErr != nil || ggErr != nil {
			t.Fatalf("HF: %v; GGUF: %v", hfErr, ggErr)
		}
		if gg.Dir != filepath.Join(hf.Dir, "gguf") || gg.Downloaded != 0 || cs.gets.Load() != 1 {
			t.Fatalf("HF %+v, GGUF %+v, %d GETs; want the GGUF folder inside the HF one, one download", hf, gg, cs.gets.Load())
		}
	})
}

// GGUF archives count against the archive and cache limits and the ratio
// bound exactly as Hugging Face ones do.
func TestGGUFArchiveLimits(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	put(t, c, "models", "big/model.tar.gz", tarGz(t,
		tarEntry{name: "model-00001-of-00002.gguf", body: ggufBody(600<<10, 13)},
		tarEntry{name: "model-00002-of-00002.gguf", body: ggufBody(600<<10, 14)}), false)
	put(t, c, "models", "fits/model.tar.gz", tarGz(t, tarEntry{name: "model.gguf", body: ggufBody(800<<10, 15)}), false)
	put(t, c, "models", "zeros/model.tar.gz", tarGz(t, tarEntry{name: "model.gguf", body: append([]byte("GGUF"), make([]byte, 512<<10)...)}), false)
	f := newLimitedFetcher(t, ep, 1<<20, 64<<20)
	f.ratioFloor = 64 << 10
	fetch := func(key string) (string, error) {
		dir, _, err := f.FetchModelData(context.Background(), "s3://models/"+key, "", engines.FormatGGUF)
		return dir, err
	}
	_, err := fetch("big/model.tar.gz")
	wantReason(t, err, ReasonTooLarge, "expands past 1048576 bytes (1 MiB)", `"model-00002-of-00002.gguf"`, "modelSources.maxArchiveBytes")
	_, err = fetch("zeros/model.tar.gz")
	wantReason(t, err, ReasonTooLarge, "the archive expands past 100 times its compressed size", `"model.gguf"`)
	if left := cacheLeft(t, f); len(left) != 0 {
		t.Fatalf("refused archives left %v in the cache", left)
	}
	if _, used := f.budget.room(); used > 64<<10 {
		t.Fatalf("the cache budget still counts %d bytes of refused extractions", used)
	}
	dir, err := fetch("fits/model.tar.gz")
	if err != nil {
		t.Fatalf("an archive of incompressible weights within the limit: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "model.gguf")); err != nil || fi.Size() != 800<<10+4 {
		t.Fatalf("model.gguf: %v, %v", fi, err)
	}
	if _, used := f.budget.room(); used < 800<<10 {
		t.Fatalf("the cache budget counts %d bytes, want at least the extraction's %d", used, 800<<10)
	}
}

// An S3 prefix (CompressionType None) holding a .gguf works as a GGUF
// model, without config.json.
func TestGGUFPrefix(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	put(t, c, "models", "tinyllama-gguf/tinyllama-q4.gguf", ggufBody(1000, 16), false)
	put(t, c, "models", "tinyllama-gguf/README.md", []byte("hi"), false)
	put(t, c, "models", "nested/qwen2.5-7b-instruct/qwen.gguf", ggufBody(1000, 17), false)
	put(t, c, "models", "bad-gguf/model.gguf", []byte("not a gguf file"), false)
	put(t, c, "models", "hf-only/config.json", qwenConfig(t), false)
	f := newS3Fetcher(t, ep)
	ctx := context.Background()

	dir, _, err := f.FetchModelData(ctx, "s3://models/tinyllama-gguf/", CompressionNone, engines.FormatGGUF)
	if err != nil || dir != filepath.Join(f.o.CacheDir, "s3", "models", "tinyllama-gguf") {
		t.Fatalf("FetchModelData = %s, %v", dir, err)
	}
	if p, err := engines.GGUFFile(dir); err != nil || filepath.Base(p) != "tinyllama-q4.gguf" {
		t.Fatalf("GGUFFile = %s, %v", p, err)
	}
	dir, model, err := f.FetchModelData(ctx, "s3://models/nested/", CompressionNone, engines.FormatGGUF)
	if err != nil || filepath.Base(dir) != "qwen2.5-7b-instruct" || model != "qwen2.5-7b" {
		t.Fatalf("one folder down: %s, %q, %v", dir, model, err)
	}
	_, _, err = f.FetchModelData(ctx, "s3://models/hf-only/", CompressionNone, engines.FormatGGUF)
	wantGGUFProblem(t, f, err, ReasonNotFound, ErrNoGGUF, "no .gguf file under s3://models/hf-only/")
	_, _, err = f.FetchModelData(ctx, "s3://models/bad-gguf/", CompressionNone, engines.FormatGGUF)
	wantGGUFProblem(t, f, err, ReasonInvalidSource, ErrInvalidGGUF, `s3://models/bad-gguf/: model.gguf is not a GGUF file: it starts with "not "`)
	_, _, err = f.FetchModelData(ctx, "s3://models/tinyllama-gguf/", CompressionNone, engines.FormatHF)
	wantGGUFProblem(t, f, err, ReasonNotFound, ErrNoConfig, "no config.json under s3://models/tinyllama-gguf/")
}

// An FSx folder holding a .gguf is used in place as a GGUF model.
func TestGGUFFSx(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"fs-0abc/fsx1/llama/model.gguf":                            string(ggufBody(100, 18)),
		"fs-0abc/fsx1/nested/qwen2.5-7b-instruct/qwen-q4_k_m.gguf": string(ggufBody(100, 19)),
		"fs-0abc/fsx1/nested/qwen2.5-7b-instruct/README.md":        "hi",
		"fs-0abc/fsx1/no-gguf/config.json":                         string(qwenConfig(t)),
		"fs-0abc/fsx1/bad/model.gguf":                              "<html>",
		"fs-0abc/fsx1/two/a.gguf":                                  string(ggufBody(10, 20)),
		"fs-0abc/fsx1/two/b.gguf":                                  string(ggufBody(10, 21)),
		"fs-0abc/fsx1/hf-cache/blobs/9f1c":                         string(ggufBody(100, 22)),
	})
	// A Hugging Face cache's snapshot: the .gguf is a link to its blob.
	if err := os.MkdirAll(filepath.Join(root, "fs-0abc/fsx1/hf-cache/snapshots/main"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../blobs/9f1c", filepath.Join(root, "fs-0abc/fsx1/hf-cache/snapshots/main/tiny-q8_0.gguf")); err != nil {
		t.Fatal(err)
	}
	f, err := New(Options{CacheDir: t.TempDir(), FSxRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	src := func(loc string) Source {
		return Source{Type: TypeFSx, FileSystemID: "fs-0abc", MountName: "fsx1", Location: loc, Format: engines.FormatGGUF}
	}
	base, _ := filepath.EvalSymlinks(filepath.Join(root, "fs-0abc", "fsx1"))
	for _, tt := range []struct {
		name, loc, dir, model string
		reason                string
		mentions              []string
	}{
		{name: "gguf at the top", loc: "llama", dir: "llama"},
		{name: "gguf one folder down", loc: "nested", dir: "nested/qwen2.5-7b-instruct", model: "qwen2.5-7b"},
		{name: "gguf linked to a blob", loc: "hf-cache/snapshots/main", dir: "hf-cache/snapshots/main"},
		{name: "no gguf", loc: "no-gguf", reason: ReasonNotFound, mentions: []string{"has no .gguf file, which llama.cpp loads"}},
		{name: "not GGUF", loc: "bad", reason: ReasonInvalidSource, mentions: []string{`model.gguf is not a GGUF file: it starts with "<htm"`}},
		{name: "two gguf files", loc: "two", reason: ReasonInvalidSource, mentions: []string{"2 .gguf files (a.gguf, b.gguf)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.Fetch(context.Background(), src(tt.loc))
			if tt.reason != "" {
				wantReason(t, err, tt.reason, tt.mentions...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Dir != filepath.Join(base, filepath.FromSlash(tt.dir)) || res.Model != tt.model {
				t.Fatalf("result %+v; want dir %s, model %q", res, tt.dir, tt.model)
			}
			if _, err := engines.GGUFFile(res.Dir); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("as a huggingface folder", func(t *testing.T) {
		s := src("llama")
		s.Format = engines.FormatHF
		_, err := f.Fetch(context.Background(), s)
		wantReason(t, err, ReasonNotFound, "no config.json")
	})
}

// A GGUF model comes only from s3 or fsx, and a format is one of the two.
func TestGGUFSourceValidate(t *testing.T) {
	for _, tt := range []struct {
		src      Source
		mentions []string
	}{
		{Source{Type: TypeHuggingFace, HFModelID: "org/model", Format: engines.FormatGGUF}, []string{"hf://org/model@main", "comes from s3 or fsx"}},
		{Source{Type: TypeJumpStart, JumpStartModelID: "meta-textgeneration-llama-3-8b", Format: engines.FormatGGUF}, []string{"comes from s3 or fsx"}},
		{Source{Type: TypeS3, Bucket: "models", Location: "m", Format: "onnx"}, []string{`model format "onnx" is not one of huggingface, gguf`}},
	} {
		err := tt.src.Validate()
		wantReason(t, err, ReasonInvalidSource, tt.mentions...)
	}
	for _, s := range []Source{
		{Type: TypeS3, Bucket: "models", Location: "m", Format: engines.FormatGGUF},
		{Type: TypeS3, Bucket: "models", Location: "m", Format: engines.FormatHF},
		{Type: TypeFSx, FileSystemID: "fs-0abc", Location: "m", Format: engines.FormatGGUF},
	} {
		if err := s.Validate(); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
	}
}
