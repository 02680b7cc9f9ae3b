package modelsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/engines"
)

// Defaults for Options.
const (
	DefaultHuggingFaceEndpoint = "https://huggingface.co"
	DefaultS3Region            = "us-east-1"
	// DefaultParallelDownloads is how many objects one fetch downloads at once.
	DefaultParallelDownloads = 4
	// hfTimeout bounds each Hugging Face request; the hub answers in well under
	// a second when reachable.
	hfTimeout = 30 * time.Second
)

// Options configure a Fetcher. The serve config's modelSources block maps
// onto them (see docs/model-sources.md).
type Options struct {
	// CacheDir holds downloaded and generated model folders (required).
	CacheDir string
	// S3Endpoint is the URL of the S3 server (moto, MinIO, or AWS S3's
	// https://s3.<region>.amazonaws.com), used with path-style addressing.
	// "" = none: s3 sources are refused with ReasonNotConfigured before
	// anything is contacted.
	S3Endpoint string
	// S3Region is used when a source names no region (default us-east-1).
	S3Region string
	// S3AccessKeyID/S3SecretAccessKey are static credentials; when empty,
	// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from the environment, else
	// unsigned requests. The AWS default chain is never walked (see
	// NewS3Client).
	S3AccessKeyID, S3SecretAccessKey string
	// FSxRoot is where FSx file systems are mounted: an fsx source is the
	// folder FSxRoot/<fileSystemId>/<mountName>/<modelLocation> (required
	// for fsx sources).
	FSxRoot string
	// HuggingFaceEndpoint is the hub URL (default https://huggingface.co).
	HuggingFaceEndpoint string
	// HuggingFaceToken authenticates to the hub; "" = $HF_TOKEN if set.
	HuggingFaceToken string
	// HTTPClient is used for the hub; nil = a client with a 30 s timeout.
	HTTPClient *http.Client
	// Catalog resolves JumpStart ids and catalog model names (default catalog.Default()).
	Catalog *catalog.Catalog
	Logger  *slog.Logger
	// Clock times fetches for the logs (default clock.Real{}).
	Clock clock.Clock
	// ParallelDownloads bounds concurrent object downloads per fetch (default 4).
	ParallelDownloads int
	// MaxArchiveBytes bounds the bytes one model archive (s3 Archive source)
	// may extract to; 0 = the smaller of DefaultMaxArchiveBytes (64 GiB) and
	// half the space free in CacheDir's file system at New.
	MaxArchiveBytes int64
	// MaxCacheBytes bounds the whole cache: an extraction that would take
	// it past this is refused; 0 = the smaller of DefaultMaxCacheBytes
	// (1 TiB) and what the cache holds at New plus 80% of the space then
	// free. Both are counted on the bytes written (see Limits).
	MaxCacheBytes int64
	// MaxArchiveEntries bounds the entries of one archive (default 10 000).
	MaxArchiveEntries int
}

// Result is a fetched model folder.
type Result struct {
	// Dir holds config.json (and, for s3/fsx, everything under the prefix);
	// for a GGUF source, the .gguf file (engines.GGUFFile(Dir) finds it).
	Dir string
	// Model is the catalog model id when the model is known to the catalog
	// ("" otherwise); the architecture itself always comes from
	// Dir/config.json. A GGUF model's is found by its folder's name only.
	Model string
	// Files and Bytes count what Dir holds from the source: for s3 every
	// object (downloaded or already current), for fsx every regular file, for
	// huggingface the files downloaded, for jumpstart the generated config.json.
	Files int
	Bytes int64
	// Downloaded counts the objects actually transferred by this call (s3 and
	// huggingface); 0 when everything was already current.
	Downloaded int
}

// Fetcher materialises model sources as local folders. Fetch is idempotent
// and safe for concurrent use: concurrent calls for the same source share one
// download.
type Fetcher struct {
	o   Options
	log *slog.Logger
	cat *catalog.Catalog
	hf  *http.Client
	clk clock.Clock

	limits     Limits
	budget     cacheBudget // the cache's bytes, against limits.MaxCacheBytes
	ratioFloor int64       // see MaxArchiveRatio (tests lower it)

	mu       sync.Mutex
	inflight map[string]*call
	s3       map[string]s3API // by region
	lock     *os.File         // the cache lock, held shared (openCache); nil after Close
}

