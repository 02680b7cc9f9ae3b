package modelsource

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// archiveProblem fetches s3://models/<key> as SageMaker's CreateModel does
// (FetchModelData) and returns the error with what a client is shown of it
// (ModelDataProblem's kind and detail).
func archiveProblem(t *testing.T, f *Fetcher, key string) (err error, kind, detail string) {
	t.Helper()
	_, _, err = f.FetchModelData(context.Background(), "s3://models/"+key, "", "")
	var se *SourceError
	if !errors.As(err, &se) {
		t.Fatalf("FetchModelData(%s) = %v, want a *SourceError", key, err)
	}
	kind, detail = se.ModelDataProblem()
	return err, kind, detail
}

// noServerPath fails when the error or its client detail shows an absolute
// path of the test's temporary folders (the cache dir, its parent, or what
// they resolve to).
func noServerPath(t *testing.T, err error, detail string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		real, _ := filepath.EvalSymlinks(d)
		for _, p := range []string{d, real, filepath.Dir(d)} {
			if p == "" || p == "/" {
				continue
			}
			if strings.Contains(err.Error(), p) || strings.Contains(detail, p) {
				t.Fatalf("the error shows the server path %s:\n  err:    %v\n  detail: %s", p, err, detail)
			}
		}
	}
}

// cacheLeft lists the files the cache holds under s3-archive/models,
// temporary folders' included (an empty folder on the way to the archive's
// place may stay).
func cacheLeft(t *testing.T, f *Fetcher) []string {
	t.Helper()
	var out []string
	root := filepath.Join(f.o.CacheDir, "s3-archive", "models")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && (!d.IsDir() || strings.HasPrefix(d.Name(), partPrefix)) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// A model.tar.gz whose config.json the engine could not read is refused at
// fetch (CreateModel), not ten minutes later when the engine starts: it must
// be one JSON object, present once, in one place, of a sane size.
func TestArchiveConfigJSONChecked(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)
	big := []byte(`{"model_type": "llama", "pad": "` + strings.Repeat(" ", 1<<20) + `"}`)

	bad := []struct {
		name    string
		entries []tarEntry
		mention []string
	}{
		{"not JSON", []tarEntry{{name: "config.json", body: []byte("{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 4096,,\n}")}},
			[]string{"config.json is not valid JSON", "line 3"}},
		{"truncated JSON", []tarEntry{{name: "config.json", body: cfg[:len(cfg)/2]}},
			[]string{"config.json is not valid JSON"}},
		{"JSON array", []tarEntry{{name: "config.json", body: []byte(`["LlamaForCausalLM"]`)}},
			[]string{"config.json is not a JSON object"}},
		{"JSON null", []tarEntry{{name: "config.json", body: []byte("null\n")}},
			[]string{"config.json is not a JSON object"}},
		{"empty", []tarEntry{{name: "config.json"}},
			[]string{"config.json is empty"}},
		{"too large", []tarEntry{{name: "config.json", body: big}},
			[]string{"config.json is", "bytes", "limit"}},
		{"two config.json entries", []tarEntry{{name: "config.json", body: cfg}, {name: "./config.json", body: []byte("{}")}},
			[]string{`2 entries for config.json`, `"config.json"`, `"./config.json"`}},
		{"two config.json entries one folder down", []tarEntry{
			{name: "m/", typ: tar.TypeDir}, {name: "m/config.json", body: cfg}, {name: "m/config.json", body: cfg}},
			[]string{`2 entries for m/config.json`}},
		{"config.json in two folders", []tarEntry{{name: "a/config.json", body: cfg}, {name: "b/config.json", body: cfg}},
			[]string{"config.json in both a/ and b/"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-") + "/model.tar.gz"
			put(t, c, "models", key, tarGz(t, tc.entries...), false)
			f := newS3Fetcher(t, ep)
			err, kind, detail := archiveProblem(t, f, key)
			t.Logf("%s: %s", kind, detail)
			wantReason(t, err, ReasonInvalidSource, append([]string{"s3://models/" + key}, tc.mention...)...)
			// CreateModel words NoConfig as "<field>: <detail>": the detail
			// alone must say what is wrong with which archive.
			if kind != "NoConfig" || !errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrNoConfig) {
				t.Fatalf("ModelDataProblem kind = %q, err %v; want NoConfig, wrapping ErrInvalidConfig (not ErrNoConfig)", kind, err)
			}
			for _, m := range append([]string{"s3://models/" + key}, tc.mention...) {
				if !strings.Contains(detail, m) {
					t.Fatalf("client detail %q does not mention %q", detail, m)
				}
			}
			noServerPath(t, err, detail, f.o.CacheDir)
			if left := cacheLeft(t, f); len(left) != 0 {
				t.Fatalf("a refused archive left %v in the cache", left)
			}
		})
	}

	// An uncompressed prefix (CompressionType None) is checked the same way.
	t.Run("uncompressed prefix", func(t *testing.T) {
		put(t, c, "models", "plain-bad/config.json", []byte(`{"model_type": "llama"`), false)
		f := newS3Fetcher(t, ep)
		_, _, err := f.FetchModelData(context.Background(), "s3://models/plain-bad/", CompressionNone, "")
		wantReason(t, err, ReasonInvalidSource, "s3://models/plain-bad/: config.json is not valid JSON")
		var se *SourceError
		if !errors.As(err, &se) || !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("err = %v, want ErrInvalidConfig", err)
		}
		if kind, _ := se.ModelDataProblem(); kind != "NoConfig" {
			t.Fatalf("ModelDataProblem kind = %q, want NoConfig", kind)
		}
	})

	// Still fine: config.json at the top wins over a sub-model's
	// (diffusers-style text_encoder/config.json), and JSON with a BOM-free
	// leading blank line is JSON.
	good := []struct {
		name    string
		entries []tarEntry
	}{
		{"sub-model config.json", []tarEntry{{name: "config.json", body: cfg}, {name: "text_encoder/config.json", body: []byte(`{"a": 1}`)}}},
		{"leading whitespace", []tarEntry{{name: "config.json", body: append([]byte("\n  "), cfg...)}}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-") + "/model.tar.gz"
			put(t, c, "models", key, tarGz(t, tc.entries...), false)
			f := newS3Fetcher(t, ep)
			dir, _, err := f.FetchModelData(context.Background(), "s3://models/"+key, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if !regular(filepath.Join(dir, "config.json")) || filepath.Base(dir) != filepath.Base(key) {
				t.Fatalf("Dir = %s, want the archive's top folder", dir)
			}
		})
	}
}

