package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engines"
)

// DefaultModelDataTimeout bounds the download and extraction of a model's
// artifacts during CreateModel.
const DefaultModelDataTimeout = 5 * time.Minute

// ModelSource makes a SageMaker model's artifacts a local model folder
// (*modelsource.Fetcher implements it).
type ModelSource interface {
	// FetchModelData fetches the artifacts at uri (an s3:// URI) with
	// SageMaker's CompressionType compression ("" when the request gave
	// none: ModelDataUrl) and returns the folder holding the model in
	// format (config.json, or a .gguf file for llama.cpp) and
	// the catalog model it is ("" when none). Errors may implement
	// ModelDataProblem to say what went wrong.
	FetchModelData(ctx context.Context, uri, compression string, format engines.ModelFormat) (dir, catalogModel string, err error)
}

// ModelDataProblem is implemented by ModelSource errors: kind is
// ProblemNoConfig, ProblemNotFound, ProblemAccessDenied or another word;
// detail says what was looked for and where.
type ModelDataProblem interface {
	error
	ModelDataProblem() (kind, detail string)
}

// Kinds of ModelDataProblem.
const (
	ProblemNoConfig     = "NoConfig"
	ProblemNotFound     = "NotFound"
	ProblemAccessDenied = "AccessDenied"
	// ProblemTooLarge: the artifacts are past a size limit of the model
	// cache; detail names the limit and its setting.
	ProblemTooLarge = "TooLarge"
)

// ModelDataCache is implemented by a ModelSource whose fetched folders can
// be removed once no model or endpoint uses them (*modelsource.Fetcher).
type ModelDataCache interface {
	// RemoveUnusedModelData removes the fetched folders that no folder of
	// inUse (folders FetchModelData returned) is at, inside or around, and
	// returns the folders removed. It never removes a folder while it is
	// being fetched. Errors: the cache cannot tell what else uses it
	// (nothing removed), or a folder could not be removed; the caller logs
	// them.
	RemoveUnusedModelData(ctx context.Context, inUse []string) (removed []string, err error)
}

// SetModelSource makes CreateModel fetch a model's artifacts
// (PrimaryContainer.ModelDataUrl or ModelDataSource.S3DataSource) through f,
// within timeout (0: DefaultModelDataTimeout), so the engine runs the
// architecture of the model's own config.json. Without it, ModelDataUrl only
// names a catalog model (see ResolveModel). When f is also a
// ModelDataCache, DeleteModel removes the folders nothing uses any more.
func (s *Service) SetModelSource(f ModelSource, timeout time.Duration) {
	if timeout <= 0 {
		timeout = DefaultModelDataTimeout
	}
	s.models, s.modelTimeout = f, timeout
	s.modelCache, _ = f.(ModelDataCache)
}

// s3ModelDataSource is SageMaker's ModelDataSource.S3DataSource.
type s3ModelDataSource struct {
	S3DataSource *struct {
		S3Uri             string          `json:"S3Uri"`
		S3DataType        string          `json:"S3DataType"`
		CompressionType   string          `json:"CompressionType"`
		ModelAccessConfig json.RawMessage `json:"ModelAccessConfig"`
		HubAccessConfig   json.RawMessage `json:"HubAccessConfig"`
	} `json:"S3DataSource"`
}

// SageMaker's CompressionType values.
const (
	compressionNone = "None"
	compressionGzip = "Gzip"
)

// modelData is where a container's artifacts are: the S3 URI, SageMaker's
// CompressionType, and the request field naming the URI ("" uri: none).
type modelData struct {
	uri, compression, field string
}

// containerModelData reads a container's ModelDataSource (which wins, as in
// SageMaker) or ModelDataUrl. path is "PrimaryContainer" or "Containers.N".
func containerModelData(c *Container, path string) (modelData, error) {
	if len(c.ModelDataSource) > 0 && string(c.ModelDataSource) != "null" {
		var ds s3ModelDataSource
		if err := json.Unmarshal(c.ModelDataSource, &ds); err != nil || ds.S3DataSource == nil {
			return modelData{}, invalidf("%s.ModelDataSource: only S3DataSource is supported", path)
		}
		d := ds.S3DataSource
		field := path + ".ModelDataSource.S3DataSource"
		switch {
		case d.S3Uri == "":
			return modelData{}, invalidf("%s.S3Uri: required", field)
		case d.S3DataType == "S3Prefix" && d.CompressionType == compressionNone:
			if !strings.HasSuffix(d.S3Uri, "/") {
				return modelData{}, invalidf("%s.S3Uri: %s must end with \"/\" when S3DataType is S3Prefix", field, d.S3Uri)
			}
		case d.S3DataType == "S3Object" && d.CompressionType == compressionGzip:
		case d.S3DataType != "S3Prefix" && d.S3DataType != "S3Object":
			return modelData{}, invalidf("%s.S3DataType: %q is not valid (want S3Prefix or S3Object)", field, d.S3DataType)
		case d.CompressionType != compressionNone && d.CompressionType != compressionGzip:
			return modelData{}, invalidf("%s.CompressionType: %q is not valid (want None or Gzip)", field, d.CompressionType)
		default:
			return modelData{}, invalidf("%s: S3DataType %s with CompressionType %s is not supported (use S3Prefix with None, or S3Object with Gzip)", field, d.S3DataType, d.CompressionType)
		}
		return modelData{uri: d.S3Uri, compression: d.CompressionType, field: field + ".S3Uri"}, nil
	}
	if c.ModelDataUrl != "" {
		return modelData{uri: c.ModelDataUrl, field: path + ".ModelDataUrl"}, nil
	}
	return modelData{}, nil
}

