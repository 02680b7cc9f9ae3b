package modelsource

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/engines"
)

// MaxS3Objects bounds how many objects one model prefix may hold; a model
// folder has tens of files, so more suggests a wrong modelLocation.
const MaxS3Objects = 10000

// s3API is the part of the S3 client a fetch uses. Its errors are the SDK's
// (smithy API errors, or transport errors when the endpoint is unreachable).
type s3API interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
}

var _ s3API = (*s3.Client)(nil)

// s3Settings names the settings that give capstan an S3 server and its
// credentials, for errors that ask for them.
const s3Settings = "set modelSources.s3.endpoint in capstan.yaml or start capstan serve with --s3-endpoint URL " +
	"(AWS S3 itself is https://s3.<region>.amazonaws.com), with the credentials modelSources.s3.accessKeyId and " +
	"modelSources.s3.secretAccessKey (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in capstan's environment)"

// ErrS3NotConfigured is wrapped by every error of an S3 use while no S3
// endpoint is configured (errors.Is(err, ErrS3NotConfigured)): an s3 model
// source, or a call on NewS3Client's client. capstan contacts no storage it
// was not told about, AWS S3 included.
var ErrS3NotConfigured = errors.New("no S3 endpoint is configured, and capstan contacts no storage it is not configured for: " + s3Settings)

// s3NotConfigured is the error of an s3 source while no endpoint is set.
func s3NotConfigured(src Source) *SourceError {
	field := ""
	if src.Field != "" {
		field = src.Field + ": "
	}
	return srcErr(ReasonNotConfigured, ErrS3NotConfigured, "%scannot fetch %s", field, src)
}

// s3Client returns the (cached) client for a region.
func (f *Fetcher) s3Client(ctx context.Context, region string) (s3API, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.s3[region]; ok {
		return c, nil
	}
	c, err := NewS3Client(ctx, f.o, region)
	if err != nil {
		return nil, srcErr(ReasonInvalidSource, err, "configuring the S3 client")
	}
	f.s3[region] = c
	return c, nil
}

// NewS3Client returns an S3 client for o's S3 settings in region ("" =
// o.S3Region, else us-east-1). It is the server's one S3 configuration:
// model sources and asynchronous inference both use it.
//
// With S3Endpoint set, the client uses it with path-style addressing. It
// signs with o's static keys, else with AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) from the environment, else
// not at all. Nothing else is read: no shared config or credentials file,
// no profile, and no credential source on the network (EC2 instance
// metadata, container credentials, SSO, STS).
//
// Without S3Endpoint the client is inert: every call fails with an error
// wrapping ErrS3NotConfigured before anything is sent. The only error is
// for half a key pair.
func NewS3Client(_ context.Context, o Options, region string) (*s3.Client, error) {
	if region == "" {
		region = o.S3Region
	}
	if region == "" {
		region = DefaultS3Region
	}
	creds, err := s3Credentials(o)
	if err != nil {
		return nil, err
	}
	so := s3.Options{
		Region:      region,
		Credentials: creds,
		// No output checksum to validate is not worth a log line.
		DisableLogOutputChecksumValidationSkipped: true,
	}
	if o.S3Endpoint == "" {
		so.HTTPClient = refuseS3{}
		so.Retryer = aws.NopRetryer{}
	} else {
		so.BaseEndpoint = aws.String(o.S3Endpoint)
		// S3-compatible servers rarely have per-bucket DNS names.
		so.UsePathStyle = true
	}
	return s3.New(so), nil
}

// s3Credentials is what NewS3Client signs with: o's static keys, else the
// environment's static keys, else anonymous (unsigned requests).
func s3Credentials(o Options) (aws.CredentialsProvider, error) {
	if (o.S3AccessKeyID == "") != (o.S3SecretAccessKey == "") {
		return nil, errors.New("modelSources.s3: accessKeyId and secretAccessKey go together")
	}
	if o.S3AccessKeyID != "" {
		return credentials.NewStaticCredentialsProvider(o.S3AccessKeyID, o.S3SecretAccessKey, ""), nil
	}
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" && secret != "" {
		return credentials.NewStaticCredentialsProvider(id, secret, os.Getenv("AWS_SESSION_TOKEN")), nil
	}
	return aws.AnonymousCredentials{}, nil
}

