package deployment

import (
	"context"

	"github.com/capstan-dev/capstan/internal/modelsource"
)

// ModelFetcher resolves a model source to a local directory (and, when it
// knows it, a catalog model id). *modelsource.Fetcher implements it.
//
// Error contract: a *modelsource.SourceError (wrapped or not) says why the
// source cannot be served; its Reason becomes the condition reason. Any other
// error is reported with reason ModelSourceFailed.
type ModelFetcher interface {
	Fetch(ctx context.Context, src modelsource.Source) (modelsource.Result, error)
	// Check refuses, contacting nothing, a source the server has no
	// settings for (an s3 source without an S3 endpoint); Apply refuses
	// the manifest with its error.
	Check(src modelsource.Source) error
}

var _ ModelFetcher = (*modelsource.Fetcher)(nil)