// catalogPreset is the catalog model a container's environment names:
// HF_MODEL_ID, then SM_MODEL_ID (a catalog id, alias or JumpStart id). A
// local path there (HF_MODEL_ID=/opt/ml/model, as in Hugging Face
// containers) names the artifacts, not a model, and is skipped.
func catalogPreset(cat *catalog.Catalog, c *Container) (string, bool) {
	for _, key := range []string{"HF_MODEL_ID", "SM_MODEL_ID"} {
		id := strings.TrimSpace(c.Environment[key])
		if id == "" || strings.HasPrefix(id, "/") {
			continue
		}
		if m, err := cat.Model(id); err == nil {
			return m.ID, true
		}
		if m, err := cat.JumpStartModel(id); err == nil {
			return m.ID, true
		}
		return "", false
	}
	return "", false
}

// jumpStartBucket matches the buckets JumpStart serves its model artifacts
// from (jumpstart-cache-prod-<region>, jumpstart-private-cache-prod-<region>).
var jumpStartBucket = regexp.MustCompile(`^jumpstart-(private-)?cache-(prod|alpha|beta)-[a-z0-9-]+$`)

// jumpStartArtifacts is the catalog model whose JumpStart artifacts uri
// points at (s3://jumpstart-cache-prod-us-west-2/meta-textgeneration/
// meta-textgeneration-llama-3-1-8b-instruct/artifacts/...), as the
// SageMaker Python SDK's JumpStartModel.deploy() writes them: those public
// buckets are not reachable here, the id is enough.
func jumpStartArtifacts(cat *catalog.Catalog, uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" || !jumpStartBucket.MatchString(u.Host) {
		return "", false
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "" {
			continue
		}
		if m, err := cat.JumpStartModel(seg); err == nil {
			return m.ID, true
		}
	}
	return "", false
}

// resolveModelData decides, at CreateModel, what m runs when its container
// carries artifacts: a catalog model named by the environment or by a
// JumpStart artifacts URI, else the artifacts themselves, fetched into a
// local model folder whose config.json gives the architecture. Errors are
// ValidationExceptions naming the field; nothing is stored on error.
func (s *Service) resolveModelData(ctx context.Context, m *Model) error {
	c, path := m.PrimaryContainer, "PrimaryContainer"
	if c == nil && len(m.Containers) > 0 {
		c, path = &m.Containers[0], "Containers.1"
	}
	if c == nil {
		return nil
	}
	md, err := containerModelData(c, path)
	if err != nil || md.uri == "" {
		return err
	}
	// The simulator needs no files for a catalog model; a real engine
	// always loads the artifacts.
	if m.Engine == "" || m.Engine == engines.Sim {
		if _, ok := catalogPreset(s.catalog, c); ok {
			return nil // the catalog preset wins, as before; ResolveModel picks it
		}
		if id, ok := jumpStartArtifacts(s.catalog, md.uri); ok {
			m.ResolvedModel = id
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.modelTimeout)
	defer cancel()
	dir, id, err := s.models.FetchModelData(ctx, md.uri, md.compression, modelFormat(m))
	if err != nil {
		return modelDataError(md, err)
	}
	m.ModelDir, m.ResolvedModel = dir, id
	return nil
}

// modelDataError words a fetch failure as SageMaker does, naming the field.
func modelDataError(md modelData, err error) error {
	kind, msg := "", err.Error()
	var p ModelDataProblem
	if errors.As(err, &p) {
		kind, msg = p.ModelDataProblem()
	}
	var text string
	switch kind {
	case ProblemNoConfig, ProblemTooLarge:
		if !strings.Contains(msg, md.uri) {
			msg = md.uri + ": " + msg
		}
		text = fmt.Sprintf("%s: %s", md.field, msg)
	case ProblemNotFound:
		text = fmt.Sprintf("%s: Could not find model data at %s (%s).", md.field, md.uri, msg)
	case ProblemAccessDenied:
		text = fmt.Sprintf("%s: Could not access model data at %s (%s).", md.field, md.uri, msg)
	default:
		text = fmt.Sprintf("%s: could not use the model data at %s: %s", md.field, md.uri, msg)
	}
	return &Error{Kind: ErrInvalid, Message: text, Err: err}
}
