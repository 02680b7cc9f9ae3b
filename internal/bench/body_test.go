package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestRequestBodiesGolden pins the wire format of what the generator sends.
func TestRequestBodiesGolden(t *testing.T) {
	item := &Item{
		Prompt:       " the cat sat",
		Messages:     []kv.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: " the cat sat"}},
		OutputTokens: 16,
		SessionID:    "session-3-0",
	}
	tests := []struct {
		name         string
		chat, stream bool
		model        string
		wantTokens   int
	}{
		{"chat_stream", true, true, "llama-3.1-8b", kv.CountTokens(kv.ChatPrompt(item.Messages))},
		{"completions_stream", false, true, "llama-3.1-8b", 3},
		{"chat_no_stream_sagemaker", true, false, "", kv.CountTokens(kv.ChatPrompt(item.Messages))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, n := buildBody(&Request{Item: item, Model: tt.model}, tt.chat, tt.stream)
			if n != tt.wantTokens {
				t.Fatalf("expected input tokens %d, want %d", n, tt.wantTokens)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", tt.name+".json")
			if *update {
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Fatalf("body differs from %s:\n%s", path, pretty.Bytes())
			}
		})
	}
}
