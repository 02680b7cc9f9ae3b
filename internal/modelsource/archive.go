package modelsource

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/capstan-dev/capstan/internal/engines"
)

// ErrNoConfig is wrapped by the SourceError of a model folder or archive that
// has no config.json (errors.Is(err, ErrNoConfig)).
var ErrNoConfig = errors.New("no Hugging Face config.json")

// archiveState is what an extracted archive folder was made from.
const archiveStateFile = ".capstan-archive.json"

// ParseS3URI splits "s3://bucket/key" into bucket and key. The key may be
// empty ("s3://bucket/"); anything but an s3 URI with a valid bucket is an
// error.
func ParseS3URI(uri string) (bucket, key string, err error) {
	u, perr := url.Parse(uri)
	if perr != nil || u.Scheme != "s3" || u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", "", srcErr(ReasonInvalidSource, nil, "%q is not an S3 URI (s3://bucket/key)", uri)
	}
	bucket, key = u.Host, strings.TrimPrefix(u.Path, "/")
	if !bucketRE.MatchString(bucket) || strings.Contains(bucket, "..") {
		return "", "", srcErr(ReasonInvalidSource, nil, "%q: %q is not a valid bucket name", uri, bucket)
	}
	return bucket, key, nil
}

// Compression types of SageMaker's S3ModelDataSource.
const (
	CompressionGzip = "Gzip"
	CompressionNone = "None"
)

// FromModelData is the source of a SageMaker model's artifacts: uri is
// PrimaryContainer.ModelDataUrl or ModelDataSource.S3DataSource.S3Uri, and
// compression its CompressionType. "Gzip" (or "" with a key not ending in
// "/") is a gzip tar archive, SageMaker's classic model.tar.gz; "None" is an
// uncompressed prefix whose objects form the model folder.
func FromModelData(uri, compression string) (Source, error) {
	bucket, key, err := ParseS3URI(uri)
	if err != nil {
		return Source{}, err
	}
	switch compression {
	case "", CompressionGzip:
		if compression == "" && strings.HasSuffix(key, "/") {
			return Source{Type: TypeS3, Bucket: bucket, Location: key}, checkLocation(key)
		}
		src := Source{Type: TypeS3, Bucket: bucket, Location: key, Archive: true}
		return src, src.Validate()
	case CompressionNone:
		src := Source{Type: TypeS3, Bucket: bucket, Location: key}
		return src, src.Validate()
	}
	return Source{}, srcErr(ReasonInvalidSource, nil, "compression type %q is not supported (want Gzip or None)", compression)
}

