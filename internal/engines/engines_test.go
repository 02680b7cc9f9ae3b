package engines

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/runtime"
)

func TestForImage(t *testing.T) {
	for _, tc := range []struct {
		image, want string
	}{
		{"", Sim},
		{"capstan/sim", Sim},
		{"capstan/sim:latest", Sim},
		{"ghcr.io/ggml-org/llama.cpp:server", LlamaCpp},
		{"ghcr.io/ggml-org/llama.cpp:server-cuda", LlamaCpp},
		{"ggml-org/llama.cpp:server-b4500", LlamaCpp},
		{"vllm/vllm-openai:latest", VLLM},
		{"docker.io/vllm/vllm-openai:v0.11.0", VLLM},
		{"lmcache/vllm-openai:latest", VLLM},
		{"763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128", VLLM},
		{"lmsysorg/sglang:v0.5.4-cu129", SGLang},
		{"ghcr.io/huggingface/text-generation-inference:3.3.6", TGI},
		{"763104351884.dkr.ecr.us-west-2.amazonaws.com/huggingface-pytorch-tgi-inference:2.4.0-tgi2.3.1-gpu-py311-cu124-ubuntu22.04", TGI},
		{"vllm/vllm-openai@sha256:0123", VLLM},
	} {
		a, err := ForImage(tc.image)
		if err != nil || a.Name != tc.want {
			t.Errorf("ForImage(%q) = %v, %v; want %s", tc.image, a, err, tc.want)
		}
	}
	for _, image := range []string{"my/own:1", "ghcr.io/ggml-org/llama.cpp:light", "capstan/simulator", "sim", "python:3"} {
		_, err := ForImage(image)
		var unknown *ErrUnknownImage
		if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "ggml-org/llama.cpp:server*") {
			t.Errorf("ForImage(%q) = %v, want an unknown-image error listing the patterns", image, err)
		}
	}
}

// fakeBinary writes an executable named name into a temp dir.
func fakeBinary(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestChoose(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no engine on PATH
	llama := fakeBinary(t, "llama-server")
	for _, tc := range []struct {
		name      string
		installed Machine
		image     string
		engine    string
		simulated bool
		err       string
	}{
		{"simulator", nil, "capstan/sim", Sim, false, ""},
		{"llama.cpp installed", Machine{LlamaCpp: {Binary: llama}}, "ghcr.io/ggml-org/llama.cpp:server", LlamaCpp, false, ""},
		{"llama.cpp not installed", nil, "ghcr.io/ggml-org/llama.cpp:server", "", false, "set engines.llamacpp.binary"},
		{"llama.cpp binary missing", Machine{LlamaCpp: {Binary: "/nonexistent/llama-server"}}, "ghcr.io/ggml-org/llama.cpp:server", "", false,
			`"/nonexistent/llama-server" is not an executable on this machine (set engines.llamacpp.binary`},
		{"vLLM not installed: simulated", nil, "lmcache/vllm-openai:latest", Sim, true, ""},
		{"vLLM configured but missing", Machine{VLLM: {Binary: "/nonexistent/vllm"}}, "vllm/vllm-openai:latest", "", false, "engines.vllm.binary"},
		{"vLLM installed", Machine{VLLM: {Binary: fakeBinary(t, "vllm")}}, "vllm/vllm-openai:latest", VLLM, false, ""},
		{"unknown image", nil, "my/own:1", "", false, `image "my/own:1" selects no engine`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := tc.installed.Choose(tc.image)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.Engine != tc.engine || ch.Simulated() != tc.simulated || (ch.Note != "") != tc.simulated {
				t.Fatalf("choice = %+v (simulated %v), want engine %s simulated %v", ch, ch.Simulated(), tc.engine, tc.simulated)
			}
			if tc.simulated && !strings.Contains(ch.Note, "engines.vllm.binary") {
				t.Fatalf("note %q does not name the key", ch.Note)
			}
		})
	}
	// A default binary on PATH is found without configuration.
	dir := filepath.Dir(fakeBinary(t, "text-generation-launcher"))
	t.Setenv("PATH", dir)
	if ch, err := (Machine{}).Choose("ghcr.io/huggingface/text-generation-inference:3"); err != nil || ch.Engine != TGI {
		t.Fatalf("TGI on PATH: %+v, %v", ch, err)
	}
}