// refuseS3 is the HTTP client of an S3 client without an endpoint: it
// sends nothing.
type refuseS3 struct{}

var _ s3.HTTPClient = refuseS3{}

func (refuseS3) Do(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("S3 %s not sent: %w", r.Method, ErrS3NotConfigured)
}

type s3Object struct {
	key, rel string
	size     int64
	etag     string
}

// fetchS3 mirrors s3://bucket/prefix/ into CacheDir/s3/<bucket>/<prefix>/.
func (f *Fetcher) fetchS3(ctx context.Context, src Source) (Result, error) {
	region := src.Region
	if region == "" {
		region = f.o.S3Region
	}
	client, err := f.s3Client(ctx, region)
	if err != nil {
		return Result{}, err
	}
	prefix := prefixOf(src.Location)
	where := "s3://" + src.Bucket + "/" + prefix
	objs, err := listS3(ctx, client, src.Bucket, prefix)
	if err != nil {
		return Result{}, s3Error(err, src.Bucket, prefix, where)
	}
	if len(objs) == 0 {
		return Result{}, srcErr(ReasonNotFound, nil, "no objects under %s (bucket %q, prefix %q): check modelLocation", where, src.Bucket, prefix)
	}
	gguf := formatOf(src) == engines.FormatGGUF
	hasConfig, hasGGUF := false, false
	for _, o := range objs {
		if err := safeRel(o.rel); err != nil {
			return Result{}, srcErr(ReasonPathEscape, err, "refusing object key %q in bucket %q: it would not stay inside the model directory", o.key, src.Bucket)
		}
		hasConfig = hasConfig || o.rel == "config.json"
		// ggufRoot looks at the top and one folder down.
		hasGGUF = hasGGUF || (isGGUFName(path.Base(o.rel)) && strings.Count(o.rel, "/") <= 1)
	}
	switch {
	case gguf && !hasGGUF:
		return Result{}, srcErr(ReasonNotFound, ErrNoGGUF, "no .gguf file under %s: a llama.cpp model folder holds one .gguf file (or the shards of one split model), at the top of the prefix or one folder down", where)
	case !gguf && !hasConfig:
		return Result{}, srcErr(ReasonNotFound, ErrNoConfig, "no config.json under %s: object key %q does not exist in bucket %q (a model folder needs a Hugging Face config.json)", where, prefix+"config.json", src.Bucket)
	}

	dir := filepath.Join(f.o.CacheDir, "s3", src.Bucket, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	if err := noSymlinkBelow(f.o.CacheDir, filepath.Join("s3", src.Bucket, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))); err != nil {
		return Result{}, srcErr(ReasonPathEscape, err, "the model cache folder for %s", where)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, srcErr(ReasonFetchFailed, err, "%s: creating its folder in the model cache", where)
	}
	old := readState(dir)
	next := fetchState{Source: where, Files: map[string]fileState{}}
	var todo []s3Object
	var total int64
	for _, o := range objs {
		total += o.size
		if st, ok := old.Files[o.rel]; ok && st.Size == o.size && st.ETag == o.etag && regularOfSize(filepath.Join(dir, filepath.FromSlash(o.rel)), o.size) {
			next.Files[o.rel] = st
			continue
		}
		todo = append(todo, o)
	}

	var mu sync.Mutex
	err = f.parallel(ctx, len(todo), func(ctx context.Context, i int) error {
		o := todo[i]
		st, err := f.downloadS3(ctx, client, src.Bucket, dir, o)
		if err != nil {
			return err
		}
		mu.Lock()
		next.Files[o.rel] = st
		mu.Unlock()
		return nil
	})
	// Objects that disappeared from the prefix are removed locally, but only
	// files this fetcher wrote before: nothing else in the folder is touched.
	for rel := range old.Files {
		if _, keep := next.Files[rel]; !keep && !contains(objs, rel) && safeRel(rel) == nil {
			_ = os.Remove(filepath.Join(dir, filepath.FromSlash(rel)))
		}
	}
	// Record what is complete even after a failure so a retry resumes.
	if werr := writeState(dir, next); werr != nil && err == nil {
		err = srcErr(ReasonFetchFailed, werr, "%s: writing its fetch state in the model cache", where)
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{Dir: dir, Files: len(objs), Bytes: total, Downloaded: len(todo)}
	if gguf {
		if res.Dir, err = ggufRoot(dir); err != nil {
			return Result{}, ggufRootError(err, where, "prefix")
		}
		if err := checkGGUF(res.Dir, where, shownPrefix(dir, res.Dir)); err != nil {
			return Result{}, err
		}
		res.Model = f.ggufCatalogModel(dir, res.Dir, strings.TrimSuffix(prefix, "/"))
		return res, nil
	}
	res.Model = f.catalogModel(nameOrPath(dir), strings.TrimSuffix(prefix, "/"))
	return res, nil
}

func contains(objs []s3Object, rel string) bool {
	for _, o := range objs {
		if o.rel == rel {
			return true
		}
	}
	return false
}

func regularOfSize(p string, size int64) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

func listS3(ctx context.Context, c s3API, bucket, prefix string) ([]s3Object, error) {
	var out []s3Object
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			rel := strings.TrimPrefix(key, prefix)
			if strings.HasSuffix(key, "/") && aws.ToInt64(o.Size) == 0 {
				continue // a "folder" marker object
			}
			out = append(out, s3Object{key: key, rel: rel, size: aws.ToInt64(o.Size), etag: aws.ToString(o.ETag)})
			if len(out) > MaxS3Objects {
				return nil, srcErr(ReasonInvalidSource, nil, "more than %d objects under s3://%s/%s; point modelLocation at one model folder", MaxS3Objects, bucket, prefix)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// downloadS3 fetches one object into a temp file, verifies it and renames it
// into place.
func (f *Fetcher) downloadS3(ctx context.Context, c s3API, bucket, dir string, o s3Object) (fileState, error) {
	rel := filepath.FromSlash(o.rel)
	if err := noSymlinkBelow(dir, rel); err != nil {
		return fileState{}, srcErr(ReasonPathEscape, err, "refusing to write object %q", o.key)
	}
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key), ChecksumMode: types.ChecksumModeEnabled}
	if o.etag != "" {
		in.IfMatch = aws.String(o.etag) // the version listed, not a newer one
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		return fileState{}, s3Error(err, bucket, o.key, "s3://"+bucket+"/"+o.key)
	}
	defer out.Body.Close()
	sha, md := sha256.New(), md5.New()
	dst := filepath.Join(dir, rel)
	tmp, n, err := copyToTemp(filepath.Dir(dst), io.TeeReader(out.Body, io.MultiWriter(sha, md)))
	if err != nil {
		if strings.Contains(err.Error(), "checksum did not match") {
			return fileState{}, srcErr(ReasonChecksumMismatch, err, "object s3://%s/%s", bucket, o.key)
		}
		return fileState{}, s3Error(err, bucket, o.key, "s3://"+bucket+"/"+o.key)
	}
	verified, verr := verifyObject(out, o, n, sha, md)
	if verr != nil {
		os.Remove(tmp)
		return fileState{}, srcErr(ReasonChecksumMismatch, verr, "object s3://%s/%s", bucket, o.key)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fileState{}, srcErr(ReasonFetchFailed, err, "object s3://%s/%s: moving it into place in the model cache", bucket, o.key)
	}
	return fileState{Size: n, ETag: o.etag, Verified: verified}, nil
}

var md5ETag = regexp.MustCompile(`^[0-9a-f]{32}$`)

// verifyObject checks the downloaded bytes against what S3 says about them:
// the full-object SHA-256 checksum when the object has one; otherwise the
// ETag, which is the MD5 of the content for objects uploaded in one part
// without SSE-KMS (multipart ETags end in "-N" and are not checked). CRC
// checksums are verified by the SDK while reading. The size always is.
func verifyObject(out *s3.GetObjectOutput, o s3Object, n int64, sha, md hash.Hash) (string, error) {
	if n != o.size || (out.ContentLength != nil && *out.ContentLength != n) {
		return "", fmt.Errorf("got %d bytes, listed size %d", n, o.size)
	}
	if cs := aws.ToString(out.ChecksumSHA256); cs != "" && !strings.Contains(cs, "-") && out.ChecksumType != types.ChecksumTypeComposite {
		if got := base64.StdEncoding.EncodeToString(sha.Sum(nil)); got != cs {
			return "", fmt.Errorf("SHA-256 %s, object checksum %s", got, cs)
		}
		return "sha256", nil
	}
	etag := strings.Trim(aws.ToString(out.ETag), `"`)
	if etag == "" {
		etag = strings.Trim(o.etag, `"`)
	}
	if md5ETag.MatchString(etag) && out.ServerSideEncryption != types.ServerSideEncryptionAwsKms && out.ServerSideEncryption != types.ServerSideEncryptionAwsKmsDsse {
		if got := hex.EncodeToString(md.Sum(nil)); got != etag {
			return "", fmt.Errorf("MD5 %s, ETag %s", got, etag)
		}
		return "md5", nil
	}
	switch {
	case aws.ToString(out.ChecksumCRC32) != "":
		return "crc32", nil
	case aws.ToString(out.ChecksumCRC32C) != "":
		return "crc32c", nil
	case aws.ToString(out.ChecksumCRC64NVME) != "":
		return "crc64nvme", nil
	}
	return "size", nil
}

// s3Error maps an SDK error onto a SourceError naming the bucket and key.
func s3Error(err error, bucket, key, where string) error {
	var se *SourceError
	if errors.As(err, &se) {
		return se
	}
	var nsb *types.NoSuchBucket
	var nsk *types.NoSuchKey
	var api smithy.APIError
	switch {
	case errors.As(err, &nsb):
		return srcErr(ReasonNotFound, err, "bucket %q does not exist (looking for %s)", bucket, where)
	case errors.As(err, &nsk):
		return srcErr(ReasonNotFound, err, "object key %q does not exist in bucket %q", key, bucket)
	case errors.As(err, &api):
		switch api.ErrorCode() {
		case "NoSuchBucket":
			return srcErr(ReasonNotFound, err, "bucket %q does not exist (looking for %s)", bucket, where)
		case "NoSuchKey", "NotFound":
			return srcErr(ReasonNotFound, err, "object key %q does not exist in bucket %q", key, bucket)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken":
			return srcErr(ReasonAccessDenied, err, "S3 refused access to %s: check the S3 credentials (modelSources.s3.accessKeyId and modelSources.s3.secretAccessKey, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in capstan's environment)", where)
		case "PreconditionFailed":
			return srcErr(ReasonFetchFailed, err, "%s changed while it was being fetched; retry", where)
		}
	}
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) || errors.As(err, &dns) {
		return srcErr(ReasonUnreachable, err, "could not reach the S3 endpoint for %s: check modelSources.s3.endpoint", where)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return srcErr(ReasonFetchFailed, err, "fetching %s was cancelled", where)
	}
	return srcErr(ReasonFetchFailed, err, "fetching %s", where)
}

// parallel runs fn for 0..n-1 on at most ParallelDownloads goroutines and
// returns the first error; the others are cancelled.
func (f *Fetcher) parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	if n == 0 {
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idx := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := 0; w < min(n, f.o.ParallelDownloads); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case idx <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if first == nil && parent.Err() != nil {
		return srcErr(ReasonFetchFailed, parent.Err(), "fetch cancelled")
	}
	return first
}