type call struct {
	done    chan struct{}
	res     Result
	err     error
	waiters int // callers sharing this fetch (guarded by Fetcher.mu; read by tests)
	// removal marks the slot of a folder being removed (removeArchive):
	// a fetch of the source waits for it, then fetches afresh.
	removal bool
	// format is what the fetch checks the folder for (formatOf): a caller
	// asking for another format waits for it, then fetches afresh.
	format engines.ModelFormat
}

// New checks the options, creates the cache directory and removes from it
// the leftovers of downloads and extractions cut short by a crash or kill -9
// (every ".capstan-part-*" file, folder or link inside the cache, none
// outside: links are not followed), unless another live Fetcher uses the
// same cache. It does not touch the network.
func New(o Options) (*Fetcher, error) {
	if strings.TrimSpace(o.CacheDir) == "" {
		return nil, errors.New("modelsource: CacheDir is required")
	}
	abs, err := filepath.Abs(o.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("modelsource: cache dir: %w", err)
	}
	o.CacheDir = abs
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("modelsource: cache dir: %w", err)
	}
	if o.FSxRoot != "" {
		if o.FSxRoot, err = filepath.Abs(o.FSxRoot); err != nil {
			return nil, fmt.Errorf("modelsource: fsx root: %w", err)
		}
	}
	if o.S3Region == "" {
		o.S3Region = DefaultS3Region
	}
	if o.HuggingFaceEndpoint == "" {
		o.HuggingFaceEndpoint = DefaultHuggingFaceEndpoint
	}
	o.HuggingFaceEndpoint = strings.TrimRight(o.HuggingFaceEndpoint, "/")
	if o.HuggingFaceToken == "" {
		o.HuggingFaceToken = os.Getenv("HF_TOKEN")
	}
	if o.ParallelDownloads <= 0 {
		o.ParallelDownloads = DefaultParallelDownloads
	}
	f := &Fetcher{o: o, log: o.Logger, cat: o.Catalog, hf: o.HTTPClient, inflight: map[string]*call{}, s3: map[string]s3API{}}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.cat == nil {
		f.cat = catalog.Default()
	}
	if f.hf == nil {
		f.hf = &http.Client{Timeout: hfTimeout}
	}
	f.clk = o.Clock
	if f.clk == nil {
		f.clk = clock.Real{}
	}
	f.openCache()
	lim, err := computeLimits(o, o.CacheDir)
	if err != nil {
		f.log.Warn("model cache: free space unknown, default size limits not scaled to it", "dir", o.CacheDir, "err", err)
	}
	f.limits = lim
	f.budget = cacheBudget{max: lim.MaxCacheBytes, dir: o.CacheDir}
	f.ratioFloor = ratioFloor
	f.log.Info("model cache limits", "dir", o.CacheDir,
		"maxArchiveBytes", lim.MaxArchiveBytes, "maxArchiveBytesDefault", lim.ArchiveDefaulted,
		"maxCacheBytes", lim.MaxCacheBytes, "maxCacheBytesDefault", lim.CacheDefaulted,
		"freeBytes", lim.FreeBytes, "cacheBytes", lim.CacheBytes)
	return f, nil
}

