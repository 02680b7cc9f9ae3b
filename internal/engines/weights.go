package engines

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// weightExts are a Hugging Face folder's weight files, by preference: a
// folder with safetensors loads those and ignores its PyTorch copies.
var weightExts = [][]string{{".safetensors"}, {".bin", ".pt", ".pth"}}

// WeightBytes is the size on disk of the weights in a model folder (or
// file): every .gguf file for FormatGGUF (a split model's shards, a
// projector beside it), the *.safetensors files (else *.bin, *.pt, *.pth)
// for FormatHF. Links are followed (a Hugging Face cache snapshot links its
// files to blobs). 0 when the folder has none; the engine's own check
// applies then.
func WeightBytes(dir string, f ModelFormat) (int64, error) {
	exts := weightExts
	if f == FormatGGUF {
		exts = [][]string{{".gguf"}}
	}
	sizes := make([]int64, len(exts))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := strings.ToLower(d.Name())
		for i, group := range exts {
			for _, ext := range group {
				if !strings.HasSuffix(name, ext) {
					continue
				}
				fi, err := os.Stat(p) // through a link
				if err != nil {
					return err
				}
				if fi.Mode().IsRegular() {
					sizes[i] += fi.Size()
				}
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, n := range sizes {
		if n > 0 {
			return n, nil
		}
	}
	return 0, nil
}
