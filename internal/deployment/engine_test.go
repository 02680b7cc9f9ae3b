package deployment

import (
	"context"
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
