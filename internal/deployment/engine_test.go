package deployment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// withImage swaps the worker image of an iec() manifest (on the
// completions endpoint, which kvaware routing needs).
func withImage(doc, image string) string {
	doc = strings.Replace(doc, "invocationEndpoint: v1/chat/completions", "invocationEndpoint: v1/completions", 1)
	return strings.Replace(doc, "image: lmcache/vllm-openai:latest", "image: "+image, 1)
}

func TestPlanEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no engine on PATH
	llama := filepath.Join(t.TempDir(), "llama-server")
	if err := os.WriteFile(llama, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	installed := engines.Machine{engines.LlamaCpp: {Binary: llama}}
	kv := "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  kvCacheSpec: {enableL1Cache: true}\n"
	for _, tc := range []struct {
		name, image string
		engine      string
		strategy    string
		l1          bool
		warnings    []string
		err         string
	}{
		{"simulator", "capstan/sim", engines.Sim, manifest.RoutingKVAware, true, nil, ""},
		{"vLLM not installed: simulated, features kept", "lmcache/vllm-openai:latest", engines.Sim, manifest.RoutingKVAware, true,
			[]string{ReasonEngineSimulated}, ""},
		{"llama.cpp: kvaware falls back, tiers off", "ghcr.io/ggml-org/llama.cpp:server", engines.LlamaCpp, manifest.RoutingPrefixAware, false,
			[]string{ReasonKVEventsUnsupported, ReasonKVTiersUnsupported}, ""},
		{"unknown image", "acme/server:1", "", "", false, nil, `spec.worker.image: image "acme/server:1" selects no engine`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planFor(mustLoad(t, withImage(iec("demo", 1, 1, kv), tc.image)), installed)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, w := range p.engineWarnings {
				reasons = append(reasons, w.reason)
			}
			if p.engine != tc.engine || p.strategy != tc.strategy || p.kvaware != (tc.strategy == manifest.RoutingKVAware) ||
				p.l1 != tc.l1 || !slices.Equal(reasons, tc.warnings) {
				t.Fatalf("plan: engine %s strategy %s kvaware %v l1 %v warnings %v", p.engine, p.strategy, p.kvaware, p.l1, p.engineWarnings)
			}
		})
	}
}

// A JumpStartModel names the engine JumpStart serves it in and runs the
// simulator with a Warning saying why, even where that engine is
// installed: capstan has no JumpStart weights to give it.
func TestPlanJumpStartEngine(t *testing.T) {
	vllm := filepath.Join(t.TempDir(), "vllm")
	if err := os.WriteFile(vllm, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, modelID, engine string
		installed             engines.Machine
	}{
		{"LMI, vLLM not installed", "deepseek-llm-r1-distill-qwen-1-5b", "vLLM", nil},
		{"LMI, vLLM installed", "deepseek-llm-r1-distill-qwen-1-5b", "vLLM", engines.Machine{engines.VLLM: {Binary: vllm}}},
		{"TGI", "huggingface-llm-qwen2-5-7b-instruct", "Text Generation Inference", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(jsm("demo", "demo", ""), "deepseek-llm-r1-distill-qwen-1-5b", tc.modelID, 1)
			p, err := planFor(mustLoad(t, doc), tc.installed)
			if err != nil {
				t.Fatal(err)
			}
			if p.engine != engines.Sim || len(p.engineWarnings) != 1 || p.engineWarnings[0].reason != ReasonEngineSimulated ||
				!strings.Contains(p.engineWarnings[0].message, "JumpStart serves "+tc.modelID+" in "+tc.engine+" (") {
				t.Fatalf("plan: engine %s warnings %+v", p.engine, p.engineWarnings)
			}
		})
	}
}

// Apply refuses, naming the field, a worker image no engine serves here,
// and stores nothing.
func TestApplyRefusesUnknownImage(t *testing.T) {
	h := newHarness(t)
	_, err := h.svc.Apply(context.Background(), mustLoad(t, withImage(iec("demo", 1, 1, ""), "acme/server:1")))
	var el manifest.ErrorList
	if !errors.As(err, &el) || len(el) != 1 || el[0].Path != "spec.worker.image" || !strings.Contains(el[0].Message, "selects no engine") {
		t.Fatalf("apply: %v", err)
	}
	if _, err := h.svc.Get(context.Background(), manifest.KindInferenceEndpointConfig, "default", "demo"); !errors.Is(err, manifest.ErrNotFound) {
		t.Fatalf("the refused manifest was stored: %v", err)
	}
}

// TestTemplateHashEngine: a new image that picks another engine is a new
// replica template (it rolls out), while a simulated deployment's hash is
// the one records stored before the engine was part of it.
func TestTemplateHashEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	llama := filepath.Join(t.TempDir(), "llama-server")
	if err := os.WriteFile(llama, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	installed := engines.Machine{engines.LlamaCpp: {Binary: llama}}
	hash := func(image string) string {
		p, err := planFor(mustLoad(t, withImage(iec("demo", 1, 1, ""), image)), installed)
		if err != nil {
			t.Fatal(err)
		}
		return p.templateHash("m", "/models/m")
	}
	sim, simAgain, llamaCpp := hash("capstan/sim"), hash("lmcache/vllm-openai:latest"), hash("ghcr.io/ggml-org/llama.cpp:server")
	if sim != simAgain {
		t.Fatalf("two images the simulator serves hash apart: %s, %s", sim, simAgain)
	}
	if llamaCpp == sim {
		t.Fatal("moving from the simulator to llama.cpp is not a new replica template")
	}
	// The hash a simulated deployment had before the engine was hashed.
	p, err := planFor(mustLoad(t, withImage(iec("demo", 1, 1, ""), "capstan/sim")), installed)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(template{InstanceTypes: p.instanceTypes, Req: p.req, GPUs: p.gpus, Env: p.env, KVAware: p.kvaware,
		L1: p.l1, L2: p.l2URL, Model: "m", ModelDir: "/models/m", Route: p.route})
	sum := sha256.Sum256(b)
	if want := hex.EncodeToString(sum[:8]); sim != want {
		t.Fatalf("a simulated deployment's hash changed: %s, was %s", sim, want)
	}
}
