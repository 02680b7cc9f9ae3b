package modelsource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/internal/engines"
)

// ErrNoGGUF is wrapped by the SourceError of a GGUF model folder or archive
// (Source.Format engines.FormatGGUF) that has no .gguf file, the GGUF
// counterpart of ErrNoConfig (errors.Is(err, ErrNoGGUF)). Its Reason is
// NotFound.
var ErrNoGGUF = errors.New("no .gguf file")

// ErrInvalidGGUF is wrapped by the SourceError of a GGUF model folder or
// archive whose .gguf files llama.cpp could not load: more than one model
// (two unrelated .gguf files, .gguf files in two folders, one entry twice in
// an archive), or a .gguf file that does not start with the GGUF magic
// bytes (errors.Is(err, ErrInvalidGGUF)). Its Reason is InvalidSource.
var ErrInvalidGGUF = errors.New("unusable .gguf file")

// ggufMagic starts every GGUF file.
const ggufMagic = "GGUF"

// formatOf is src's model format, "" meaning engines.FormatHF.
func formatOf(src Source) engines.ModelFormat {
	if src.Format == "" {
		return engines.FormatHF
	}
	return src.Format
}

// isGGUFName reports whether a file name is a .gguf file's, as
// engines.GGUFFile sees it.
func isGGUFName(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".gguf") }

// twoGGUFDirs is ggufRoot's error for a folder with .gguf files in two
// folders one level down (and none at the top): which model is meant is
// unclear.
type twoGGUFDirs struct{ a, b string }

func (e *twoGGUFDirs) Error() string { return fmt.Sprintf(".gguf files in both %s/ and %s/", e.a, e.b) }

// ggufRoot is the folder of dir (an extracted archive, an S3 mirror or an
// FSx folder) that holds the .gguf model, as modelRoot is for config.json:
// dir when a .gguf file is directly in it, else the one folder directly
// below that has one (folders named ".…" are skipped). Errors: ErrNoGGUF,
// *twoGGUFDirs, or the folder's read error.
func ggufRoot(dir string) (string, error) {
	has, err := hasGGUF(dir)
	if err != nil {
		return "", err
	}
	if has {
		return dir, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	found := ""
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if has, err := hasGGUF(filepath.Join(dir, e.Name())); err != nil {
			return "", err
		} else if has {
			if found != "" {
				return "", &twoGGUFDirs{found, e.Name()}
			}
			found = e.Name()
		}
	}
	if found == "" {
		return "", ErrNoGGUF
	}
	return filepath.Join(dir, found), nil
}

// hasGGUF reports whether dir directly holds a regular .gguf file.
func hasGGUF(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if engines.IsGGUFEntry(filepath.Join(dir, e.Name()), e) {
			return true, nil
		}
	}
	return false, nil
}

// ggufRootError words ggufRoot's error for the source where; what is
// "archive" or "prefix" or "folder", for the message.
func ggufRootError(err error, where, what string) error {
	var two *twoGGUFDirs
	switch {
	case errors.Is(err, ErrNoGGUF):
		return srcErr(ReasonNotFound, ErrNoGGUF, "%s has no .gguf file, which llama.cpp loads (looked at the top of the %s and one folder down)", where, what)
	case errors.As(err, &two):
		return srcErr(ReasonInvalidSource, ErrInvalidGGUF, "%s: %s: a GGUF model %s holds one model, with its .gguf file at the top or in one folder", where, two, what)
	}
	return srcErr(ReasonFetchFailed, err, "%s: reading the model %s", where, what)
}

// checkArchiveGGUF refuses an extraction (in dir) that llama.cpp could not
// load: no .gguf file at the top or one folder down (NotFound, ErrNoGGUF),
// .gguf files in two folders, one .gguf present as two archive entries, or
// what checkGGUF refuses (InvalidSource, ErrInvalidGGUF). Messages name the
// archive (where) and its entries.
func checkArchiveGGUF(dir, where string, x extraction) error {
	root, err := ggufRoot(dir)
	if err != nil {
		return ggufRootError(err, where, "archive")
	}
	names := make([]string, 0, len(x.ggufs))
	for n := range x.ggufs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if hs := x.ggufs[n]; len(hs) > 1 {
			quoted := make([]string, len(hs))
			for i, h := range hs {
				quoted[i] = fmt.Sprintf("%q", h)
			}
			return srcErr(ReasonInvalidSource, ErrInvalidGGUF, "%s: the archive has %d entries for %s (%s); a model archive holds it once",
				where, len(hs), n, strings.Join(quoted, ", "))
		}
	}
	return checkGGUF(root, where, shownPrefix(dir, root))
}

