package sim

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// tinyConfig is a made-up model that is in no catalog: the engine must take
// every number from config.json.
const tinyConfig = `{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
  "intermediate_size": 2816, "vocab_size": 32000, "max_position_embeddings": 8192,
  "torch_dtype": "bfloat16", "tie_word_embeddings": true
}`

func writeModelDir(t *testing.T, name, config string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readCatalogConfig(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "catalog", "testdata", "hfconfig", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResolveModelFromDir(t *testing.T) {
	qwen := readCatalogConfig(t, "Qwen2.5-7B-Instruct.json")
	withName := strings.Replace(tinyConfig, `"model_type"`, `"_name_or_path": "acme/tiny-chat", "model_type"`, 1)
	withLocalPath := strings.Replace(tinyConfig, `"model_type"`, `"_name_or_path": "/home/me/ckpt/step-100", "model_type"`, 1)
	tests := []struct {
		name, folder, config, flagModel string
		wantID, wantServed              string
		wantLayers                      int
	}{
		{"folder name, not in catalog", "tiny-model", tinyConfig, "", "tiny-model", "tiny-model", 8},
		{"folder name is a catalog alias", "Qwen2.5-7B-Instruct", qwen, "", "qwen2.5-7b", "Qwen2.5-7B-Instruct", 28},
		{"_name_or_path wins over folder", "some-folder", withName, "", "acme/tiny-chat", "acme/tiny-chat", 8},
		{"local _name_or_path ignored", "my-ckpt", withLocalPath, "", "my-ckpt", "my-ckpt", 8},
		{"--model names it, architecture still from config.json", "x", tinyConfig, "llama-3.1-8b", "llama-3.1-8b", "llama-3.1-8b", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeModelDir(t, tt.folder, tt.config)
			m, served, err := resolveModel(catalog.Default(), Options{Model: tt.flagModel, ModelDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != tt.wantID || served != tt.wantServed || m.Layers != tt.wantLayers {
				t.Fatalf("got id %q served %q layers %d; want %q %q %d", m.ID, served, m.Layers, tt.wantID, tt.wantServed, tt.wantLayers)
			}
		})
	}
}

func TestModelDirErrors(t *testing.T) {
	empty := t.TempDir()
	bad := writeModelDir(t, "bad", `{"hidden_size": 1024}`)
	for _, tt := range []struct{ name, dir, want string }{
		{"no config.json", empty, "no config.json"},
		{"incomplete config.json", bad, "num_hidden_layers is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			o.Model, o.ModelDir = "", tt.dir
			_, err := NewEngine(o, Deps{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--model-dir") {
				t.Fatalf("err = %v; want --model-dir and %q", err, tt.want)
			}
		})
	}
	o := testOptions()
	o.Model = ""
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--model-dir") {
		t.Fatalf("no --model and no --model-dir: err = %v", err)
	}
}

// The KV cache is sized from config.json: the tiny model's KV bytes per
// token (2 × 8 layers × 4 KV heads × 64 × 2 B = 8 KiB) leave far more blocks
// on the same GPU than Llama-3.1-8B's 128 KiB.
func TestModelDirSizesKVCache(t *testing.T) {
	o := testOptions()
	o.Model, o.ModelDir = "", writeModelDir(t, "tiny", tinyConfig)
	tiny := newTestEngine(t, o, Deps{})
	if got := tiny.Model().KVBytesPerToken(); got != 8192 {
		t.Fatalf("KVBytesPerToken = %d, want 8192", got)
	}
	ref := newTestEngine(t, testOptions(), Deps{})
	if tiny.NumGPUBlocks() <= 10*ref.NumGPUBlocks() {
		t.Fatalf("tiny model has %d blocks, llama-3.1-8b %d: KV cache not sized from config.json", tiny.NumGPUBlocks(), ref.NumGPUBlocks())
	}
	if tiny.MaxModelLen() != 8192 {
		t.Fatalf("MaxModelLen = %d, want config.json's 8192", tiny.MaxModelLen())
	}
}

// The real binary serves a folder that holds nothing but a config.json.
func TestProcessModelDirServesChat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := writeModelDir(t, "tiny-chat-model", tinyConfig)
	bin := testutil.CapstanBinary(t)
	p := testutil.Start(t, ctx, bin, "engine", "sim", "--model-dir", dir, "--gpu", "l4", "--port", "0", "--time-scale", "0")
	line := p.WaitLine(t, "listening on http://", 20*time.Second)
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))

	out := chatOnce(t, url, "hello from a model folder")
	var resp struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Model != "tiny-chat-model" || len(resp.Choices) != 1 || resp.Usage.CompletionTokens == 0 {
		t.Fatalf("chat response %s", out)
	}

	r, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if !strings.Contains(string(b), `"max_model_len":8192`) || !strings.Contains(string(b), `"id":"tiny-chat-model"`) {
		t.Fatalf("/v1/models = %s; want the folder's name and config.json's context length", b)
	}
}

// The weights' safetensors headers, when present and readable, give the
// parameter count (so weight memory and decode speed); unreadable ones
// leave the count derived from config.json.
func TestModelDirSafetensorsHeaders(t *testing.T) {
	fromConfig, err := catalog.ModelFromHFConfig("tiny", []byte(tinyConfig))
	if err != nil {
		t.Fatal(err)
	}
	stub := func(t *testing.T, dir, name, header string, junk bool) {
		t.Helper()
		var b []byte
		if junk {
			b = []byte("\xff\xff\xff\xff\xff\xff\xff\x7fnot safetensors")
		} else {
			b = binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
			b = append(b, header...)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		files      map[string]string // name → header ("" = junk bytes)
		wantParams int64
	}{
		{"no weights", nil, fromConfig.Params},
		// Header-only stubs of a 2-shard checkpoint: 3e9 + 1e9 parameters.
		{"headers", map[string]string{
			"model-00001-of-00002.safetensors": `{"w":{"dtype":"BF16","shape":[3000000,1000],"data_offsets":[0,6000000000]}}`,
			"model-00002-of-00002.safetensors": `{"__metadata__":{},"v":{"dtype":"BF16","shape":[1000000000],"data_offsets":[0,2000000000]}}`,
		}, 4_000_000_000},
		{"junk", map[string]string{"model.safetensors": ""}, fromConfig.Params},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModelDir(t, "tiny-"+strings.ReplaceAll(tc.name, " ", "-"), tinyConfig)
			for n, h := range tc.files {
				stub(t, dir, n, h, h == "")
			}
			o := testOptions()
			o.Model, o.ModelDir = "", dir
			e := newTestEngine(t, o, Deps{})
			if got := e.Model().Params; got != tc.wantParams {
				t.Fatalf("engine params %d, want %d", got, tc.wantParams)
			}
			if got := e.Model().Layers; got != 8 {
				t.Fatalf("layers %d: the shape must still come from config.json", got)
			}
		})
	}
}
