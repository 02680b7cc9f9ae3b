package modelsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// hfMetadataFiles are the small files fetched from the hub besides the
// listing. The simulated engine needs only config.json; weights are listed
// (names and sizes, in the fetch state) but not downloaded.
var hfMetadataFiles = []string{"config.json", "generation_config.json", "tokenizer_config.json", "special_tokens_map.json"}

// maxHFFileBytes bounds one metadata download.
const maxHFFileBytes = 32 << 20

var commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

type hfSibling struct {
	RFilename string `json:"rfilename"`
	Size      int64  `json:"size"`
}

type hfRevisionInfo struct {
	SHA      string      `json:"sha"`
	Siblings []hfSibling `json:"siblings"`
}

// fetchHF lists the repo at the revision through the hub API
// (GET /api/models/{repo}/revision/{rev}) and downloads config.json and the
// other metadata files (GET /{repo}/resolve/{rev}/{file}) into
// CacheDir/huggingface/<org>/<model>/<rev>/. A pinned 40-hex commit already
// in the cache is used without contacting the hub.
func (f *Fetcher) fetchHF(ctx context.Context, src Source) (Result, error) {
	rev := revisionOf(src.HFRevision)
	org, name, _ := strings.Cut(src.HFModelID, "/")
	dir := filepath.Join(f.o.CacheDir, "huggingface", org, name, rev)
	if err := noSymlinkBelow(f.o.CacheDir, filepath.Join("huggingface", org, name, rev)); err != nil {
		return Result{}, srcErr(ReasonPathEscape, err, "the model cache folder for %s", src)
	}
	old := readState(dir)
	if commitSHA.MatchString(rev) && old.Revision == rev && regularOfSize(filepath.Join(dir, "config.json"), old.Files["config.json"].Size) {
		return f.hfResult(dir, src, old, 0), nil
	}

	var info hfRevisionInfo
	apiURL := f.o.HuggingFaceEndpoint + "/api/models/" + src.HFModelID + "/revision/" + url.PathEscape(rev) + "?blobs=true"
	if err := f.hfGetJSON(ctx, apiURL, src, &info); err != nil {
		return Result{}, err
	}
	have := map[string]hfSibling{}
	for _, s := range info.Siblings {
		have[s.RFilename] = s
	}
	if _, ok := have["config.json"]; !ok {
		return Result{}, srcErr(ReasonNotFound, nil, "Hugging Face repo %s at revision %s has no config.json", src.HFModelID, rev)
	}
	next := fetchState{Source: src.String(), Revision: info.SHA, Files: map[string]fileState{}}
	downloaded := 0
	for _, fn := range hfMetadataFiles {
		if _, ok := have[fn]; !ok {
			continue
		}
		if info.SHA != "" && old.Revision == info.SHA {
			if st, ok := old.Files[fn]; ok && regularOfSize(filepath.Join(dir, fn), st.Size) {
				next.Files[fn] = st
				continue
			}
		}
		fileURL := f.o.HuggingFaceEndpoint + "/" + src.HFModelID + "/resolve/" + url.PathEscape(rev) + "/" + fn
		n, err := f.hfDownload(ctx, fileURL, src, filepath.Join(dir, fn))
		if err != nil {
			return Result{}, err
		}
		next.Files[fn] = fileState{Size: n, Verified: "size"}
		downloaded++
	}
	if err := writeState(dir, next); err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "%s: writing its fetch state in the model cache", src)
	}
	if err := writeHFListing(dir, info.Siblings); err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "%s: writing its file listing in the model cache", src)
	}
	if commitSHA.MatchString(rev) {
		next.Revision = rev
		_ = writeState(dir, next)
	}
	return f.hfResult(dir, src, next, downloaded), nil
}

func (f *Fetcher) hfResult(dir string, src Source, st fetchState, downloaded int) Result {
	r := Result{Dir: dir, Model: f.catalogModel(src.HFModelID, nameOrPath(dir)), Downloaded: downloaded}
	for _, fs := range st.Files {
		r.Files++
		r.Bytes += fs.Size
	}
	return r
}

