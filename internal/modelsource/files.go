package modelsource

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
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
// symbolic link, so a planted link cannot redirect a write outside root. A
// component that is missing, or below a file, ends the check: nothing can be
// written through it. The error names the component relative to root.
func noSymlinkBelow(root, rel string) error {
	p, shown := root, ""
	for _, seg := range strings.Split(filepath.ToSlash(rel), "/") {
		p, shown = filepath.Join(p, seg), path.Join(shown, seg)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link", shown)
		}
	}
	return nil
}

// localError is a failure of this machine's file system (creating, writing,
// renaming in the model cache) as a client may see it: the operation and
// the cause ("mkdir: not a directory"), without the server path, which only
// the server log shows (fetch logs Path). errors.Is and errors.As reach the
// original.
type localError struct{ err error }

func (e *localError) Error() string {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(e.err, &pe):
		return pe.Op + ": " + pe.Err.Error()
	case errors.As(e.err, &le):
		return le.Op + ": " + le.Err.Error()
	}
	return e.err.Error()
}

func (e *localError) Unwrap() error { return e.err }

// Path is the original text, server paths included, for the server log.
func (e *localError) Path() string { return e.err.Error() }

// hidePath wraps err as a localError when it carries a server path (an
// *fs.PathError or *os.LinkError anywhere in its chain); other errors
// (S3, HTTP, JSON) are returned as they are. srcErr applies it to every
// cause, so no SourceError shows where the server keeps its files.
func hidePath(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	var hidden *localError
	if err == nil || errors.As(err, &hidden) || (!errors.As(err, &pe) && !errors.As(err, &le)) {
		return err
	}
	return &localError{err: err}
}

// Modes of the model cache's folders and files: the replicas that load a
// model run as users of their own when capstan runs as root
// (internal/sandbox), so a model is readable by all users; the sandbox
// still hides the cache and shows each replica only its own model.
const (
	modelDirMode  = 0o755
	modelFileMode = 0o644
)

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
	if err := tmp.Chmod(modelFileMode); err != nil {
		tmp.Close()
		os.Remove(name)
		return err
	}
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
	if err = tmp.Chmod(modelFileMode); err == nil {
		n, err = io.Copy(tmp, r)
	}
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