// Errors about the model cache name the archive (its S3 URI) and the entry,
// never where the server keeps its files: the message reaches the client
// that called CreateModel.
func TestArchiveErrorsHideServerPaths(t *testing.T) {
	ep := StartMotoS3(t)
	c := testS3(t, ep)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)
	okArchive := tarGz(t, tarEntry{name: "config.json", body: cfg})

	tests := []struct {
		name    string
		key     string
		body    []byte
		setup   func(t *testing.T, cache string) // plants something in the cache first
		reason  string
		mention []string
	}{
		{name: "cache folder is a symbolic link", key: "linked/model.tar.gz", body: okArchive,
			setup: func(t *testing.T, cache string) {
				mkdir(t, filepath.Join(cache, "s3-archive", "models"))
				if err := os.Symlink(t.TempDir(), filepath.Join(cache, "s3-archive", "models", "linked")); err != nil {
					t.Fatal(err)
				}
			},
			reason: ReasonPathEscape, mention: []string{"s3://models/linked/model.tar.gz", "symbolic link"}},
		{name: "cache folder blocked by a file", key: "blocked/model.tar.gz", body: okArchive,
			setup: func(t *testing.T, cache string) {
				mkdir(t, filepath.Join(cache, "s3-archive", "models"))
				if err := os.WriteFile(filepath.Join(cache, "s3-archive", "models", "blocked"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			reason: ReasonFetchFailed, mention: []string{"s3://models/blocked/model.tar.gz", "not a directory"}},
		{name: "entry below a file", key: "below-file.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "a", body: []byte("x")}, tarEntry{name: "a/b", body: []byte("y")}),
			reason: ReasonFetchFailed, mention: []string{"s3://models/below-file.tar.gz", `archive entry "a/b"`, "not a directory"}},
		{name: "file over a folder", key: "file-over-dir.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "d/", typ: tar.TypeDir}, tarEntry{name: "d", body: []byte("x")}),
			reason: ReasonFetchFailed, mention: []string{"s3://models/file-over-dir.tar.gz", `archive entry "d"`, "is a directory"}},
		{name: "folder over a file", key: "dir-over-file.tar.gz", body: tarGz(t,
			tarEntry{name: "config.json", body: cfg}, tarEntry{name: "f", body: []byte("x")}, tarEntry{name: "f/", typ: tar.TypeDir}),
			reason: ReasonFetchFailed, mention: []string{"s3://models/dir-over-file.tar.gz", `archive entry "f/"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			put(t, c, "models", tc.key, tc.body, false)
			cache := filepath.Join(t.TempDir(), "models")
			if tc.setup != nil {
				tc.setup(t, cache)
			}
			var logs bytes.Buffer
			f, err := New(Options{CacheDir: cache, S3Endpoint: ep, S3AccessKeyID: "test", S3SecretAccessKey: "test",
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			err, kind, detail := archiveProblem(t, f, tc.key)
			t.Logf("%s: %s", kind, detail)
			wantReason(t, err, tc.reason, tc.mention...)
			for _, m := range tc.mention {
				if !strings.Contains(detail, m) {
					t.Fatalf("client detail %q does not mention %q", detail, m)
				}
			}
			noServerPath(t, err, detail, cache)
			// The operator still finds the path in the server log.
			if tc.reason == ReasonFetchFailed && !strings.Contains(logs.String(), "localErr=") {
				t.Fatalf("the server log does not carry the local error:\n%s", logs.String())
			}
			if left, _ := filepath.Glob(filepath.Join(cache, "s3-archive", "models", partPrefix+"*")); len(left) != 0 {
				t.Fatalf("a failed extraction left %v", left)
			}
		})
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestConfigProblem(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"model_type": "llama"}`, ""},
		{" \n{}\n", ""},
		{"{\n  \"a\": 1,,\n}", "is not valid JSON: invalid character ',' looking for beginning of object key string (line 2, column 10)"},
		{`{"a": 1} {"b": 2}`, "is not valid JSON: invalid character '{' after top-level value (line 1, column 10)"},
		{`{"a": `, "is not valid JSON: unexpected end of JSON input (line 1, column 6)"},
		{"", "is empty; a Hugging Face config.json is one JSON object"},
		{"\n\t ", "is empty; a Hugging Face config.json is one JSON object"},
		{`"llama"`, "is not a JSON object but a string"},
		{`42`, "is not a JSON object but a number"},
		{`false`, "is not a JSON object but false"},
	}
	for _, tc := range tests {
		got := configProblem([]byte(tc.in))
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("configProblem(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
