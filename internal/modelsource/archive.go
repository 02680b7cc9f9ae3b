package modelsource

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Archive limits (Options.MaxArchiveBytes / MaxArchiveEntries override them).
const (
	// DefaultMaxArchiveBytes bounds the extracted size of one model archive.
	DefaultMaxArchiveBytes int64 = 64 << 30
	// DefaultMaxArchiveEntries bounds the number of entries in one archive; a
	// model archive holds tens of files.
	DefaultMaxArchiveEntries = 10000
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

	rel := filepath.Join("s3-archive", src.Bucket, filepath.FromSlash(src.Location))
	if err := noSymlinkBelow(f.o.CacheDir, rel); err != nil {
		return Result{}, srcErr(ReasonPathEscape, err, "cache folder for %s", where)
	}
	final := filepath.Join(f.o.CacheDir, rel)
	if st := readArchiveState(final); st.Source == where && st.ETag == etag && st.Size == size && etag != "" {
		if dir, err := modelRoot(final); err == nil {
			return Result{Dir: dir, Model: f.catalogModel(nameOrPath(dir)), Files: st.Files, Bytes: st.Bytes}, nil
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
		return Result{}, srcErr(ReasonFetchFailed, err, "creating %s", parent)
	}
	tmp, err := os.MkdirTemp(parent, partPrefix+"*")
	if err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "creating a folder in %s", parent)
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	files, bytes, err := extractTarGz(ctx, out.Body, tmp, f.maxArchiveBytes(), f.maxArchiveEntries())
	if err != nil {
		var se *SourceError
		if errors.As(err, &se) {
			se.Message = where + ": " + se.Message
			return Result{}, se
		}
		return Result{}, s3Error(err, src.Bucket, src.Location, where)
	}
	if _, err := modelRoot(tmp); err != nil {
		return Result{}, srcErr(ReasonNotFound, ErrNoConfig, "%s has no config.json (looked at the top of the archive and one folder down)", where)
	}
	st := archiveState{Source: where, ETag: etag, Size: size, Files: files, Bytes: bytes}
	if err := writeArchiveState(tmp, st); err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "writing the fetch state in %s", tmp)
	}
	// Swap the new folder in: the old one (if any) is moved aside first and
	// removed after, so the final path always holds a complete extraction.
	old := ""
	if _, err := os.Lstat(final); err == nil {
		old = tmp + ".old"
		if err := os.Rename(final, old); err != nil {
			return Result{}, srcErr(ReasonFetchFailed, err, "replacing %s", final)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		if old != "" {
			_ = os.Rename(old, final)
		}
		return Result{}, srcErr(ReasonFetchFailed, err, "placing %s", final)
	}
	keep = true
	if old != "" {
		os.RemoveAll(old)
	}
	dir, err := modelRoot(final)
	if err != nil {
		return Result{}, srcErr(ReasonNotFound, ErrNoConfig, "%s has no config.json", where)
	}
	return Result{Dir: dir, Model: f.catalogModel(nameOrPath(dir)), Files: files, Bytes: bytes, Downloaded: 1}, nil
}

func (f *Fetcher) maxArchiveBytes() int64 {
	if f.o.MaxArchiveBytes > 0 {
		return f.o.MaxArchiveBytes
	}
	return DefaultMaxArchiveBytes
}

func (f *Fetcher) maxArchiveEntries() int {
	if f.o.MaxArchiveEntries > 0 {
		return f.o.MaxArchiveEntries
	}
	return DefaultMaxArchiveEntries
}

// modelRoot is the folder of an extracted archive that holds config.json:
// the top, else the one folder directly below that has it.
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
				return "", fmt.Errorf("config.json in both %s and %s", found, e.Name())
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