// fetchS3Archive downloads a gzip tar archive and extracts it into
// CacheDir/s3-archive/<bucket>/<key>/. The extraction goes to a temporary
// folder that replaces the old one only once complete and checked; an
// archive whose ETag and size are unchanged is not downloaded again.
func (f *Fetcher) fetchS3Archive(ctx context.Context, src Source) (Result, error) {
	region := src.Region
	if region == "" {
		region = f.o.S3Region
	}
	client, err := f.s3Client(ctx, region)
	if err != nil {
		return Result{}, err
	}
	where := src.String()
	head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(src.Location)})
	if err != nil {
		return Result{}, s3Error(err, src.Bucket, src.Location, where)
	}
	etag, size := aws.ToString(head.ETag), aws.ToInt64(head.ContentLength)

	rel := filepath.Join(archiveDir, src.Bucket, filepath.FromSlash(src.Location))
	if err := noSymlinkBelow(f.o.CacheDir, rel); err != nil {
		return Result{}, srcErr(ReasonPathEscape, err, "the model cache folder for %s", where)
	}
	final := filepath.Join(f.o.CacheDir, rel)
	format := formatOf(src)
	if st := readArchiveState(final); st.Source == where && st.ETag == etag && st.Size == size && etag != "" {
		// The check is the one for the format asked for: one archive may be
		// fetched as a Hugging Face folder and as a GGUF model, into the
		// same folder. An extraction that fails it (cached by an older
		// capstan that did not check config.json, or fetched for the other
		// format) is fetched again, and refused; the cached one is kept.
		if dir, err := f.archiveModelDir(final, where, format); err == nil {
			return Result{Dir: dir, Model: f.archiveCatalogModel(final, dir, format), Files: st.Files, Bytes: st.Bytes}, nil
		}
	}

	in := &s3.GetObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(src.Location)}
	if etag != "" {
		in.IfMatch = aws.String(etag)
	}
	out, err := client.GetObject(ctx, in)
	if err != nil {
		return Result{}, s3Error(err, src.Bucket, src.Location, where)
	}
	defer out.Body.Close()
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "%s: creating its folder in the model cache", where)
	}
	tmp, err := os.MkdirTemp(parent, partPrefix+"*")
	if err == nil {
		err = os.Chmod(tmp, modelDirMode) // it becomes the model's folder
	}
	if err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "%s: creating a temporary folder in the model cache", where)
	}
	// The extraction counts against the per-archive limit, the compression
	// ratio and the whole cache's limit as it writes; whatever a failed one
	// wrote is removed and given back.
	f.budget.begin()
	defer f.budget.end()
	q := &archiveQuota{maxBytes: f.limits.MaxArchiveBytes, compressed: size, ratioFloor: f.ratioFloor, cache: &f.budget}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
			q.release()
		}
	}()
	x, err := extractTarGz(ctx, out.Body, tmp, q, f.maxArchiveEntries())
	if err != nil {
		var se *SourceError
		if errors.As(err, &se) {
			se.Message = where + ": " + se.Message
			return Result{}, se
		}
		return Result{}, s3Error(err, src.Bucket, src.Location, where)
	}
	if format == engines.FormatGGUF {
		err = checkArchiveGGUF(tmp, where, x)
	} else {
		err = checkArchiveConfig(tmp, where, x)
	}
	if err != nil {
		return Result{}, err
	}
	st := archiveState{Source: where, ETag: etag, Size: size, Files: x.files, Bytes: x.bytes}
	if err := writeArchiveState(tmp, st); err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "%s: writing its fetch state in the model cache", where)
	}
	// Swap the new folder in: the old one (if any) is moved aside first and
	// removed after, so the final path always holds a complete extraction.
	old := ""
	if _, err := os.Lstat(final); err == nil {
		old = tmp + ".old"
		if err := os.Rename(final, old); err != nil {
			return Result{}, srcErr(ReasonFetchFailed, err, "%s: moving the earlier extraction aside in the model cache", where)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		if old != "" {
			_ = os.Rename(old, final)
		}
		return Result{}, srcErr(ReasonFetchFailed, err, "%s: moving the extraction into place in the model cache", where)
	}
	keep = true
	if old != "" {
		os.RemoveAll(old)
	}
	var dir string
	if format == engines.FormatGGUF {
		if dir, err = ggufRoot(final); err != nil {
			return Result{}, ggufRootError(err, where, "archive")
		}
	} else if dir, err = modelRoot(final); err != nil {
		return Result{}, srcErr(ReasonNotFound, ErrNoConfig, "%s has no config.json", where)
	}
	return Result{Dir: dir, Model: f.archiveCatalogModel(final, dir, format), Files: x.files, Bytes: x.bytes, Downloaded: 1}, nil
}

// archiveModelDir is the model folder of a cached extraction (final) when
// it passes the checks of format, else the check's error: for FormatGGUF
// the folder holding the .gguf (checkGGUF), else the one holding
// config.json (checkConfig).
func (f *Fetcher) archiveModelDir(final, where string, format engines.ModelFormat) (string, error) {
	if format == engines.FormatGGUF {
		dir, err := ggufRoot(final)
		if err != nil {
			return "", ggufRootError(err, where, "archive")
		}
		return dir, checkGGUF(dir, where, shownPrefix(final, dir))
	}
	dir, err := modelRoot(final)
	if err != nil {
		return "", err
	}
	return dir, checkConfig(dir, where, "config.json")
}

// archiveCatalogModel names the catalog model of an extraction's model
// folder dir: by config.json's _name_or_path, or, for a GGUF model (which
// has none), by the name of the folder inside the archive that holds it.
func (f *Fetcher) archiveCatalogModel(final, dir string, format engines.ModelFormat) string {
	if format == engines.FormatGGUF {
		return f.ggufCatalogModel(final, dir)
	}
	return f.catalogModel(nameOrPath(dir))
}

