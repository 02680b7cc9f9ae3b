package modelsource

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// fetchJumpStart resolves a JumpStart hub id through the catalog and writes
// a model folder whose config.json carries the catalog's architecture, so
// the engine reads every source the same way.
func (f *Fetcher) fetchJumpStart(src Source) (Result, error) {
	hub := hubOf(src.HubName)
	if !strings.EqualFold(hub, catalog.PublicHub) {
		return Result{}, srcErr(ReasonNotFound, nil, "JumpStart hub %q is not known: capstan resolves model ids of the public hub %s from its model catalog", hub, catalog.PublicHub)
	}
	m, err := f.cat.JumpStartModel(src.JumpStartModelID)
	if err != nil {
		return Result{}, srcErr(ReasonNotFound, nil, "%s", err.Error())
	}
	data, err := catalog.HFConfigJSON(m)
	if err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "JumpStart model %s", src.JumpStartModelID)
	}
	dir := filepath.Join(f.o.CacheDir, "jumpstart", m.ID)
	if err := noSymlinkBelow(f.o.CacheDir, filepath.Join("jumpstart", m.ID)); err != nil {
		return Result{}, srcErr(ReasonPathEscape, err, "the model cache folder for JumpStart model %s", m.ID)
	}
	path := filepath.Join(dir, "config.json")
	if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, data) {
		if err := writeFileAtomic(path, data); err != nil {
			return Result{}, srcErr(ReasonFetchFailed, err, "JumpStart model %s: writing its config.json in the model cache", m.ID)
		}
	}
	return Result{Dir: dir, Model: m.ID, Files: 1, Bytes: int64(len(data))}, nil
}