func TestArgs(t *testing.T) {
	spec := runtime.ReplicaSpec{ID: "r", Model: "llama-3.1-8b", ServedModelName: "my-ep", GPU: "A10G", TensorParallel: 4,
		Devices: []string{"2", "3", "4", "5"}, KVEventsEndpoint: "tcp://*:5557"}
	for _, tc := range []struct {
		engine string
		launch Launch
		want   string
		env    map[string]string
	}{
		{Sim, Launch{Spec: spec, Host: "127.0.0.1", Port: 0, ExtraArgs: []string{"--time-scale=0.01"}},
			"engine sim --gpu A10G --host 127.0.0.1 --port 0 --model llama-3.1-8b --tensor-parallel 4 --served-model-name my-ep --kv-events=tcp://*:5557 --time-scale=0.01", nil},
		{LlamaCpp, Launch{Spec: spec, Host: "127.0.0.1", Port: 8081, ModelPath: "/m/tiny.gguf", ExtraArgs: []string{"-t", "1"}},
			"--model /m/tiny.gguf --host 127.0.0.1 --port 8081 --parallel 4 --metrics --no-webui --alias my-ep --n-gpu-layers 999 -t 1",
			map[string]string{"CUDA_VISIBLE_DEVICES": "2,3,4,5"}},
		{VLLM, Launch{Spec: spec, Host: "127.0.0.1", Port: 8082, ModelPath: "/m/llama"},
			`serve /m/llama --host 127.0.0.1 --port 8082 --served-model-name my-ep --tensor-parallel-size 4 --kv-events-config {"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","topic":"kv-events"}`,
			map[string]string{"CUDA_VISIBLE_DEVICES": "2,3,4,5"}},
		{SGLang, Launch{Spec: spec, Host: "127.0.0.1", Port: 8083, ModelPath: "/m/llama"},
			"-m sglang.launch_server --model-path /m/llama --host 127.0.0.1 --port 8083 --enable-metrics --served-model-name my-ep --tp-size 4",
			map[string]string{"CUDA_VISIBLE_DEVICES": "2,3,4,5"}},
		{TGI, Launch{Spec: spec, Host: "127.0.0.1", Port: 8084, ModelPath: "/m/llama"},
			"--model-id /m/llama --hostname 127.0.0.1 --port 8084 --num-shard 4",
			map[string]string{"CUDA_VISIBLE_DEVICES": "2,3,4,5"}},
	} {
		a := MustByName(tc.engine)
		if got := strings.Join(a.Args(tc.launch), " "); got != tc.want {
			t.Errorf("%s args:\n got %s\nwant %s", tc.engine, got, tc.want)
		}
		if got := a.Env(tc.launch); !mapsEqual(got, tc.env) {
			t.Errorf("%s env = %v, want %v", tc.engine, got, tc.env)
		}
	}
	// A CPU instance type gets no GPU offload; no devices, no CUDA_VISIBLE_DEVICES.
	cpu := Launch{Spec: runtime.ReplicaSpec{GPU: "ml.c7i.4xlarge"}, Host: "h", Port: 1, ModelPath: "/m.gguf"}
	if args := MustByName(LlamaCpp).Args(cpu); slices.Contains(args, "--n-gpu-layers") {
		t.Errorf("CPU replica offloads: %v", args)
	}
	if env := MustByName(LlamaCpp).Env(cpu); len(env) != 0 {
		t.Errorf("CPU replica env = %v", env)
	}
}