// writeHFListing records the repo's full file listing (weights included)
// beside the metadata, for tools that want to know the model's size.
func writeHFListing(dir string, sib []hfSibling) error {
	b, err := json.MarshalIndent(sib, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ".capstan-hf-files.json"), b)
}

func (f *Fetcher) hfRequest(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if f.o.HuggingFaceToken != "" {
		req.Header.Set("Authorization", "Bearer "+f.o.HuggingFaceToken)
	}
	req.Header.Set("User-Agent", "capstan-modelsource")
	return f.hf.Do(req)
}

func (f *Fetcher) hfGetJSON(ctx context.Context, u string, src Source, v any) error {
	resp, err := f.hfRequest(ctx, u)
	if err != nil {
		return f.hfTransportError(err, src)
	}
	defer resp.Body.Close()
	if err := hfStatusError(resp, src); err != nil {
		return err
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxHFFileBytes)).Decode(v); err != nil {
		return srcErr(ReasonFetchFailed, err, "the Hugging Face hub at %s answered with an unreadable model listing for %s", f.o.HuggingFaceEndpoint, src.HFModelID)
	}
	return nil
}

func (f *Fetcher) hfDownload(ctx context.Context, u string, src Source, dst string) (int64, error) {
	resp, err := f.hfRequest(ctx, u)
	if err != nil {
		return 0, f.hfTransportError(err, src)
	}
	defer resp.Body.Close()
	if err := hfStatusError(resp, src); err != nil {
		return 0, err
	}
	tmp, n, err := copyToTemp(filepath.Dir(dst), io.LimitReader(resp.Body, maxHFFileBytes+1))
	if err != nil {
		return 0, f.hfTransportError(err, src)
	}
	if n > maxHFFileBytes || (resp.ContentLength >= 0 && resp.ContentLength != n) {
		os.Remove(tmp)
		return 0, srcErr(ReasonFetchFailed, nil, "%s: got %d bytes, expected %d (limit %d)", u, n, resp.ContentLength, maxHFFileBytes)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return 0, srcErr(ReasonFetchFailed, err, "%s: moving it into place in the model cache", u)
	}
	return n, nil
}

// hfTransportError is the offline case: no answer from the hub at all.
func (f *Fetcher) hfTransportError(err error, src Source) error {
	var op *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	if errors.As(err, &op) || errors.As(err, &dns) || (errors.As(err, &ue) && ue.Timeout()) {
		return srcErr(ReasonUnreachable, err,
			"could not reach the Hugging Face hub at %s to fetch %s (this machine may be offline or the hub blocked): "+
				"copy the model folder to S3 and use modelSourceType: s3, or to an FSx path and use modelSourceType: fsx, "+
				"or set modelSources.huggingFaceEndpoint to a reachable mirror", f.o.HuggingFaceEndpoint, src.HFModelID)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return srcErr(ReasonFetchFailed, err, "fetching %s was cancelled", src)
	}
	return srcErr(ReasonFetchFailed, err, "fetching %s from the Hugging Face hub at %s", src.HFModelID, f.o.HuggingFaceEndpoint)
}

func hfStatusError(resp *http.Response, src Source) error {
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusNotFound:
		return srcErr(ReasonNotFound, nil, "Hugging Face repo %s (revision %s) or one of its files does not exist: %s", src.HFModelID, revisionOf(src.HFRevision), resp.Request.URL.Path)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return srcErr(ReasonAccessDenied, nil, "the Hugging Face hub refused access to %s (HTTP %d): a gated or private repo needs HF_TOKEN", src.HFModelID, resp.StatusCode)
	default:
		return srcErr(ReasonFetchFailed, fmt.Errorf("HTTP %d", resp.StatusCode), "the Hugging Face hub answered %s", resp.Request.URL.Path)
	}
}
