package modelsource

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/internal/engines"
)

// fetchFSx resolves FSxRoot/<fileSystemId>/<mountName>/<modelLocation> and
// uses it in place (no copy). The folder and every file in it must resolve,
// through any symbolic links, to somewhere inside FSxRoot, and it must hold a
// config.json, or for a GGUF source a .gguf file (at the top or one folder
// down: Result.Dir is the folder that holds it).
func (f *Fetcher) fetchFSx(src Source) (Result, error) {
	if f.o.FSxRoot == "" {
		return Result{}, srcErr(ReasonInvalidSource, nil, "an fsx model source needs modelSources.fsxRoot (where FSx file systems are mounted) to be configured")
	}
	root, err := filepath.EvalSymlinks(f.o.FSxRoot)
	if err != nil {
		return Result{}, srcErr(ReasonNotFound, err, "fsxRoot %s is not accessible", f.o.FSxRoot)
	}
	loc := strings.Trim(src.Location, "/")
	want := filepath.Join(f.o.FSxRoot, src.FileSystemID, src.MountName, filepath.FromSlash(loc))
	where := "fsx file system " + src.FileSystemID + " mount " + quoteOrNone(src.MountName) + " location " + quoteOrNone(loc) + " (" + want + ")"
	dir, err := filepath.EvalSymlinks(want)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Result{}, srcErr(ReasonNotFound, nil, "%s does not exist", where)
		}
		return Result{}, srcErr(ReasonFetchFailed, err, "%s", where)
	}
	if !inside(root, dir) {
		return Result{}, srcErr(ReasonPathEscape, nil, "%s resolves to %s, outside fsxRoot %s", where, dir, root)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return Result{}, srcErr(ReasonNotFound, err, "%s is not a folder", where)
	}
	gguf := formatOf(src) == engines.FormatGGUF
	modelDir := dir
	if gguf {
		// The .gguf files engines.GGUFFile finds are regular files (not
		// links), inside dir and so inside fsxRoot.
		if modelDir, err = ggufRoot(dir); err != nil {
			return Result{}, ggufRootError(err, where, "folder")
		}
	} else {
		cfg, err := filepath.EvalSymlinks(filepath.Join(dir, "config.json"))
		if err != nil {
			return Result{}, srcErr(ReasonNotFound, nil, "no config.json in %s (a model folder needs a Hugging Face config.json)", where)
		}
		if ci, err := os.Stat(cfg); err != nil || !ci.Mode().IsRegular() {
			return Result{}, srcErr(ReasonNotFound, err, "config.json in %s is not a regular file", where)
		}
		if !inside(root, cfg) {
			return Result{}, srcErr(ReasonPathEscape, nil, "config.json in %s links to %s, outside fsxRoot %s", where, cfg, root)
		}
	}
	res := Result{Dir: modelDir}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t, err := filepath.EvalSymlinks(p)
			if err != nil || !inside(root, t) {
				rel, _ := filepath.Rel(dir, p)
				return srcErr(ReasonPathEscape, err, "%s in %s is a symbolic link that leads outside fsxRoot %s", rel, where, root)
			}
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				res.Files++
				res.Bytes += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		var se *SourceError
		if errors.As(err, &se) {
			return Result{}, se
		}
		return Result{}, srcErr(ReasonFetchFailed, err, "reading %s", where)
	}
	if gguf {
		if err := checkGGUF(modelDir, where, shownPrefix(dir, modelDir)); err != nil {
			return Result{}, err
		}
		res.Model = f.ggufCatalogModel(dir, modelDir, loc)
		return res, nil
	}
	res.Model = f.catalogModel(nameOrPath(dir), loc)
	return res, nil
}

// inside reports whether p is root or below it (both already resolved).
func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func quoteOrNone(s string) string {
	if s == "" {
		return `""`
	}
	return `"` + s + `"`
}
