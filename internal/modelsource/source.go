package modelsource

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// Source types.
const (
	TypeS3          = "s3"
	TypeFSx         = "fsx"
	TypeHuggingFace = "huggingface"
	TypeJumpStart   = "jumpstart"
)

// Source says where a model comes from. Which fields matter depends on Type.
type Source struct {
	Type                     string // "s3", "fsx", "huggingface", "jumpstart"
	Bucket, Region, Location string // s3: bucket, region, key prefix (modelLocation)
	// Archive (s3 only) says Location is the key of one gzip tar archive
	// (SageMaker's model.tar.gz) to download and extract, not a prefix.
	Archive                                     bool
	FileSystemID, MountName                     string // fsx (+ Location: path inside the file system)
	HFModelID, HFRevision                       string // huggingface
	HubName, JumpStartModelID, JumpStartVersion string // jumpstart
	// Prefetch (modelSourceConfig.prefetchEnabled) additionally reads every
	// file once after fetching so the weights sit in the host page cache
	// before the engine starts, as HyperPod's prefetch loads them into RAM.
	Prefetch bool
	// Field is the manifest field that named the source
	// ("spec.modelSourceConfig.s3Storage"), for errors that are about the
	// field rather than the storage ("" = none: the caller names it).
	Field string
	// Format is what the engine loads from the folder, and so what the
	// fetch requires of it: engines.FormatHF ("" too) a Hugging Face
	// config.json, engines.FormatGGUF (llama.cpp) one .gguf file or split
	// model, starting with the GGUF magic bytes, and no config.json. Only
	// s3 and fsx sources hold GGUF models.
	Format engines.ModelFormat
}

// String is a short human form, e.g. "s3://models/llama-3.1-8b-instruct/".
func (s Source) String() string {
	switch s.Type {
	case TypeS3:
		if s.Archive {
			return "s3://" + s.Bucket + "/" + s.Location
		}
		return "s3://" + s.Bucket + "/" + prefixOf(s.Location)
	case TypeFSx:
		return "fsx://" + s.FileSystemID + "/" + s.MountName + "/" + strings.TrimPrefix(s.Location, "/")
	case TypeHuggingFace:
		return "hf://" + s.HFModelID + "@" + revisionOf(s.HFRevision)
	case TypeJumpStart:
		return "jumpstart://" + hubOf(s.HubName) + "/" + s.JumpStartModelID
	}
	return s.Type + "://?"
}

// key identifies a fetch for de-duplication: the same key means the same
// local folder. Format is not part of it: one archive fetched as a Hugging
// Face folder and as a GGUF model is one folder, so the two fetches must
// not run at once (they would swap extractions under each other); Fetch
// shares a result only between callers asking for the same format.
func (s Source) key() string { return s.String() }

// Reasons carried by SourceError; the deployment controller shows them as
// the failure reason.
const (
	ReasonNotFound         = "NotFound"         // bucket, prefix, folder, repo or config.json missing
	ReasonUnreachable      = "Unreachable"      // the storage or hub could not be reached
	ReasonAccessDenied     = "AccessDenied"     // credentials refused
	ReasonInvalidSource    = "InvalidSource"    // the source spec itself is wrong
	ReasonPathEscape       = "PathEscape"       // a key or path would leave the model directory
	ReasonChecksumMismatch = "ChecksumMismatch" // downloaded bytes do not match the object's checksum
	ReasonFetchFailed      = "FetchFailed"      // anything else (I/O, protocol)
	ReasonNotConfigured    = "NotConfigured"    // the server has no setting for this kind of storage (S3 endpoint)
	ReasonTooLarge         = "TooLarge"         // an archive past a size limit of the model cache (ErrTooLarge)
)

// SourceError is every error Fetch returns.
type SourceError struct {
	Reason  string // one of the Reason* constants
	Message string // says what was looked for, where, and what to do
	Err     error  // underlying cause, if any
}

func (e *SourceError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Reason + ": " + e.Message
}

func (e *SourceError) Unwrap() error { return e.Err }

// Reason returns err's SourceError reason, or "" when err is not one.
func Reason(err error) string {
	var se *SourceError
	if errors.As(err, &se) {
		return se.Reason
	}
	return ""
}

