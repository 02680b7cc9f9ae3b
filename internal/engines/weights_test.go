package engines

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWeightBytes(t *testing.T) {
	write := func(t *testing.T, dir string, files map[string]int) {
		t.Helper()
		for name, size := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		format ModelFormat
		files  map[string]int
		want   int64
	}{
		{"one gguf", FormatGGUF, map[string]int{"m.gguf": 100, "README.md": 7}, 100},
		{"split gguf and projector", FormatGGUF, map[string]int{"m-00001-of-00002.gguf": 60, "m-00002-of-00002.gguf": 40, "sub/mmproj.GGUF": 5}, 105},
		{"safetensors win over bin", FormatHF, map[string]int{"config.json": 9, "a.safetensors": 30, "b.safetensors": 20, "pytorch_model.bin": 1000}, 50},
		{"bin when no safetensors", FormatHF, map[string]int{"config.json": 9, "pytorch_model.bin": 70, "extra.pt": 3}, 73},
		{"no weights", FormatHF, map[string]int{"config.json": 9}, 0},
		{"gguf ignores hf files", FormatGGUF, map[string]int{"a.safetensors": 30}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, tc.files)
			got, err := WeightBytes(dir, tc.format)
			if err != nil || got != tc.want {
				t.Fatalf("WeightBytes = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	t.Run("linked blob", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, map[string]int{"blobs/abc": 64})
		if err := os.MkdirAll(filepath.Join(dir, "snap"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../blobs/abc", filepath.Join(dir, "snap", "model.gguf")); err != nil {
			t.Fatal(err)
		}
		if got, err := WeightBytes(filepath.Join(dir, "snap"), FormatGGUF); err != nil || got != 64 {
			t.Fatalf("WeightBytes through a link = %d, %v; want 64", got, err)
		}
	})
}