func TestVLLMKVTiersAreLMCache(t *testing.T) {
	spec := runtime.ReplicaSpec{KVTiers: runtime.KVTiers{CPUBytes: 8 << 30, StorageDir: "/data/ts", StorageBytes: 100 << 30, RedisURL: "redis://10.0.0.2:6379"}}
	l := Launch{Spec: spec, Host: "h", Port: 1, ModelPath: "/m"}
	a := MustByName(VLLM)
	if args := strings.Join(a.Args(l), " "); !strings.Contains(args, `--kv-transfer-config {"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`) {
		t.Errorf("args %s: no LMCache connector", args)
	}
	want := map[string]string{"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "True", "LMCACHE_MAX_LOCAL_CPU_SIZE": "8",
		"LMCACHE_LOCAL_DISK": "file:///data/ts/", "LMCACHE_MAX_LOCAL_DISK_SIZE": "100",
		"LMCACHE_REMOTE_URL": "redis://10.0.0.2:6379", "LMCACHE_REMOTE_SERDE": "naive"}
	if got := a.Env(l); !mapsEqual(got, want) {
		t.Errorf("env = %v, want %v", got, want)
	}
	if args := strings.Join(a.Args(Launch{Host: "h", Port: 1, ModelPath: "/m"}), " "); strings.Contains(args, "kv-transfer") {
		t.Errorf("no tiers, yet %s", args)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestReadMetrics(t *testing.T) {
	for _, tc := range []struct {
		file, engine string
		want         Stats
	}{
		// captured from `capstan engine sim`, gauges edited
		{"testdata/sim-metrics.txt", Sim, Stats{Waiting: 3, Running: 5, KVUsage: 0.42, HasKVUsage: true, BlockSize: 16, NumGPUBlocks: 18692}},
		// captured from llama-server after two identical 7-token prompts:
		// 8 tokens computed, 6 reused from the slot's cache
		{"testdata/llamacpp-metrics.txt", LlamaCpp, Stats{PromptTokens: 14, PrefixQueries: 14, PrefixHits: 6, HasPrefix: true, GenTokens: 16}},
	} {
		f, err := os.Open(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadMetrics(f, MustByName(tc.engine).Metrics)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got.Families = nil
		// The sim capture's counters are whatever it had served; compare the gauges.
		if tc.engine == Sim {
			got.PrefixQueries, got.PrefixHits, got.PromptTokens, got.GenTokens, got.HasPrefix = 0, 0, 0, 0, false
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.file, got, tc.want)
		}
	}
	if _, err := ReadMetrics(strings.NewReader("not metrics {"), vllmMetrics); err == nil {
		t.Fatal("garbage parsed")
	}
}

func TestGGUFFile(t *testing.T) {
	mk := func(t *testing.T, names ...string) string {
		dir := t.TempDir()
		for _, n := range names {
			p := filepath.Join(dir, n)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("GGUF"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  string
		err   string
	}{
		{"one", []string{"tiny.gguf", "README.md"}, "tiny.gguf", ""},
		{"one folder down", []string{"model/tiny.GGUF"}, "model/tiny.GGUF", ""},
		{"split", []string{"m-00002-of-00002.gguf", "m-00001-of-00002.gguf"}, "m-00001-of-00002.gguf", ""},
		{"none", []string{"config.json"}, "", "no .gguf file"},
		{"two models", []string{"a.gguf", "b.gguf"}, "", "2 .gguf files (a.gguf, b.gguf)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mk(t, tc.files...)
			got, err := GGUFFile(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != filepath.Join(dir, tc.want) {
				t.Fatalf("got %q, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestVLLMHelpers: the exported flag names, KV events config and LMCache
// environment (which the Kubernetes operator patches a manifest's args
// with) are what the adapter's own command line and environment carry.
func TestVLLMHelpers(t *testing.T) {
	tiers := runtime.KVTiers{CPUBytes: 12 << 30, RedisURL: "redis://r:6379"}
	l := Launch{Spec: runtime.ReplicaSpec{ServedModelName: "llama", TensorParallel: 2, KVTiers: tiers, KVEventsEndpoint: "tcp://*:5557"},
		Host: "h", Port: 1, ModelPath: "/m"}
	a := MustByName(VLLM)
	args := a.Args(l)
	for flag, want := range map[string]string{
		VLLMFlagServedModelName:  "llama",
		VLLMFlagTensorParallel:   "2",
		VLLMFlagKVTransferConfig: VLLMLMCacheTransferConfig,
		VLLMFlagKVEventsConfig:   VLLMKVEventsConfig("tcp://*:5557", VLLMKVEventsTopic),
	} {
		i := slices.Index(args, flag)
		if i < 0 || i+1 >= len(args) || args[i+1] != want {
			t.Errorf("args %q: %s is not %s", args, flag, want)
		}
	}
	if got := VLLMKVEventsConfig("tcp://*:5557", "kv@10.0.0.1@llama"); got != `{"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","topic":"kv@10.0.0.1@llama"}` {
		t.Errorf("kv events config = %s", got)
	}
	if got := LMCacheEnv(tiers); !mapsEqual(got, a.Env(l)) || got["LMCACHE_CHUNK_SIZE"] != "256" {
		t.Errorf("LMCacheEnv = %v, adapter env %v", got, a.Env(l))
	}
	if got := LMCacheEnv(runtime.KVTiers{}); got != nil {
		t.Errorf("no tiers: %v", got)
	}
}

// TestGGUFFileFollowsLinks: a Hugging Face cache snapshot links each file
// to its blob; a link to a folder or to nothing is not a model.
func TestGGUFFileFollowsLinks(t *testing.T) {
	root := t.TempDir()
	blob := filepath.Join(root, "blobs", "3f2a")
	snap := filepath.Join(root, "snapshots", "main")
	for _, d := range []string{filepath.Dir(blob), snap, filepath.Join(root, "adir.gguf")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(blob, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"tiny.gguf": blob, "dangling.gguf": filepath.Join(root, "gone"), "dir.gguf": filepath.Join(root, "adir.gguf")} {
		if err := os.Symlink(target, filepath.Join(snap, name)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := GGUFFile(snap)
	if err != nil || got != filepath.Join(snap, "tiny.gguf") {
		t.Fatalf("got %q, %v; want the linked tiny.gguf", got, err)
	}
}