// srcErr builds a SourceError. Messages name the source (its URI), the
// object key or archive entry, never a path on this machine; a cause that
// carries one is wrapped by hidePath.
func srcErr(reason string, err error, format string, a ...any) *SourceError {
	return &SourceError{Reason: reason, Message: fmt.Sprintf(format, a...), Err: hidePath(err)}
}

// FromManifest reads the model source of an InferenceEndpointConfig
// (spec.modelSourceConfig) or a JumpStartModel (spec.model). The object is
// expected to be defaulted and validated already; missing pieces are still
// reported as *SourceError{Reason: InvalidSource} naming the field.
func FromManifest(obj manifest.Object) (Source, error) {
	switch o := obj.(type) {
	case *manifest.InferenceEndpointConfig:
		c := o.Spec.ModelSourceConfig
		if c == nil {
			return Source{}, srcErr(ReasonInvalidSource, nil, "spec.modelSourceConfig: required")
		}
		src := Source{Location: c.ModelLocation, Prefetch: c.PrefetchEnabled}
		switch c.ModelSourceType {
		case manifest.SourceS3:
			if c.S3Storage == nil {
				return Source{}, srcErr(ReasonInvalidSource, nil, "spec.modelSourceConfig.s3Storage: required for modelSourceType s3")
			}
			src.Type, src.Bucket, src.Region = TypeS3, c.S3Storage.BucketName, c.S3Storage.Region
			src.Field = "spec.modelSourceConfig.s3Storage"
		case manifest.SourceFSx:
			if c.FSxStorage == nil {
				return Source{}, srcErr(ReasonInvalidSource, nil, "spec.modelSourceConfig.fsxStorage: required for modelSourceType fsx")
			}
			src.Type, src.FileSystemID, src.MountName = TypeFSx, c.FSxStorage.FileSystemID, c.FSxStorage.MountName
			src.Field = "spec.modelSourceConfig.fsxStorage"
		case manifest.SourceHuggingFace:
			if c.HuggingFaceModel == nil {
				return Source{}, srcErr(ReasonInvalidSource, nil, "spec.modelSourceConfig.huggingFaceModel: required for modelSourceType huggingface")
			}
			src.Type, src.HFModelID, src.HFRevision = TypeHuggingFace, c.HuggingFaceModel.ModelID, c.HuggingFaceModel.CommitSHA
			src.Field = "spec.modelSourceConfig.huggingFaceModel"
		case manifest.SourceKubernetesVolume:
			return Source{}, srcErr(ReasonInvalidSource, nil, "spec.modelSourceConfig.modelSourceType: kubernetesVolume is not supported by capstan's embedded runtime; use s3, fsx or huggingface")
		default:
			return Source{}, srcErr(ReasonInvalidSource, nil, "spec.modelSourceConfig.modelSourceType: unsupported value %q (want s3, fsx or huggingface)", c.ModelSourceType)
		}
		return src, src.Validate()
	case *manifest.JumpStartModel:
		m := o.Spec.Model
		if m == nil {
			return Source{}, srcErr(ReasonInvalidSource, nil, "spec.model: required")
		}
		src := Source{Type: TypeJumpStart, HubName: m.ModelHubName, JumpStartModelID: m.ModelID, JumpStartVersion: m.ModelVersion, Field: "spec.model"}
		return src, src.Validate()
	case nil:
		return Source{}, srcErr(ReasonInvalidSource, nil, "no manifest object")
	default:
		return Source{}, srcErr(ReasonInvalidSource, nil, "kind %s has no model source", obj.GetKind())
	}
}

