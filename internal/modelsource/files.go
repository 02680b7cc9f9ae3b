package modelsource

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// stateFile records, inside a fetched folder, what each file was fetched
// from, so a re-fetch can skip unchanged objects. Keys may not use the name.
const stateFile = ".capstan-fetch.json"

// partPrefix marks temporary download files; they are renamed into place
// only once complete and verified.
const partPrefix = ".capstan-part-"

type fileState struct {
	Size     int64  `json:"size"`
	ETag     string `json:"etag,omitempty"`
	Verified string `json:"verified,omitempty"` // sha256, md5, crc32, crc32c, size
}

type fetchState struct {
	Source   string               `json:"source"`
	Revision string               `json:"revision,omitempty"` // hf: resolved commit sha
	Files    map[string]fileState `json:"files"`
}

func readState(dir string) fetchState {
	st := fetchState{Files: map[string]fileState{}}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st
	}
	if json.Unmarshal(b, &st) != nil || st.Files == nil {
		return fetchState{Files: map[string]fileState{}}
	}
	return st
}

func writeState(dir string, st fetchState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, stateFile), b)
}

// safeRel checks that rel (an object key with the prefix removed) is a plain
// relative path that stays inside the model folder: not absolute, no ".."
// or "." or empty segments, no backslashes or NULs, not the state file.
func safeRel(rel string) error {
	switch {
	case rel == "":
		return errors.New("empty name")
	case strings.HasPrefix(rel, "/"):
		return errors.New("absolute path")
	case strings.ContainsAny(rel, "\\\x00"):
		return errors.New("backslash or NUL in name")
	case rel == stateFile || rel == archiveStateFile || strings.HasPrefix(filepath.Base(rel), partPrefix):
		return errors.New("reserved name")
	}
	for _, seg := range strings.Split(rel, "/") {
		switch seg {
		case "..":
			return errors.New(`".." segment`)
		case ".", "":
			return errors.New("non-canonical path segment")
		}
	}
	return nil
}

// noSymlinkBelow fails when any existing component of rel below root is a
// symbolic link (or the final one is not a regular file or directory), so a
// planted link cannot redirect a write outside root.
func noSymlinkBelow(root, rel string) error {
	p := root
	for _, seg := range strings.Split(filepath.ToSlash(rel), "/") {
		p = filepath.Join(p, seg)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link", p)
		}
	}
	return nil
}

// writeFileAtomic writes data to a temp file beside path and renames it over
// path, so readers never see a partial file.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, partPrefix+"*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(name)
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// copyToTemp streams r into a new temp file in dir and returns its name;
// the caller renames or removes it.
func copyToTemp(dir string, r io.Reader) (name string, n int64, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(dir, partPrefix+"*")
	if err != nil {
		return "", 0, err
	}
	name = tmp.Name()
	n, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", n, err
	}
	return name, n, nil
}

// nameOrPath reads config.json's _name_or_path ("" when absent or unreadable).
func nameOrPath(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return ""
	}
	var c struct {
		NameOrPath string `json:"_name_or_path"`
	}
	_ = json.Unmarshal(b, &c)
	return c.NameOrPath
}