// extractTarGz writes the regular files and folders of a gzip tar stream
// under dir. Every entry must be a plain relative path (no "..", not
// absolute); links, devices, FIFOs and sparse files are refused
// (PathEscape / InvalidSource), as are more than maxEntries entries or more
// than maxBytes of content (checked against each header before writing and
// enforced while copying). File modes are not taken from the archive.
func extractTarGz(ctx context.Context, r io.Reader, dir string, maxBytes int64, maxEntries int) (files int, total int64, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, 0, srcErr(ReasonInvalidSource, err, "not a gzip archive (a model.tar.gz is a gzip-compressed tar; use CompressionType None for an uncompressed prefix)")
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	entries := 0
	for {
		if err := ctx.Err(); err != nil {
			return files, total, srcErr(ReasonFetchFailed, err, "extraction cancelled")
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, total, nil
		}
		if err != nil {
			return files, total, srcErr(ReasonInvalidSource, err, "reading the archive")
		}
		entries++
		if entries > maxEntries {
			return files, total, srcErr(ReasonInvalidSource, nil, "the archive has more than %d entries", maxEntries)
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
			return files, total, srcErr(ReasonPathEscape, err, "refusing archive entry %q: it would not stay inside the model directory", h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := noSymlinkBelow(dir, name); err != nil {
				return files, total, srcErr(ReasonPathEscape, err, "archive entry %q", h.Name)
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return files, total, srcErr(ReasonFetchFailed, err, "creating %s", dst)
			}
		case tar.TypeReg, tar.TypeRegA:
			if h.Size < 0 || h.Size > maxBytes-total {
				return files, total, srcErr(ReasonInvalidSource, nil, "the archive's content exceeds %d bytes (entry %q is %d bytes)", maxBytes, h.Name, h.Size)
			}
			if err := noSymlinkBelow(dir, name); err != nil {
				return files, total, srcErr(ReasonPathEscape, err, "archive entry %q", h.Name)
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return files, total, srcErr(ReasonFetchFailed, err, "creating %s", filepath.Dir(dst))
			}
			fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return files, total, srcErr(ReasonFetchFailed, err, "writing %s", dst)
			}
			n, err := io.Copy(fh, io.LimitReader(tr, h.Size))
			if cerr := fh.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return files, total, err // mapped by the caller (a transport error is the S3 read)
			}
			if n != h.Size {
				return files, total, srcErr(ReasonInvalidSource, nil, "archive entry %q is truncated", h.Name)
			}
			total += n
			files++
		case tar.TypeSymlink, tar.TypeLink:
			return files, total, srcErr(ReasonPathEscape, nil, "refusing archive entry %q: links are not allowed in a model archive", h.Name)
		default:
			return files, total, srcErr(ReasonInvalidSource, nil, "refusing archive entry %q: only regular files and folders are allowed (type %q)", h.Name, string(h.Typeflag))
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
// Fetch) and returns the model folder and its catalog model id ("" when not
// in the catalog); it implements endpoint.ModelSource. Errors are
// *SourceError.
func (f *Fetcher) FetchModelData(ctx context.Context, uri, compression string) (dir, catalogModel string, err error) {
	src, err := FromModelData(uri, compression)
	if err != nil {
		return "", "", err
	}
	res, err := f.Fetch(ctx, src)
	if err != nil {
		return "", "", err
	}
	return res.Dir, res.Model, nil
}

// ModelDataProblem classifies e for SageMaker's CreateModel (it implements
// endpoint.ModelDataProblem): "NoConfig" when the folder or archive lacks
// config.json, else the Reason; detail is the message without the reason
// prefix, with the cause unless the reason is NotFound; without an S3
// endpoint, the settings to configure.
func (e *SourceError) ModelDataProblem() (kind, detail string) {
	kind, detail = e.Reason, e.Message
	if errors.Is(e.Err, ErrNoConfig) {
		return "NoConfig", detail
	}
	if errors.Is(e.Err, ErrS3NotConfigured) {
		return kind, ErrS3NotConfigured.Error() // the caller names the field and the URI
	}
	if e.Err != nil && e.Reason != ReasonNotFound {
		detail += ": " + e.Err.Error() // a missing bucket or key says it all without the SDK's text
	}
	return kind, detail
}