// Fetch makes src available as a local folder holding config.json (or, for
// a GGUF source, a .gguf file). Errors are always *SourceError. A second
// call for the same source and format while one runs waits for it and
// shares its result (or returns ctx's error if ctx ends first); one for
// another format waits, then fetches itself, as a later call does: it
// re-checks the source and transfers only what changed.
func (f *Fetcher) Fetch(ctx context.Context, src Source) (Result, error) {
	if err := src.Validate(); err != nil {
		return Result{}, err
	}
	k, format := src.key(), formatOf(src)
	var c *call
	for {
		f.mu.Lock()
		cur, running := f.inflight[k]
		if !running {
			c = &call{done: make(chan struct{}), format: format}
			f.inflight[k] = c
		} else if !cur.removal && cur.format == format {
			cur.waiters++
		}
		f.mu.Unlock()
		if !running {
			break
		}
		select {
		case <-cur.done:
			if cur.removal || cur.format != format {
				continue // the folder was removed meanwhile, or fetched for another format: fetch it afresh
			}
			return cur.res, cur.err
		case <-ctx.Done():
			return Result{}, srcErr(ReasonFetchFailed, ctx.Err(), "waiting for the fetch of %s in progress", src)
		}
	}
	// The download itself is not tied to the first caller's ctx alone: others
	// may be waiting on it. It runs under ctx; if ctx ends, waiters get the
	// error and may retry.
	c.res, c.err = f.fetch(ctx, src)
	f.mu.Lock()
	delete(f.inflight, k)
	f.mu.Unlock()
	close(c.done)
	if c.err == nil && src.Prefetch {
		warm(c.res.Dir)
	}
	return c.res, c.err
}

// Check refuses, before anything is contacted, a source this server has no
// settings for: an s3 source while no S3 endpoint is configured. The
// manifests' Apply calls it, so such a manifest is refused at the door
// naming its field; Fetch calls it too.
func (f *Fetcher) Check(src Source) error {
	if src.Type == TypeS3 && f.o.S3Endpoint == "" {
		return s3NotConfigured(src)
	}
	return nil
}

func (f *Fetcher) fetch(ctx context.Context, src Source) (Result, error) {
	start := f.clk.Now()
	var res Result
	var err error
	switch src.Type {
	case TypeS3:
		if err = f.Check(src); err != nil {
			break
		}
		if src.Archive {
			res, err = f.fetchS3Archive(ctx, src)
		} else {
			res, err = f.fetchS3(ctx, src)
		}
	case TypeFSx:
		res, err = f.fetchFSx(src)
	case TypeHuggingFace:
		res, err = f.fetchHF(ctx, src)
	case TypeJumpStart:
		res, err = f.fetchJumpStart(src)
	}
	if err == nil {
		// The engine reads config.json when it starts: one that is not a
		// JSON object fails the fetch now, not the endpoint later; llama.cpp
		// loads the .gguf file, which must be one model in GGUF.
		// (Archives are checked before they enter the cache.)
		if formatOf(src) == engines.FormatGGUF {
			err = checkGGUF(res.Dir, src.String(), "")
		} else {
			err = checkConfig(res.Dir, src.String(), "config.json")
		}
	}
	if err != nil {
		var se *SourceError
		if !errors.As(err, &se) {
			err = srcErr(ReasonFetchFailed, err, "fetching %s", src)
		}
		attrs := []any{"source", src.String(), "reason", Reason(err), "err", err}
		var local *localError
		if errors.As(err, &local) {
			attrs = append(attrs, "localErr", local.Path()) // the server path, for the operator only
		}
		f.log.Warn("model source fetch failed", attrs...)
		return Result{}, err
	}
	f.log.Info("model source ready", "source", src.String(), "dir", res.Dir, "model", res.Model,
		"files", res.Files, "bytes", res.Bytes, "downloaded", res.Downloaded, "took", f.clk.Now().Sub(start))
	return res, nil
}

// catalogModel names the catalog model a folder holds, by its config.json's
// _name_or_path or by the given hints (folder name, repo id), or "".
func (f *Fetcher) catalogModel(hints ...string) string {
	for _, h := range hints {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if m, err := f.cat.Model(h); err == nil {
			return m.ID
		}
		if m, err := f.cat.Model(filepath.Base(h)); err == nil {
			return m.ID
		}
	}
	return ""
}

// warm reads every regular file under dir once, so the OS page cache holds
// the weights before the engine starts (prefetchEnabled). Errors are
// ignored: prefetch is an optimisation.
func warm(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fh, err := os.Open(p); err == nil {
			_, _ = io.Copy(io.Discard, fh)
			fh.Close()
		}
		return nil
	})
}
