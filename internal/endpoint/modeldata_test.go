package endpoint

import (
	"github.com/capstan-dev/capstan/internal/engines"

	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/runtime"
)

func TestContainerModelData(t *testing.T) {
	ds := func(uri, typ, comp string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"S3DataSource": map[string]string{"S3Uri": uri, "S3DataType": typ, "CompressionType": comp}})
		return b
	}
	tests := []struct {
		name    string
		c       Container
		want    modelData
		wantErr string
	}{
		{"url", Container{ModelDataUrl: "s3://b/m.tar.gz"}, modelData{"s3://b/m.tar.gz", "", "PrimaryContainer.ModelDataUrl"}, ""},
		{"prefix", Container{ModelDataSource: ds("s3://b/m/", "S3Prefix", "None")}, modelData{"s3://b/m/", "None", "PrimaryContainer.ModelDataSource.S3DataSource.S3Uri"}, ""},
		{"object gzip", Container{ModelDataSource: ds("s3://b/m.tar.gz", "S3Object", "Gzip")}, modelData{"s3://b/m.tar.gz", "Gzip", "PrimaryContainer.ModelDataSource.S3DataSource.S3Uri"}, ""},
		{"source wins", Container{ModelDataUrl: "s3://b/x.tar.gz", ModelDataSource: ds("s3://b/m/", "S3Prefix", "None")}, modelData{"s3://b/m/", "None", "PrimaryContainer.ModelDataSource.S3DataSource.S3Uri"}, ""},
		{"none", Container{Image: "x"}, modelData{}, ""},
		{"prefix without slash", Container{ModelDataSource: ds("s3://b/m", "S3Prefix", "None")}, modelData{}, "S3Uri: s3://b/m must end with"},
		{"prefix gzip", Container{ModelDataSource: ds("s3://b/m/", "S3Prefix", "Gzip")}, modelData{}, "S3Prefix with CompressionType Gzip is not supported"},
		{"bad type", Container{ModelDataSource: ds("s3://b/m/", "Folder", "None")}, modelData{}, "S3DataType: \"Folder\""},
		{"bad compression", Container{ModelDataSource: ds("s3://b/m/", "S3Object", "Zip")}, modelData{}, "CompressionType: \"Zip\""},
		{"no uri", Container{ModelDataSource: ds("", "S3Prefix", "None")}, modelData{}, "S3Uri: required"},
		{"not s3", Container{ModelDataSource: json.RawMessage(`{"Other":{}}`)}, modelData{}, "only S3DataSource"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := containerModelData(&tc.c, "PrimaryContainer")
			if tc.wantErr != "" {
				if e, ok := AsError(err); !ok || e.Kind != ErrInvalid || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want an invalid-input error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCatalogPresetAndJumpStartArtifacts(t *testing.T) {
	cat := catalog.Default()
	presets := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HF_MODEL_ID": "Qwen/Qwen2.5-7B-Instruct"}, "qwen2.5-7b"},
		{map[string]string{"SM_MODEL_ID": "huggingface-llm-gemma-2-9b-instruct"}, "gemma-2-9b"},
		{map[string]string{"HF_MODEL_ID": "/opt/ml/model", "SM_MODEL_ID": "llama-3.2-1b"}, "llama-3.2-1b"},
		{map[string]string{"HF_MODEL_ID": "/opt/ml/model"}, ""},
		{map[string]string{"HF_MODEL_ID": "acme/my-finetune"}, ""},
	}
	for _, p := range presets {
		got, ok := catalogPreset(cat, &Container{Environment: p.env})
		if got != p.want || ok != (p.want != "") {
			t.Errorf("catalogPreset(%v) = %q, %v; want %q", p.env, got, ok, p.want)
		}
	}
	arts := []struct{ uri, want string }{
		{"s3://jumpstart-cache-prod-us-west-2/meta-textgeneration/meta-textgeneration-llama-3-2-3b-instruct/artifacts/inference-prepack/v1.0.0/", "llama-3.2-3b"},
		{"s3://jumpstart-private-cache-prod-us-east-1/huggingface-llm/huggingface-llm-mixtral-8x7b-instruct/artifacts/", "mixtral-8x7b"},
		{"s3://my-bucket/meta-textgeneration-llama-3-2-3b-instruct/model.tar.gz", ""}, // a user's bucket is fetched
		{"s3://jumpstart-cache-prod-us-west-2/unknown/thing/", ""},
	}
	for _, a := range arts {
		if got, ok := jumpStartArtifacts(cat, a.uri); got != a.want || ok != (a.want != "") {
			t.Errorf("jumpStartArtifacts(%s) = %q, %v; want %q", a.uri, got, ok, a.want)
		}
	}
	// SM_MODEL_ID accepts a JumpStart id in ResolveModel too.
	if id, err := ResolveModel(cat, Model{Name: "m", PrimaryContainer: &Container{Environment: map[string]string{"SM_MODEL_ID": "deepseek-llm-r1-distill-llama-8b"}}}); err != nil || id != "deepseek-r1-distill-llama-8b" {
		t.Fatalf("ResolveModel(SM_MODEL_ID JumpStart id) = %q, %v", id, err)
	}
}

// fakeSource is a ModelSource answering from a table of URIs.
type fakeSource struct {
	calls int
	dirs  map[string][2]string // uri → dir, catalog model
}

type fakeProblem struct{ kind, detail string }

func (p *fakeProblem) Error() string                      { return p.kind + ": " + p.detail }
func (p *fakeProblem) ModelDataProblem() (string, string) { return p.kind, p.detail }

func (f *fakeSource) FetchModelData(_ context.Context, uri, _ string, _ engines.ModelFormat) (string, string, error) {
	f.calls++
	if d, ok := f.dirs[uri]; ok {
		return d[0], d[1], nil
	}
	if strings.Contains(uri, "noconfig") {
		return "", "", &fakeProblem{ProblemNoConfig, uri + " has no config.json"}
	}
	return "", "", &fakeProblem{ProblemNotFound, "object key does not exist"}
}

// CreateModel fetches the artifacts, refuses bad ones storing nothing, and
// the replicas run the fetched folder (ModelDir) under the model's name.
func TestCreateModelFetchesModelData(t *testing.T) {
	e := newEnv(t, true, 4)
	src := &fakeSource{dirs: map[string][2]string{
		"s3://b/custom.tar.gz": {"/cache/s3-archive/b/custom.tar.gz", ""},
		"s3://b/qwen/":         {"/cache/s3/b/qwen", "qwen2.5-7b"},
	}}
	e.svc.SetModelSource(src, 0)
	create := func(name, url string, env map[string]string) error {
		_, err := e.svc.CreateModel(e.ctx, Model{Name: name, PrimaryContainer: &Container{ModelDataUrl: url, Environment: env}})
		return err
	}
	for _, tc := range []struct{ url, want string }{
		{"s3://b/noconfig.tar.gz", "PrimaryContainer.ModelDataUrl: s3://b/noconfig.tar.gz has no config.json"},
		{"s3://b/absent.tar.gz", "PrimaryContainer.ModelDataUrl: Could not find model data at s3://b/absent.tar.gz (object key does not exist)."},
	} {
		err := create("bad", tc.url, nil)
		if ae, ok := AsError(err); !ok || ae.Kind != ErrInvalid || ae.Message != tc.want {
			t.Fatalf("CreateModel(%s) = %v, want ErrInvalid %q", tc.url, err, tc.want)
		}
		if _, err := e.svc.GetModel(e.ctx, "bad"); !IsNotFound(err) {
			t.Fatalf("refused model stored: %v", err)
		}
	}
	if err := create("custom", "s3://b/custom.tar.gz", map[string]string{"HF_MODEL_ID": "/opt/ml/model"}); err != nil {
		t.Fatal(err)
	}
	if err := create("qwen", "s3://b/qwen/", nil); err != nil {
		t.Fatal(err)
	}
	// A catalog model in the environment wins: nothing is fetched.
	before := src.calls
	if err := create("preset", "s3://b/absent.tar.gz", map[string]string{"SM_MODEL_ID": "huggingface-llm-gemma-2-2b-instruct"}); err != nil || src.calls != before {
		t.Fatalf("preset: %v, %d fetches", err, src.calls-before)
	}
	// A duplicate name is refused before any fetch.
	if err := create("custom", "s3://b/custom.tar.gz", nil); err == nil || src.calls != before {
		t.Fatalf("duplicate: %v, %d fetches", err, src.calls-before)
	}

	want := map[string]struct{ model, dir string }{
		"custom": {"custom", "/cache/s3-archive/b/custom.tar.gz"},
		"qwen":   {"qwen2.5-7b", "/cache/s3/b/qwen"},
		"preset": {"gemma-2-2b", ""},
	}
	for name, w := range want {
		e.config("c-"+name, name, "ml.g5.xlarge", 1)
		if _, err := e.svc.CreateEndpoint(e.ctx, "ep-"+name, "c-"+name, nil); err != nil {
			t.Fatal(err)
		}
		e.reconcile("ep-" + name)
		var spec *runtime.ReplicaSpec
		for _, s := range e.rt.Starts() {
			if s.Endpoint == "ep-"+name {
				spec = &s
			}
		}
		if spec == nil || spec.Model != w.model || spec.ModelDir != w.dir {
			t.Fatalf("%s: replica spec %+v, want model %q dir %q", name, spec, w.model, w.dir)
		}
	}
}