// shownPrefix is how the client knows the files of root, a folder of top:
// "" when root is top, else "name/".
func shownPrefix(top, root string) string {
	if rel, err := filepath.Rel(top, root); err == nil && rel != "." {
		return filepath.ToSlash(rel) + "/"
	}
	return ""
}

// checkGGUF refuses root (a model folder) unless llama.cpp can load it: it
// must hold a .gguf file that engines.GGUFFile picks (its only one, or the
// first shard of a split model) and every .gguf file in it must start with
// the GGUF magic bytes. where names the source and prefix is put before the
// file names ("" or "my-model/"), so the error names the source and the
// file as the client knows them, never a path on this machine.
func checkGGUF(root, where, prefix string) error {
	var files []string // relative to root, slash-separated, sorted
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if engines.IsGGUFEntry(p, d) {
			rel, rerr := filepath.Rel(root, p)
			if rerr != nil {
				return rerr
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return srcErr(ReasonFetchFailed, err, "%s: reading the model folder", where)
	}
	if len(files) == 0 {
		return srcErr(ReasonNotFound, ErrNoGGUF, "%s has no .gguf file, which llama.cpp loads", where)
	}
	sort.Strings(files)
	chosen, err := engines.GGUFFile(root)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return srcErr(ReasonFetchFailed, err, "%s: reading the model folder", where)
		}
		shown := make([]string, len(files))
		for i, f := range files {
			shown[i] = prefix + f
		}
		return srcErr(ReasonInvalidSource, ErrInvalidGGUF, "%s: the model has %d .gguf files (%s); llama.cpp loads one model: keep one .gguf file, or the shards of one split model (name-00001-of-0000N.gguf, …)",
			where, len(files), strings.Join(shown, ", "))
	}
	first, err := filepath.Rel(root, chosen)
	if err != nil {
		return srcErr(ReasonFetchFailed, err, "%s: reading the model folder", where)
	}
	first = filepath.ToSlash(first)
	// The file llama.cpp is given first, so the message names it; then the
	// other shards (or projector files) beside it.
	order := append([]string{first}, files...)
	seen := map[string]bool{}
	for _, rel := range order {
		if seen[rel] {
			continue
		}
		seen[rel] = true
		if err := checkGGUFMagic(filepath.Join(root, filepath.FromSlash(rel)), where, prefix+rel); err != nil {
			return err
		}
	}
	return nil
}

// checkGGUFMagic refuses the file p unless it starts with "GGUF"; shown is
// the file as the client knows it.
func checkGGUFMagic(p, where, shown string) error {
	fh, err := os.Open(p)
	if err != nil {
		return srcErr(ReasonFetchFailed, err, "%s: reading %s", where, shown)
	}
	defer fh.Close()
	var head [len(ggufMagic)]byte
	n, err := io.ReadFull(fh, head[:])
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return srcErr(ReasonInvalidSource, ErrInvalidGGUF, "%s: %s is %d bytes, too short to be a GGUF file (one starts with the magic bytes %q)",
			where, shown, n, ggufMagic)
	case err != nil:
		return srcErr(ReasonFetchFailed, err, "%s: reading %s", where, shown)
	case string(head[:]) != ggufMagic:
		return srcErr(ReasonInvalidSource, ErrInvalidGGUF, "%s: %s is not a GGUF file: it starts with %q, not the magic bytes %q (a corrupt file, or another format named .gguf)",
			where, shown, head[:], ggufMagic)
	}
	return nil
}

// ggufCatalogModel is the catalog model a GGUF folder names, from hints
// (the source's folder or prefix name) and root's folder name when it is
// one folder down; no config.json is read.
func (f *Fetcher) ggufCatalogModel(top, root string, hints ...string) string {
	if root != top {
		hints = append(hints, filepath.Base(root))
	}
	return f.catalogModel(hints...)
}

// ggufArchiveEntry reports whether an archive entry (cleaned, slash
// separated) is a .gguf file that ggufRoot could pick (at the top or in any
// folder), for the duplicate-entry check.
func ggufArchiveEntry(name string) bool { return isGGUFName(path.Base(name)) }
