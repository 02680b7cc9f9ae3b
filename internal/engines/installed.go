package engines

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Installed says where an engine lives on this machine: capstan.yaml's
// engines.<name>.
type Installed struct {
	// Binary is the engine's executable (a path, or a name on PATH).
	// Unset, the adapter's DefaultBinary is looked up on PATH.
	Binary string `json:"binary,omitempty"`
	// Args are extra flags for every replica of the engine (e.g. "-t", "1").
	Args []string `json:"args,omitempty"`
}

// ErrNoBinary says an engine's executable is not on this machine.
var ErrNoBinary = errors.New("engine binary not found")

// Resolve finds a's executable: inst.Binary, else a.DefaultBinary on PATH.
// The error names the config key to set.
func (a *Adapter) Resolve(inst Installed) (string, error) {
	bin := inst.Binary
	if bin == "" {
		bin = a.DefaultBinary
	}
	if bin == "" {
		return "", fmt.Errorf("engine %s: no binary: %w", a.Name, ErrNoBinary)
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("engine %s: %q is not an executable on this machine (set engines.%s.binary in capstan.yaml): %w",
			a.Name, bin, a.Name, ErrNoBinary)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("engine %s: %w", a.Name, err)
	}
	return abs, nil
}

// ModelPath is what the engine loads from a model folder: for a GGUF engine
// the one .gguf file in dir (the first shard of a split model), for the
// others the folder itself.
func (a *Adapter) ModelPath(dir string) (string, error) {
	if a.Format != FormatGGUF {
		return dir, nil
	}
	return GGUFFile(dir)
}

// GGUFFile finds the model file of a GGUF folder: its only .gguf file, or
// the first shard (*-00001-of-*.gguf) of a split model. A file path is
// returned as it is.
func GGUFFile(dir string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("model folder: %w", err)
	}
	if !fi.IsDir() {
		if strings.HasSuffix(strings.ToLower(dir), ".gguf") {
			return dir, nil
		}
		return "", fmt.Errorf("model file %s is not a .gguf file", filepath.Base(dir))
	}
	var ggufs []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if IsGGUFEntry(p, d) {
			ggufs = append(ggufs, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("model folder: %w", err)
	}
	sort.Strings(ggufs)
	switch {
	case len(ggufs) == 1:
		return ggufs[0], nil
	case len(ggufs) == 0:
		return "", errors.New("the model has no .gguf file, which llama.cpp loads")
	}
	var first []string
	for _, p := range ggufs {
		if strings.Contains(filepath.Base(p), "-00001-of-") {
			first = append(first, p)
		}
	}
	if len(first) == 1 {
		return first[0], nil
	}
	names := make([]string, len(ggufs))
	for i, p := range ggufs {
		names[i], _ = filepath.Rel(dir, p)
	}
	return "", fmt.Errorf("the model has %d .gguf files (%s); keep one, or one split model", len(ggufs), strings.Join(names, ", "))
}

// IsGGUFEntry reports whether the folder entry d at path p is a GGUF model
// file: named *.gguf, and a file or a link that leads to one (a Hugging
// Face cache's snapshot folder links every file to its blob).
func IsGGUFEntry(p string, d fs.DirEntry) bool {
	if !strings.HasSuffix(strings.ToLower(d.Name()), ".gguf") {
		return false
	}
	if d.Type().IsRegular() {
		return true
	}
	if d.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
