package catalog

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSafetensors writes a safetensors file: header length, header, and
// data bytes (a header-only stub when data is 0).
func writeSafetensors(t *testing.T, path, header string, data int) {
	t.Helper()
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	b = append(b, make([]byte, data)...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSafetensorsParams(t *testing.T) {
	dir := t.TempDir()
	if n, err := SafetensorsParams(dir); n != 0 || err != nil {
		t.Fatalf("no files: %d, %v", n, err)
	}
	writeSafetensors(t, filepath.Join(dir, "model-00001-of-00002.safetensors"),
		`{"__metadata__":{"format":"pt"},"a.weight":{"dtype":"BF16","shape":[1000,20],"data_offsets":[0,40000]},"b":{"dtype":"BF16","shape":[7],"data_offsets":[40000,40014]}}`, 40014)
	writeSafetensors(t, filepath.Join(dir, "model-00002-of-00002.safetensors"),
		`{"c":{"dtype":"F32","shape":[3,3,3],"data_offsets":[0,108]}}`, 0) // header-only stub
	if n, err := SafetensorsParams(dir); n != 20000+7+27 || err != nil {
		t.Fatalf("got %d, %v; want 20034", n, err)
	}

	bad := []struct{ name, header, want string }{
		{"not json", `{"a":`, "not JSON"},
		{"negative dim", `{"a":{"dtype":"BF16","shape":[-1,2]}}`, "not valid"},
		{"overflow", `{"a":{"dtype":"BF16","shape":[4294967296,4294967296]}}`, "not valid"},
		{"no dtype", `{"a":{"shape":[2]}}`, "not a {dtype, shape} entry"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			writeSafetensors(t, filepath.Join(d, "m.safetensors"), tc.header, 0)
			if _, err := SafetensorsParams(d); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "m.safetensors") {
				t.Fatalf("err = %v, want %q naming the file", err, tc.want)
			}
		})
	}
	t.Run("implausible header length", func(t *testing.T) {
		d := t.TempDir()
		b := binary.LittleEndian.AppendUint64(nil, 1<<40)
		if err := os.WriteFile(filepath.Join(d, "m.safetensors"), append(b, "{}"...), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := SafetensorsParams(d); err == nil || !strings.Contains(err.Error(), "not plausible") {
			t.Fatalf("err = %v", err)
		}
	})
}
