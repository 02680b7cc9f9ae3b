package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// resolveModel picks the architecture the engine simulates and the default
// served model name.
//
// Without --model-dir the model is the catalog entry named by --model.
// With --model-dir the architecture always comes from DIR/config.json (so any
// model folder works, catalog or not). The model's ID — which seeds the KV
// block hashes and therefore has to agree with the gateway's prefix index —
// is the catalog id when the name (--model, else config.json's _name_or_path,
// else the folder name) is a catalog id or alias, and the name itself
// otherwise.
func resolveModel(cat *catalog.Catalog, opts Options) (m catalog.Model, served string, err error) {
	if opts.ModelDir == "" {
		m, err = cat.Model(opts.Model)
		return m, opts.Model, err
	}
	name, data, err := ReadModelDir(opts.ModelDir)
	if err != nil {
		return catalog.Model{}, "", err
	}
	if opts.Model != "" {
		name = opts.Model
	}
	id := name
	if c, err := cat.Model(name); err == nil {
		id = c.ID
	}
	m, err = catalog.ModelFromHFConfig(id, data)
	if err != nil {
		return catalog.Model{}, "", fmt.Errorf("--model-dir %s: %w", opts.ModelDir, err)
	}
	return m, name, nil
}

// ReadModelDir reads DIR/config.json and returns it with the model's name:
// config.json's _name_or_path when it is a hub-style name (org/model or a
// bare name), else the folder's base name. Errors name the path.
func ReadModelDir(dir string) (name string, config []byte, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, fmt.Errorf("--model-dir %s: %w", dir, err)
	}
	path := filepath.Join(abs, "config.json")
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("--model-dir %s: no config.json in the folder (want a Hugging Face model folder)", dir)
		}
		return "", nil, fmt.Errorf("--model-dir: %w", err)
	}
	defer f.Close()
	config, err = io.ReadAll(io.LimitReader(f, catalog.MaxHFConfigBytes+1))
	if err != nil {
		return "", nil, fmt.Errorf("--model-dir: reading %s: %w", path, err)
	}
	return modelDirName(abs, config), config, nil
}

// modelDirName prefers config.json's _name_or_path when it names a hub repo;
// a local path there (common for re-saved checkpoints) says nothing useful,
// so the folder name is used instead.
func modelDirName(absDir string, config []byte) string {
	var c struct {
		NameOrPath string `json:"_name_or_path"`
	}
	_ = json.Unmarshal(config, &c) // a bad config.json is reported by ModelFromHFConfig
	n := strings.TrimSpace(c.NameOrPath)
	if n != "" && !filepath.IsAbs(n) && !strings.HasPrefix(n, ".") && !strings.HasPrefix(n, "~") && strings.Count(n, "/") <= 1 {
		return n
	}
	return filepath.Base(absDir)
}

// withWeightHeaders takes m's parameter count from the safetensors headers
// in dir when it has readable ones (catalog.SafetensorsParams), so weight
// memory and per-token speed follow the checkpoint's real size; otherwise
// the count derived from config.json stays (unreadable headers are logged).
// A mixture-of-experts model keeps its active count, capped at the total.
func withWeightHeaders(m catalog.Model, dir string, log *slog.Logger) catalog.Model {
	n, err := catalog.SafetensorsParams(dir)
	if err != nil {
		if log != nil {
			log.Warn("safetensors headers unreadable; parameter count from config.json", "dir", dir, "err", err)
		}
		return m
	}
	if n > 0 {
		m.Params = n
		m.ActiveParams = min(m.ActiveParams, n)
	}
	return m
}
