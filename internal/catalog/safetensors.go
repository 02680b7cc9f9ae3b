package catalog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Bounds on what SafetensorsParams reads.
const (
	// MaxSafetensorsFiles is the most *.safetensors files one folder may
	// have for their headers to be read (real checkpoints have tens).
	MaxSafetensorsFiles = 1000
	// MaxSafetensorsHeader bounds one file's JSON header (real ones are
	// well under a megabyte).
	MaxSafetensorsHeader = 64 << 20
)

// SafetensorsParams counts the parameters of the *.safetensors files at the
// top of dir from their headers alone (each file starts with an 8-byte
// little-endian header length, then a JSON map of tensor name to {dtype,
// shape, data_offsets}); the tensor data is not read, so a header-only stub
// of a large checkpoint counts as the full model. n is 0 with a nil error
// when dir has no safetensors file; a header that cannot be read is an error
// naming the file, and then no count is returned.
func SafetensorsParams(dir string) (n int64, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil || len(files) == 0 {
		return 0, err
	}
	if len(files) > MaxSafetensorsFiles {
		return 0, fmt.Errorf("%s: more than %d safetensors files", dir, MaxSafetensorsFiles)
	}
	sort.Strings(files)
	for _, f := range files {
		c, err := safetensorsFileParams(f)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		if n > math.MaxInt64-c {
			return 0, fmt.Errorf("%s: parameter count overflows", filepath.Base(f))
		}
		n += c
	}
	return n, nil
}

func safetensorsFileParams(path string) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, errors.New("not a regular file")
	}
	var hl [8]byte
	if _, err := io.ReadFull(fh, hl[:]); err != nil {
		return 0, errors.New("shorter than a safetensors header")
	}
	size := binary.LittleEndian.Uint64(hl[:])
	if size < 2 || size > MaxSafetensorsHeader || int64(size) > fi.Size()-8 {
		return 0, fmt.Errorf("header length %d is not plausible for a %d-byte file", size, fi.Size())
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(fh, buf); err != nil {
		return 0, err
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(buf, &hdr); err != nil {
		return 0, fmt.Errorf("header is not JSON: %w", err)
	}
	var total int64
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			DType string  `json:"dtype"`
			Shape []int64 `json:"shape"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.DType == "" {
			return 0, fmt.Errorf("tensor %q: not a {dtype, shape} entry", name)
		}
		c := int64(1)
		for _, d := range t.Shape {
			if d < 0 || (d > 0 && c > math.MaxInt64/d) {
				return 0, fmt.Errorf("tensor %q: shape %v is not valid", name, t.Shape)
			}
			c *= d
		}
		if total > math.MaxInt64-c {
			return 0, fmt.Errorf("tensor %q: parameter count overflows", name)
		}
		total += c
	}
	if total == 0 && !strings.Contains(string(buf), `"shape"`) {
		return 0, errors.New("header lists no tensors")
	}
	return total, nil
}
