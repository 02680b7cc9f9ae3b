package modelsource

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/testutil"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFSx(t *testing.T) {
	root := t.TempDir()
	cfg := string(qwenConfig(t))
	writeTree(t, root, map[string]string{
		"fs-0123456789abcdef0/fsx1/models/qwen2.5-7b-instruct/config.json":        cfg,
		"fs-0123456789abcdef0/fsx1/models/qwen2.5-7b-instruct/model.safetensors":  "0123456789",
		"fs-0123456789abcdef0/fsx1/models/weights-only/model.safetensors":         "x",
		"fs-0123456789abcdef0/fsx1/models/linked-out/config.json":                 cfg,
		"fs-0123456789abcdef0/fsx1/models/linked-in/config.json":                  cfg,
		"fs-0123456789abcdef0/fsx1/models/linked-in/shared/tokenizer_config.json": "{}",
	})
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.bin": "s", "model/config.json": cfg})
	base := filepath.Join(root, "fs-0123456789abcdef0", "fsx1", "models")
	mustLink := func(target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(filepath.Join(outside, "secret.bin"), filepath.Join(base, "linked-out", "weights.bin"))
	mustLink(filepath.Join(base, "qwen2.5-7b-instruct", "model.safetensors"), filepath.Join(base, "linked-in", "weights.bin"))
	mustLink(filepath.Join(outside, "model"), filepath.Join(base, "escape-dir"))

	f, err := New(Options{CacheDir: t.TempDir(), FSxRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	src := func(loc string) Source {
		return Source{Type: TypeFSx, FileSystemID: "fs-0123456789abcdef0", MountName: "fsx1", Location: loc}
	}
	t.Run("used in place", func(t *testing.T) {
		res, err := f.Fetch(context.Background(), src("/models/qwen2.5-7b-instruct"))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := filepath.EvalSymlinks(filepath.Join(base, "qwen2.5-7b-instruct"))
		if res.Dir != want || res.Files != 2 || res.Bytes != int64(len(cfg)+10) || res.Model != "qwen2.5-7b" {
			t.Fatalf("result %+v; want dir %s, 2 files, %d bytes, model qwen2.5-7b", res, want, len(cfg)+10)
		}
		if entries, _ := os.ReadDir(f.o.CacheDir); len(entries) != 1 || entries[0].Name() != cacheLockFile {
			t.Fatalf("fsx source was copied into the cache: %v (want only its lock file)", entries)
		}
	})
	t.Run("symlink inside the root is fine", func(t *testing.T) {
		res, err := f.Fetch(context.Background(), src("models/linked-in"))
		if err != nil || res.Files != 2 {
			t.Fatalf("result %+v, %v", res, err)
		}
	})
	for _, tt := range []struct {
		name, loc, reason string
		mentions          []string
	}{
		{"missing folder", "models/nope", ReasonNotFound, []string{"fs-0123456789abcdef0", "models/nope", "does not exist"}},
		{"no config.json", "models/weights-only", ReasonNotFound, []string{"no config.json"}},
		{"dot-dot location", "models/../../..", ReasonPathEscape, []string{".."}},
		{"file linking out", "models/linked-out", ReasonPathEscape, []string{"weights.bin", "outside fsxRoot"}},
		{"folder linking out", "models/escape-dir", ReasonPathEscape, []string{"outside fsxRoot"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Fetch(context.Background(), src(tt.loc))
			wantReason(t, err, tt.reason, tt.mentions...)
		})
	}
	t.Run("no fsxRoot configured", func(t *testing.T) {
		g, _ := New(Options{CacheDir: t.TempDir()})
		_, err := g.Fetch(context.Background(), src("models/qwen2.5-7b-instruct"))
		wantReason(t, err, ReasonInvalidSource, "fsxRoot")
	})
}

// fakeHub imitates the two Hugging Face endpoints capstan uses.
type fakeHub struct {
	repo, rev, sha string
	files          map[string]string
	auth           atomic.Value // last Authorization header
	requests       atomic.Int64
	status         int // non-zero: answer every request with it
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.requests.Add(1)
	h.auth.Store(r.Header.Get("Authorization"))
	if h.status != 0 {
		http.Error(w, "nope", h.status)
		return
	}
	switch {
	case r.URL.Path == "/api/models/"+h.repo+"/revision/"+h.rev:
		var sib []string
		for name, body := range h.files {
			sib = append(sib, fmt.Sprintf(`{"rfilename":%q,"size":%d}`, name, len(body)))
		}
		sib = append(sib, `{"rfilename":"model-00001-of-00004.safetensors","size":4976698672}`)
		fmt.Fprintf(w, `{"id":%q,"sha":%q,"siblings":[%s]}`, h.repo, h.sha, strings.Join(sib, ","))
	case strings.HasPrefix(r.URL.Path, "/"+h.repo+"/resolve/"+h.rev+"/"):
		name := strings.TrimPrefix(r.URL.Path, "/"+h.repo+"/resolve/"+h.rev+"/")
		body, ok := h.files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write([]byte(body))
	default:
		http.NotFound(w, r)
	}
}

func TestHuggingFace(t *testing.T) {
	cfg := string(qwenConfig(t))
	hub := &fakeHub{repo: "Qwen/Qwen2.5-7B-Instruct", rev: "main", sha: strings.Repeat("a", 40),
		files: map[string]string{"config.json": cfg, "generation_config.json": `{"top_p":0.8}`, "README.md": "# hi"}}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	src := Source{Type: TypeHuggingFace, HFModelID: "Qwen/Qwen2.5-7B-Instruct"}

	t.Run("downloads config.json and metadata, token sent", func(t *testing.T) {
		f, err := New(Options{CacheDir: t.TempDir(), HuggingFaceEndpoint: srv.URL + "/", HuggingFaceToken: "hf_secret"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Fetch(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(f.o.CacheDir, "huggingface", "Qwen", "Qwen2.5-7B-Instruct", "main")
		if res.Dir != want || res.Model != "qwen2.5-7b" || res.Files != 2 || res.Downloaded != 2 {
			t.Fatalf("result %+v; want dir %s, model qwen2.5-7b, 2 files downloaded", res, want)
		}
		if got := string(readFile(t, filepath.Join(res.Dir, "config.json"))); got != cfg {
			t.Fatal("config.json differs")
		}
		if _, err := os.Stat(filepath.Join(res.Dir, "README.md")); err == nil {
			t.Fatal("README.md is not model metadata and should not be downloaded")
		}
		if !strings.Contains(string(readFile(t, filepath.Join(res.Dir, ".capstan-hf-files.json"))), "model-00001-of-00004.safetensors") {
			t.Fatal("weights listing not recorded")
		}
		if got := hub.auth.Load(); got != "Bearer hf_secret" {
			t.Fatalf("Authorization = %v", got)
		}
		again, err := f.Fetch(context.Background(), src)
		if err != nil || again.Downloaded != 0 || again.Files != 2 {
			t.Fatalf("re-fetch at the same commit = %+v, %v; want nothing downloaded", again, err)
		}
	})
	t.Run("pinned commit in the cache needs no hub", func(t *testing.T) {
		pinned := &fakeHub{repo: hub.repo, rev: strings.Repeat("b", 40), sha: strings.Repeat("b", 40), files: hub.files}
		ps := httptest.NewServer(pinned)
		f, _ := New(Options{CacheDir: t.TempDir(), HuggingFaceEndpoint: ps.URL})
		s := src
		s.HFRevision = pinned.rev
		if _, err := f.Fetch(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		ps.Close() // now the hub is gone
		res, err := f.Fetch(context.Background(), s)
		if err != nil || res.Files != 2 {
			t.Fatalf("cached pinned revision: %+v, %v", res, err)
		}
	})
	t.Run("unknown repo is NotFound", func(t *testing.T) {
		f, _ := New(Options{CacheDir: t.TempDir(), HuggingFaceEndpoint: srv.URL})
		_, err := f.Fetch(context.Background(), Source{Type: TypeHuggingFace, HFModelID: "acme/missing"})
		wantReason(t, err, ReasonNotFound, "acme/missing")
	})
	t.Run("gated repo is AccessDenied mentioning HF_TOKEN", func(t *testing.T) {
		gated := httptest.NewServer(&fakeHub{status: http.StatusUnauthorized})
		defer gated.Close()
		f, _ := New(Options{CacheDir: t.TempDir(), HuggingFaceEndpoint: gated.URL})
		_, err := f.Fetch(context.Background(), src)
		wantReason(t, err, ReasonAccessDenied, "HF_TOKEN")
	})
	t.Run("offline is Unreachable with advice", func(t *testing.T) {
		port := testutil.FreePort(t) // nothing listens there
		f, _ := New(Options{CacheDir: t.TempDir(), HuggingFaceEndpoint: "http://127.0.0.1:" + strconv.Itoa(port)})
		_, err := f.Fetch(context.Background(), src)
		wantReason(t, err, ReasonUnreachable, "could not reach the Hugging Face hub", "modelSourceType: s3", "fsx")
	})
}

func TestJumpStart(t *testing.T) {
	f, err := New(Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ id, want string }{
		{"deepseek-llm-r1-distill-qwen-1-5b", "deepseek-llm-r1-distill-qwen-1-5b"},
		{"meta-textgeneration-llama-3-1-8b-instruct", "llama-3.1-8b"},
		{"huggingface-llm-qwen2-5-7b-instruct", "qwen2.5-7b"},
	} {
		t.Run(tt.id, func(t *testing.T) {
			res, err := f.Fetch(context.Background(), Source{Type: TypeJumpStart, HubName: "SageMakerPublicHub", JumpStartModelID: tt.id, JumpStartVersion: "2.0.4"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Model != tt.want || res.Files != 1 {
				t.Fatalf("result %+v, want model %s", res, tt.want)
			}
			got, err := catalog.ModelFromHFConfig(res.Model, readFile(t, filepath.Join(res.Dir, "config.json")))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := catalog.Default().Model(tt.want)
			if got.KVBytesPerToken() != want.KVBytesPerToken() || got.Layers != want.Layers || !within(got.Params, want.Params, 2) {
				t.Fatalf("generated config.json reads as %+v, catalog has %+v", got, want)
			}
		})
	}
	t.Run("unknown id lists close ids", func(t *testing.T) {
		_, err := f.Fetch(context.Background(), Source{Type: TypeJumpStart, JumpStartModelID: "deepseek-llm-r1-distill-qwen-7b"})
		wantReason(t, err, ReasonNotFound, "deepseek-llm-r1-distill-qwen-7b", "did you mean", "deepseek-llm-r1-distill-qwen-1-5b")
	})
	t.Run("private hub", func(t *testing.T) {
		_, err := f.Fetch(context.Background(), Source{Type: TypeJumpStart, HubName: "MyHub", JumpStartModelID: "deepseek-llm-r1-distill-qwen-1-5b"})
		wantReason(t, err, ReasonNotFound, "MyHub")
	})
}

func within(got, want int64, pct float64) bool {
	d := float64(got - want)
	return d <= pct/100*float64(want) && -d <= pct/100*float64(want)
}

func TestFromManifest(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       Source
		wantReason string
	}{
		{"IEC s3 (examples.md)", `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: demo}
spec:
  modelName: Llama-3.1-8B-Instruct
  instanceType: ml.g5.24xlarge
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: llama-3.1-8b-instruct, prefetchEnabled: true}
  worker:
    image: lmcache/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: model-weights}
    resources: {limits: {nvidia.com/gpu: "1"}}
`, Source{Type: TypeS3, Bucket: "models", Region: "us-east-1", Location: "llama-3.1-8b-instruct", Prefetch: true, Field: "spec.modelSourceConfig.s3Storage"}, ""},
		{"IEC fsx", `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: fsx}
spec:
  modelName: deepseek15b
  instanceType: ml.g5.8xlarge
  modelSourceConfig: {modelSourceType: fsx, fsxStorage: {fileSystemId: fs-0abc, mountName: fsx1}, modelLocation: deepseek-1.5b}
  worker:
    image: vllm
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: model-weights}
    resources: {limits: {nvidia.com/gpu: "1"}}
`, Source{Type: TypeFSx, FileSystemID: "fs-0abc", MountName: "fsx1", Location: "deepseek-1.5b", Field: "spec.modelSourceConfig.fsxStorage"}, ""},
		{"IEC huggingface", `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: hf}
spec:
  modelName: qwen
  instanceType: ml.g5.8xlarge
  modelSourceConfig: {modelSourceType: huggingface, huggingFaceModel: {modelId: Qwen/Qwen2.5-7B-Instruct}}
  worker:
    image: vllm
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: model-weights}
    resources: {limits: {nvidia.com/gpu: "1"}}
`, Source{Type: TypeHuggingFace, HFModelID: "Qwen/Qwen2.5-7B-Instruct", Field: "spec.modelSourceConfig.huggingFaceModel"}, ""},
		{"JSM (examples.md)", `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: deepseek}
spec:
  sageMakerEndpoint: {name: deepseek}
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b, modelVersion: 2.0.4}
  server: {instanceType: ml.p4d.24xlarge}
`, Source{Type: TypeJumpStart, HubName: "SageMakerPublicHub", JumpStartModelID: "deepseek-llm-r1-distill-qwen-1-5b", JumpStartVersion: "2.0.4", Field: "spec.model"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := manifest.Load([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("manifest.Load: %v", err)
			}
			got, err := FromManifest(objs[0])
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("FromManifest = %+v, want %+v", got, tt.want)
			}
		})
	}
	// Hand-built objects reach the error paths validation would normally stop.
	for _, tt := range []struct {
		name, reason, mention string
		obj                   manifest.Object
	}{
		{"kubernetesVolume", ReasonInvalidSource, "kubernetesVolume", &manifest.InferenceEndpointConfig{Spec: manifest.InferenceEndpointConfigSpec{
			ModelSourceConfig: &manifest.ModelSourceConfig{ModelSourceType: manifest.SourceKubernetesVolume}}}},
		{"s3 without s3Storage", ReasonInvalidSource, "s3Storage", &manifest.InferenceEndpointConfig{Spec: manifest.InferenceEndpointConfigSpec{
			ModelSourceConfig: &manifest.ModelSourceConfig{ModelSourceType: manifest.SourceS3}}}},
		{"escaping modelLocation", ReasonPathEscape, "..", &manifest.InferenceEndpointConfig{Spec: manifest.InferenceEndpointConfigSpec{
			ModelSourceConfig: &manifest.ModelSourceConfig{ModelSourceType: manifest.SourceS3, ModelLocation: "a/../../b",
				S3Storage: &manifest.S3Storage{BucketName: "models", Region: "us-east-1"}}}}},
		{"JSM without model", ReasonInvalidSource, "spec.model", &manifest.JumpStartModel{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromManifest(tt.obj)
			wantReason(t, err, tt.reason, tt.mention)
		})
	}
}

func TestFetchRejectsInvalidSources(t *testing.T) {
	f, _ := New(Options{CacheDir: t.TempDir()})
	for _, tt := range []struct {
		name string
		src  Source
	}{
		{"unknown type", Source{Type: "ftp"}},
		{"bad bucket", Source{Type: TypeS3, Bucket: "Bad_Bucket"}},
		{"bad hf id", Source{Type: TypeHuggingFace, HFModelID: "../etc"}},
		{"bad revision", Source{Type: TypeHuggingFace, HFModelID: "a/b", HFRevision: "../x"}},
		{"bad fsx id", Source{Type: TypeFSx, FileSystemID: ".."}},
		{"empty jumpstart id", Source{Type: TypeJumpStart}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Fetch(context.Background(), tt.src)
			wantReason(t, err, ReasonInvalidSource)
		})
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without CacheDir must fail")
	}
}
