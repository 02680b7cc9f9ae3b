package endpoint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
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