var (
	// bucketRE is S3's bucket naming rule (3–63 chars, lower case, digits, dots, hyphens).
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// hfRepoRE is a Hugging Face repo id: org/name.
	hfRepoRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	// revisionRE accepts a commit SHA or a branch/tag name without path tricks.
	revisionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// componentRE is one safe path component (FSx file system id, mount name).
	componentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// Validate checks the fields the Type needs; errors are *SourceError with
// Reason InvalidSource (or PathEscape for locations that climb out).
func (s Source) Validate() error {
	switch s.Format {
	case "", engines.FormatHF:
	case engines.FormatGGUF:
		if s.Type == TypeHuggingFace || s.Type == TypeJumpStart {
			return srcErr(ReasonInvalidSource, nil, "%s: a GGUF model (llama.cpp) comes from s3 or fsx: a %s source gives a Hugging Face config.json, no .gguf file", s, s.Type)
		}
	default:
		return srcErr(ReasonInvalidSource, nil, "model format %q is not one of %s, %s", s.Format, engines.FormatHF, engines.FormatGGUF)
	}
	switch s.Type {
	case TypeS3:
		if !bucketRE.MatchString(s.Bucket) || strings.Contains(s.Bucket, "..") {
			return srcErr(ReasonInvalidSource, nil, "s3 bucket name %q is not a valid bucket name", s.Bucket)
		}
		if s.Archive {
			if s.Location == "" || strings.HasSuffix(s.Location, "/") {
				return srcErr(ReasonInvalidSource, nil, "s3://%s/%s: an archive is one object, not a prefix (use CompressionType None for a prefix)", s.Bucket, s.Location)
			}
			if err := safeRel(s.Location); err != nil {
				return srcErr(ReasonPathEscape, err, "archive key %q is not a plain object key", s.Location)
			}
		}
		return checkLocation(s.Location)
	case TypeFSx:
		if !componentRE.MatchString(s.FileSystemID) || strings.Contains(s.FileSystemID, "..") {
			return srcErr(ReasonInvalidSource, nil, "fsx fileSystemId %q is not valid", s.FileSystemID)
		}
		if s.MountName != "" && (!componentRE.MatchString(s.MountName) || strings.Contains(s.MountName, "..")) {
			return srcErr(ReasonInvalidSource, nil, "fsx mountName %q is not valid", s.MountName)
		}
		return checkLocation(s.Location)
	case TypeHuggingFace:
		if !hfRepoRE.MatchString(s.HFModelID) || strings.Contains(s.HFModelID, "..") {
			return srcErr(ReasonInvalidSource, nil, "huggingFaceModel.modelId %q is not a Hugging Face repo id (org/model)", s.HFModelID)
		}
		if s.HFRevision != "" && (!revisionRE.MatchString(s.HFRevision) || strings.Contains(s.HFRevision, "..")) {
			return srcErr(ReasonInvalidSource, nil, "huggingFaceModel.commitSHA %q is not a valid revision", s.HFRevision)
		}
	case TypeJumpStart:
		if strings.TrimSpace(s.JumpStartModelID) == "" {
			return srcErr(ReasonInvalidSource, nil, "JumpStart model id is empty")
		}
		if !componentRE.MatchString(s.JumpStartModelID) || strings.Contains(s.JumpStartModelID, "..") {
			return srcErr(ReasonInvalidSource, nil, "JumpStart model id %q is not valid", s.JumpStartModelID)
		}
	default:
		return srcErr(ReasonInvalidSource, nil, "unknown model source type %q (want s3, fsx, huggingface or jumpstart)", s.Type)
	}
	return nil
}

// checkLocation refuses a modelLocation that climbs out of its bucket or
// file system ("..") or carries odd characters.
func checkLocation(loc string) error {
	if strings.ContainsAny(loc, "\x00\\") {
		return srcErr(ReasonInvalidSource, nil, "modelLocation %q contains a NUL or backslash", loc)
	}
	for _, part := range strings.Split(loc, "/") {
		if part == ".." {
			return srcErr(ReasonPathEscape, nil, "modelLocation %q climbs out of the storage root with \"..\"", loc)
		}
	}
	return nil
}

// prefixOf turns a modelLocation into an S3 key prefix: no leading slash,
// one trailing slash, "" for the whole bucket.
func prefixOf(loc string) string {
	p := strings.Trim(loc, "/")
	if p == "" || p == "." {
		return ""
	}
	return p + "/"
}

func revisionOf(r string) string {
	if r == "" {
		return "main"
	}
	return r
}

func hubOf(h string) string {
	if h == "" {
		return "SageMakerPublicHub"
	}
	return h
}