// checkArchiveConfig refuses an extraction (in dir) whose config.json the
// engine could not use: none at the top or one folder down (NotFound,
// ErrNoConfig), in two folders, present as two archive entries, or not one
// JSON object (InvalidSource, ErrInvalidConfig). Messages name the archive
// (where) and its entries.
func checkArchiveConfig(dir, where string, x extraction) error {
	root, err := modelRoot(dir)
	var two *twoConfigs
	switch {
	case errors.Is(err, ErrNoConfig):
		return srcErr(ReasonNotFound, ErrNoConfig, "%s has no config.json (looked at the top of the archive and one folder down)", where)
	case errors.As(err, &two):
		return srcErr(ReasonInvalidSource, ErrInvalidConfig, "%s: %s: a model archive holds one model, with its config.json at the top or in one folder", where, two)
	case err != nil:
		return srcErr(ReasonFetchFailed, err, "%s: reading the extracted archive", where)
	}
	shown := "config.json"
	if root != dir {
		shown = filepath.Base(root) + "/config.json"
	}
	if names := x.configs[shown]; len(names) > 1 {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		return srcErr(ReasonInvalidSource, ErrInvalidConfig, "%s: the archive has %d entries for %s (%s); a model archive holds it once",
			where, len(names), shown, strings.Join(quoted, ", "))
	}
	return checkConfig(root, where, shown)
}

func (f *Fetcher) maxArchiveEntries() int {
	if f.o.MaxArchiveEntries > 0 {
		return f.o.MaxArchiveEntries
	}
	return DefaultMaxArchiveEntries
}

// twoConfigs is modelRoot's error for an archive with config.json in two
// folders (and none at the top): which model is meant is unclear.
type twoConfigs struct{ a, b string }

func (e *twoConfigs) Error() string { return fmt.Sprintf("config.json in both %s/ and %s/", e.a, e.b) }

// modelRoot is the folder of an extracted archive that holds config.json:
// the top, else the one folder directly below that has it. Errors:
// ErrNoConfig, *twoConfigs, or the folder's read error.
func modelRoot(dir string) (string, error) {
	if regular(filepath.Join(dir, "config.json")) {
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
		if regular(filepath.Join(dir, e.Name(), "config.json")) {
			if found != "" {
				return "", &twoConfigs{found, e.Name()}
			}
			found = e.Name()
		}
	}
	if found == "" {
		return "", ErrNoConfig
	}
	return filepath.Join(dir, found), nil
}

func regular(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// extraction is what extractTarGz wrote.
type extraction struct {
	files int
	bytes int64
	// configs lists, by path in the archive ("config.json",
	// "my-model/config.json"), the header names of the entries that wrote a
	// config.json at the top or one folder down: more than one name means
	// the archive holds that file twice, and only the last one would count.
	configs map[string][]string
	// ggufs is the same for every .gguf file, at any depth.
	ggufs map[string][]string
}

// extractTarGz writes the regular files and folders of a gzip tar stream
// under dir. Every entry must be a plain relative path (no "..", not
// absolute); links, devices, FIFOs and sparse files are refused
// (PathEscape / InvalidSource), as are more than maxEntries entries. Content
// is bounded by q (TooLarge, wrapping ErrTooLarge): each header is checked
// before its file is created, and every write is counted before it is made,
// so nothing is written past a limit. File modes are not taken from the
// archive. Errors name the archive entry, never dir; an error that is not a
// *SourceError is the stream's (the S3 read), for the caller to map.
func extractTarGz(ctx context.Context, r io.Reader, dir string, q *archiveQuota, maxEntries int) (x extraction, err error) {
	x.configs = map[string][]string{}
	x.ggufs = map[string][]string{}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return x, srcErr(ReasonInvalidSource, err, "not a gzip archive (a model.tar.gz is a gzip-compressed tar; use CompressionType None for an uncompressed prefix)")
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	entries := 0
	for {
		if err := ctx.Err(); err != nil {
			return x, srcErr(ReasonFetchFailed, err, "extraction cancelled")
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return x, nil
		}
		if err != nil {
			return x, srcErr(ReasonInvalidSource, err, "reading the archive")
		}
		entries++
		if entries > maxEntries {
			return x, srcErr(ReasonInvalidSource, nil, "the archive has more than %d entries", maxEntries)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(h.Name, "./")), "/")
		raw := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if raw == "" || raw == "." {
			continue // the archive's root folder
		}
		if err := safeRel(raw); err != nil || name != raw {
			if err == nil {
				err = errors.New("non-canonical path")
			}
			return x, srcErr(ReasonPathEscape, err, "refusing archive entry %q: it would not stay inside the model directory", h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := noSymlinkBelow(dir, name); err != nil {
				return x, srcErr(ReasonPathEscape, err, "archive entry %q", h.Name)
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return x, srcErr(ReasonFetchFailed, err, "extracting archive entry %q", h.Name)
			}
		case tar.TypeReg, tar.TypeRegA:
			if h.Size < 0 {
				return x, srcErr(ReasonInvalidSource, nil, "archive entry %q has a negative size", h.Name)
			}
			if err := q.check(h.Size, h.Name); err != nil {
				return x, err
			}
			if err := noSymlinkBelow(dir, name); err != nil {
				return x, srcErr(ReasonPathEscape, err, "archive entry %q", h.Name)
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return x, srcErr(ReasonFetchFailed, err, "extracting archive entry %q", h.Name)
			}
			fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return x, srcErr(ReasonFetchFailed, err, "extracting archive entry %q", h.Name)
			}
			n, err := io.Copy(&quotaWriter{w: fh, q: q, entry: h.Name}, io.LimitReader(tr, h.Size))
			if cerr := fh.Close(); err == nil {
				err = cerr
			}
			var se *SourceError
			if errors.As(err, &se) {
				return x, se // a limit
			}
			var local *fs.PathError
			if errors.As(err, &local) {
				return x, srcErr(ReasonFetchFailed, err, "writing archive entry %q", h.Name)
			}
			if err != nil {
				return x, err // the S3 read: mapped by the caller
			}
			if n != h.Size {
				return x, srcErr(ReasonInvalidSource, nil, "archive entry %q is truncated", h.Name)
			}
			x.bytes += n
			x.files++
			if path.Base(name) == "config.json" && strings.Count(name, "/") <= 1 {
				x.configs[name] = append(x.configs[name], h.Name)
			}
			if ggufArchiveEntry(name) {
				x.ggufs[name] = append(x.ggufs[name], h.Name)
			}
		case tar.TypeSymlink, tar.TypeLink:
			return x, srcErr(ReasonPathEscape, nil, "refusing archive entry %q: links are not allowed in a model archive", h.Name)
		default:
			return x, srcErr(ReasonInvalidSource, nil, "refusing archive entry %q: only regular files and folders are allowed (type %q)", h.Name, string(h.Typeflag))
		}
	}
}

