package modelsource

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/testutil"
)

func qwenConfig(t testing.TB) []byte {
	t.Helper()
	return readFile(t, filepath.Join("..", "catalog", "testdata", "hfconfig", "Qwen2.5-7B-Instruct.json"))
}

func newS3Fetcher(t testing.TB, endpoint string) *Fetcher {
	t.Helper()
	f, err := New(Options{CacheDir: t.TempDir(), S3Endpoint: endpoint, S3AccessKeyID: "test", S3SecretAccessKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// countingS3 counts GetObject calls and can hold them until released.
type countingS3 struct {
	s3API
	gets atomic.Int64
	gate chan struct{}
}

func (c *countingS3) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.gets.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	return c.s3API.GetObject(ctx, in, o...)
}

func wantReason(t *testing.T, err error, reason string, mentions ...string) {
	t.Helper()
	var se *SourceError
	if !errors.As(err, &se) || se.Reason != reason {
		t.Fatalf("err = %v, want a SourceError with reason %s", err, reason)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("err = %v, want it to mention %q", err, m)
		}
	}
}

// One moto server for every S3 case: starting it takes about a second.
func TestS3AgainstMoto(t *testing.T) {
	endpoint := StartMotoS3(t)
	c := testS3(t, endpoint)
	mustBucket(t, c, "models")
	cfg := qwenConfig(t)
	files := map[string][]byte{
		"config.json":                      cfg,
		"generation_config.json":           []byte(`{"max_new_tokens": 2048}`),
		"model-00001-of-00002.safetensors": weights(300_000, 1),
		"model-00002-of-00002.safetensors": weights(200_000, 2),
		"tokenizer/tokenizer.json":         []byte(`{"version":"1.0"}`),
	}
	for k, v := range files {
		// Shards carry a SHA-256 checksum, the rest only an MD5 ETag.
		put(t, c, "models", "qwen2.5-7b-instruct/"+k, v, strings.HasSuffix(k, ".safetensors"))
	}
	put(t, c, "models", "unrelated/config.json", []byte(`{}`), false)
	src := Source{Type: TypeS3, Bucket: "models", Region: "us-east-1", Location: "qwen2.5-7b-instruct"}

	t.Run("fetch, verify, skip unchanged, follow changes", func(t *testing.T) {
		f := newS3Fetcher(t, endpoint)
		res, err := f.Fetch(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		wantDir := filepath.Join(f.o.CacheDir, "s3", "models", "qwen2.5-7b-instruct")
		if res.Dir != wantDir || res.Files != len(files) || res.Downloaded != len(files) || res.Model != "qwen2.5-7b" {
			t.Fatalf("result %+v; want dir %s, %d files, all downloaded, model qwen2.5-7b", res, wantDir, len(files))
		}
		var total int64
		for k, v := range files {
			total += int64(len(v))
			if got := readFile(t, filepath.Join(res.Dir, filepath.FromSlash(k))); !bytes.Equal(got, v) {
				t.Fatalf("%s differs from the object (%d vs %d bytes)", k, len(got), len(v))
			}
		}
		if res.Bytes != total {
			t.Fatalf("Bytes = %d, want %d", res.Bytes, total)
		}
		if _, err := os.Stat(filepath.Join(f.o.CacheDir, "s3", "models", "unrelated")); err == nil {
			t.Fatal("an object outside the prefix was fetched")
		}
		st := readState(res.Dir)
		if v := st.Files["model-00001-of-00002.safetensors"].Verified; v != "sha256" {
			t.Errorf("shard verified by %q, want sha256", v)
		}
		if v := st.Files["generation_config.json"].Verified; v != "md5" {
			t.Errorf("generation_config.json verified by %q, want md5 (ETag)", v)
		}
		if _, err := catalog.ModelFromHFConfig(res.Model, readFile(t, filepath.Join(res.Dir, "config.json"))); err != nil {
			t.Fatalf("fetched config.json does not read: %v", err)
		}

		again, err := f.Fetch(context.Background(), src)
		if err != nil || again.Downloaded != 0 || again.Files != len(files) || again.Dir != res.Dir {
			t.Fatalf("re-fetch = %+v, %v; want nothing downloaded", again, err)
		}

		put(t, c, "models", "qwen2.5-7b-instruct/generation_config.json", []byte(`{"max_new_tokens": 1}`), false)
		del(t, c, "models", "qwen2.5-7b-instruct/tokenizer/tokenizer.json")
		t.Cleanup(func() {
			put(t, c, "models", "qwen2.5-7b-instruct/generation_config.json", files["generation_config.json"], false)
			put(t, c, "models", "qwen2.5-7b-instruct/tokenizer/tokenizer.json", files["tokenizer/tokenizer.json"], false)
		})
		changed, err := f.Fetch(context.Background(), src)
		if err != nil || changed.Downloaded != 1 || changed.Files != len(files)-1 {
			t.Fatalf("fetch after a change = %+v, %v; want 1 download of %d files", changed, err, len(files)-1)
		}
		if got := string(readFile(t, filepath.Join(res.Dir, "generation_config.json"))); got != `{"max_new_tokens": 1}` {
			t.Fatalf("changed object not refreshed: %s", got)
		}
		if _, err := os.Stat(filepath.Join(res.Dir, "tokenizer", "tokenizer.json")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("deleted object still in the cache (stat err %v)", err)
		}
		leftovers, _ := filepath.Glob(filepath.Join(res.Dir, partPrefix+"*"))
		if len(leftovers) != 0 {
			t.Fatalf("temp files left behind: %v", leftovers)
		}
	})

	t.Run("a damaged local file is downloaded again", func(t *testing.T) {
		f := newS3Fetcher(t, endpoint)
		res, err := f.Fetch(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		shard := filepath.Join(res.Dir, "model-00002-of-00002.safetensors")
		if err := os.WriteFile(shard, []byte("truncated"), 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := f.Fetch(context.Background(), src)
		if err != nil || again.Downloaded != 1 {
			t.Fatalf("re-fetch = %+v, %v; want the damaged shard downloaded again", again, err)
		}
		if !bytes.Equal(readFile(t, shard), files["model-00002-of-00002.safetensors"]) {
			t.Fatal("shard not restored")
		}
	})

	t.Run("concurrent fetches share one download", func(t *testing.T) {
		f := newS3Fetcher(t, endpoint)
		client, err := f.s3Client(context.Background(), "us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		cs := &countingS3{s3API: client, gate: make(chan struct{})}
		f.s3["us-east-1"] = cs
		const callers = 5
		results := make([]Result, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() { defer wg.Done(); results[i], errs[i] = f.Fetch(context.Background(), src) }()
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			f.mu.Lock()
			c := f.inflight[src.key()]
			w := 0
			if c != nil {
				w = c.waiters
			}
			f.mu.Unlock()
			if w == callers-1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d callers joined the fetch in progress", w)
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(cs.gate)
		wg.Wait()
		for i := range callers {
			if errs[i] != nil || results[i] != results[0] {
				t.Fatalf("caller %d: %+v, %v; want the shared result %+v", i, results[i], errs[i], results[0])
			}
		}
		if got := cs.gets.Load(); got != int64(len(files)) {
			t.Fatalf("%d GetObject calls for %d callers; want one per object (%d)", got, callers, len(files))
		}
	})

	t.Run("the fetched folder serves through the engine", func(t *testing.T) {
		res, err := newS3Fetcher(t, endpoint).Fetch(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p := testutil.Start(t, ctx, testutil.CapstanBinary(t), "engine", "sim", "--model-dir", res.Dir,
			"--gpu", "h100", "--port", "0", "--time-scale", "0")
		url := strings.TrimSpace(strings.TrimPrefix(p.WaitLine(t, "listening on http://", 20*time.Second), "listening on "))
		resp, err := http.Post(url+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"qwen2.5-7b-instruct","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"model":"qwen2.5-7b-instruct"`) {
			t.Fatalf("chat through the fetched folder: %d %s", resp.StatusCode, body)
		}
		models, err := http.Get(url + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer models.Body.Close()
		mb, _ := io.ReadAll(models.Body)
		// The folder name is a catalog alias, so the KV hash root is the catalog id.
		if !strings.Contains(string(mb), `"root":"qwen2.5-7b"`) || !strings.Contains(string(mb), `"max_model_len":32768`) {
			t.Fatalf("/v1/models = %s", mb)
		}
	})
	t.Run("missing prefix is NotFound naming bucket and prefix", func(t *testing.T) {
		_, err := newS3Fetcher(t, endpoint).Fetch(context.Background(), Source{Type: TypeS3, Bucket: "models", Location: "no-such-model"})
		wantReason(t, err, ReasonNotFound, `"models"`, "no-such-model/")
	})
	t.Run("missing bucket is NotFound naming the bucket", func(t *testing.T) {
		_, err := newS3Fetcher(t, endpoint).Fetch(context.Background(), Source{Type: TypeS3, Bucket: "no-such-bucket", Location: "m"})
		wantReason(t, err, ReasonNotFound, `"no-such-bucket"`)
	})
	t.Run("prefix without config.json is NotFound naming the key", func(t *testing.T) {
		put(t, c, "models", "weights-only/model.safetensors", weights(10, 3), false)
		_, err := newS3Fetcher(t, endpoint).Fetch(context.Background(), Source{Type: TypeS3, Bucket: "models", Location: "weights-only"})
		wantReason(t, err, ReasonNotFound, "weights-only/config.json", `"models"`)
	})
	t.Run("key with .. is refused", func(t *testing.T) {
		mustBucket(t, c, "evil")
		put(t, c, "evil", "m/config.json", cfg, false)
		put(t, c, "evil", "m/../../escape.txt", []byte("x"), false)
		f := newS3Fetcher(t, endpoint)
		_, err := f.Fetch(context.Background(), Source{Type: TypeS3, Bucket: "evil", Location: "m"})
		wantReason(t, err, ReasonPathEscape, "m/../../escape.txt")
		if _, err := os.Stat(filepath.Join(f.o.CacheDir, "escape.txt")); err == nil {
			t.Fatal("escaping key was written")
		}
	})
	t.Run("absolute key is refused", func(t *testing.T) {
		mustBucket(t, c, "abs")
		put(t, c, "abs", "config.json", cfg, false)
		put(t, c, "abs", "/etc/passwd", []byte("x"), false)
		_, err := newS3Fetcher(t, endpoint).Fetch(context.Background(), Source{Type: TypeS3, Bucket: "abs"})
		wantReason(t, err, ReasonPathEscape, "/etc/passwd")
	})
	t.Run("symlink planted in the cache is refused", func(t *testing.T) {
		f := newS3Fetcher(t, endpoint)
		outside := t.TempDir()
		if err := os.MkdirAll(filepath.Join(f.o.CacheDir, "s3", "models"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(f.o.CacheDir, "s3", "models", "qwen2.5-7b-instruct")); err != nil {
			t.Fatal(err)
		}
		_, err := f.Fetch(context.Background(), src)
		wantReason(t, err, ReasonPathEscape, "symbolic link")
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Fatalf("files written through the symlink: %v", entries)
		}
	})
	t.Run("wrong credentials are AccessDenied or rejected clearly", func(t *testing.T) {
		// moto accepts any credentials unless auth is enforced, so this only
		// checks the mapping of a real S3 error code.
		err := s3Error(&fakeAPIError{code: "InvalidAccessKeyId"}, "models", "k", "s3://models/k")
		wantReason(t, err, ReasonAccessDenied, "s3://models/k")
	})
}

type fakeAPIError struct{ code string }

func (e *fakeAPIError) Error() string                 { return e.code }
func (e *fakeAPIError) ErrorCode() string             { return e.code }
func (e *fakeAPIError) ErrorMessage() string          { return e.code }
func (e *fakeAPIError) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

func TestS3UnreachableEndpoint(t *testing.T) {
	port := testutil.FreePort(t) // nothing listens there
	f, err := New(Options{CacheDir: t.TempDir(), S3Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), S3AccessKeyID: "a", S3SecretAccessKey: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = f.Fetch(ctx, Source{Type: TypeS3, Bucket: "models", Location: "m"})
	wantReason(t, err, ReasonUnreachable, "s3://models/m/")
}

func TestVerifyObject(t *testing.T) {
	body := []byte("model weights")
	sum := sha256.Sum256(body)
	md := md5.Sum(body)
	good64 := base64.StdEncoding.EncodeToString(sum[:])
	goodMD5 := `"` + hex.EncodeToString(md[:]) + `"`
	tests := []struct {
		name    string
		out     s3.GetObjectOutput
		size    int64
		want    string
		wantErr string
	}{
		{"sha256 ok", s3.GetObjectOutput{ChecksumSHA256: aws.String(good64), ETag: aws.String(goodMD5)}, 13, "sha256", ""},
		{"sha256 mismatch", s3.GetObjectOutput{ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(make([]byte, 32)))}, 13, "", "SHA-256"},
		{"md5 etag ok", s3.GetObjectOutput{ETag: aws.String(goodMD5)}, 13, "md5", ""},
		{"md5 etag mismatch", s3.GetObjectOutput{ETag: aws.String(`"00000000000000000000000000000000"`)}, 13, "", "MD5"},
		{"multipart etag is not an md5", s3.GetObjectOutput{ETag: aws.String(`"0123456789abcdef0123456789abcdef-3"`)}, 13, "size", ""},
		{"composite sha256 skipped", s3.GetObjectOutput{ChecksumSHA256: aws.String("abc-2"), ETag: aws.String(goodMD5)}, 13, "md5", ""},
		{"short body", s3.GetObjectOutput{ETag: aws.String(goodMD5)}, 14, "", "listed size 14"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh, m := sha256.New(), md5.New()
			sh.Write(body)
			m.Write(body)
			got, err := verifyObject(&tt.out, s3Object{size: tt.size}, int64(len(body)), sh, m)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("verifyObject = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSafeRel(t *testing.T) {
	for _, tt := range []struct {
		rel string
		ok  bool
	}{
		{"config.json", true}, {"sub/dir/file.bin", true},
		{"../x", false}, {"a/../../x", false}, {"/abs", false}, {"a//b", false}, {"./a", false},
		{"a\\b", false}, {stateFile, false}, {"d/" + partPrefix + "1", false}, {"", false},
	} {
		t.Run(tt.rel, func(t *testing.T) {
			if err := safeRel(tt.rel); (err == nil) != tt.ok {
				t.Fatalf("safeRel(%q) = %v, want ok=%v", tt.rel, err, tt.ok)
			}
		})
	}
}
