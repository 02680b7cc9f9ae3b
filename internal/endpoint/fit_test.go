package endpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engines"
)

// TestFolderFit: a model folder counts by the size of the weight files its
// engine loads (sparse files here: no disk used), against the instance
// type's GPU memory or, on a CPU type, the memory the model server uses.
func TestFolderFit(t *testing.T) {
	cat := catalog.Default()
	folder := func(t *testing.T, name string, size int64) string {
		t.Helper()
		dir := t.TempDir()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name, file, engine, instance string
		size                         int64
		want                         string // "" fits; "-" not checked
	}{
		{"gguf fits a small cpu type", "tiny.gguf", engines.LlamaCpp, "ml.c5.large", 10e6, ""},
		{"gguf too large for a cpu type", "big.gguf", engines.LlamaCpp, "ml.c5.large", 5e9,
			"Model m does not fit: its weight files take 5.0 GB; CPU instance type ml.c5.large has 4 GiB of memory"},
		{"safetensors too large for a gpu type", "model.safetensors", engines.VLLM, "ml.g5.xlarge", 30e9,
			"Model m does not fit: its weight files take 30.0 GB; ml.g5.xlarge has 24.0 GB of GPU memory"},
		{"safetensors fit a gpu type", "model.safetensors", engines.VLLM, "ml.g5.xlarge", 16e9, ""},
		{"a gguf is not a vllm weight file", "big.gguf", engines.VLLM, "ml.c5.large", 5e9, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, err := cat.InstanceType(tc.instance)
			if err != nil {
				t.Fatal(err)
			}
			msg, checked := folderFit(cat, "m", folder(t, tc.file, tc.size), tc.engine, it)
			switch {
			case tc.want == "-" && checked:
				t.Fatalf("checked (%q); want no weight files found", msg)
			case tc.want == "" && (msg != "" || !checked):
				t.Fatalf("folderFit = %q, checked %v; want it to fit", msg, checked)
			case tc.want != "" && tc.want != "-" && !strings.HasPrefix(msg, tc.want):
				t.Fatalf("folderFit = %q; want %q…", msg, tc.want)
			}
		})
	}
}