type archiveState struct {
	Source string `json:"source"`
	ETag   string `json:"etag"`
	Size   int64  `json:"size"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
}

func readArchiveState(dir string) archiveState {
	var st archiveState
	b, err := os.ReadFile(filepath.Join(dir, archiveStateFile))
	if err == nil {
		_ = json.Unmarshal(b, &st)
	}
	return st
}

func writeArchiveState(dir string, st archiveState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, archiveStateFile), b)
}

// FetchModelData fetches a SageMaker model's artifacts (FromModelData, then
// Fetch) as a model of format (the engine's: "" or engines.FormatHF for a
// folder with config.json, engines.FormatGGUF for llama.cpp's .gguf file)
// and returns the model folder and its catalog model id ("" when not in
// the catalog); it implements endpoint.ModelSource. Errors are
// *SourceError.
func (f *Fetcher) FetchModelData(ctx context.Context, uri, compression string, format engines.ModelFormat) (dir, catalogModel string, err error) {
	src, err := FromModelData(uri, compression)
	if err != nil {
		return "", "", err
	}
	src.Format = format
	res, err := f.Fetch(ctx, src)
	if err != nil {
		return "", "", err
	}
	return res.Dir, res.Model, nil
}

// ModelDataProblem classifies e for SageMaker's CreateModel (it implements
// endpoint.ModelDataProblem): "NoConfig" when the folder or archive lacks a
// usable config.json (none: ErrNoConfig; not one JSON object, or more than
// one: ErrInvalidConfig) or, for a GGUF model, a usable .gguf file (none:
// ErrNoGGUF; two models, or not a GGUF file: ErrInvalidGGUF), else the Reason ("TooLarge" for ErrTooLarge);
// detail is the message without the reason prefix, with the cause unless
// the reason is NotFound or TooLarge (the message names the limit and its
// setting); without an S3 endpoint, the settings to configure. No detail
// shows a path on this machine (see srcErr).
func (e *SourceError) ModelDataProblem() (kind, detail string) {
	kind, detail = e.Reason, e.Message
	if errors.Is(e.Err, ErrNoConfig) || errors.Is(e.Err, ErrInvalidConfig) || errors.Is(e.Err, ErrNoGGUF) || errors.Is(e.Err, ErrInvalidGGUF) {
		return "NoConfig", detail
	}
	if errors.Is(e.Err, ErrTooLarge) {
		return ReasonTooLarge, detail
	}
	if errors.Is(e.Err, ErrS3NotConfigured) {
		return kind, ErrS3NotConfigured.Error() // the caller names the field and the URI
	}
	if e.Err != nil && e.Reason != ReasonNotFound {
		detail += ": " + e.Err.Error() // a missing bucket or key says it all without the SDK's text
	}
	return kind, detail
}
