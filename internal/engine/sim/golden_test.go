package sim

import (
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestWireGolden pins the exact bytes of each response dialect. A fake clock
// fixes "created" and --time-scale 0 keeps the engine from waiting on it.
func TestWireGolden(t *testing.T) {
	tests := []struct{ name, path, body string }{
		{"chat_stream", "/v1/chat/completions", `{"messages":[{"role":"user","content":"golden"}],"max_tokens":3,"ignore_eos":true,"seed":1,"stream":true,"stream_options":{"include_usage":true}}`},
		{"chat_unary", "/v1/chat/completions", `{"messages":[{"role":"user","content":"golden"}],"max_tokens":3,"ignore_eos":true,"seed":1}`},
		{"completion_stream", "/v1/completions", `{"prompt":"golden","max_tokens":3,"ignore_eos":true,"seed":1,"stream":true}`},
		{"completion_unary", "/v1/completions", `{"prompt":"golden","max_tokens":3,"ignore_eos":true,"seed":1}`},
		{"tgi_stream", "/invocations", `{"inputs":"golden","stream":true,"parameters":{"max_new_tokens":3,"seed":1,"ignore_eos":true}}`},
		{"tgi_unary", "/invocations", `{"inputs":"golden","parameters":{"max_new_tokens":3,"seed":1,"ignore_eos":true}}`},
		{"tgi_unary_details", "/invocations", `{"inputs":"golden","parameters":{"max_new_tokens":3,"seed":1,"ignore_eos":true,"details":true}}`},
		{"error_n2", "/v1/completions", `{"prompt":"golden","n":2}`},
		{"error_model", "/v1/completions", `{"prompt":"golden","model":"nope"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A fresh engine per case so response ids start at 1.
			fc := clock.NewFake(time.Unix(1_767_225_600, 0))
			o := testOptions()
			e := newTestEngine(t, o, Deps{Clock: fc})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = e.Run(ctx); close(done) }()
			hs := httptest.NewServer(NewServer(e))
			defer func() { hs.Close(); cancel(); <-done }()
			h := &harness{e: e, url: hs.URL}
			_, got := h.post(t, tt.path, tt.body)
			file := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if string(got) != string(want) {
				t.Fatalf("response differs from %s:\ngot:\n%s\nwant:\n%s", file, got, want)
			}
		})
	}
}
