package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/asyncinference"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/modelsource"
	"github.com/capstan-dev/capstan/internal/store"
)

// newAsync builds asynchronous inference: its queue lives in the store, its
// S3 client uses the server's one S3 configuration (modelSources.s3, the
// same settings model sources use), and a backlog at zero instances scales
// the endpoint's variants to one.
func newAsync(ctx context.Context, cfg config.Config, st *store.Store, svc *endpoint.Service, gw *gateway.Gateway,
	clk clock.Clock, log *slog.Logger, reg prometheus.Registerer) (*asyncinference.Manager, error) {
	ms := cfg.ModelSources.S3
	client, err := modelsource.NewS3Client(ctx, modelsource.Options{S3Endpoint: ms.Endpoint, S3Region: ms.Region,
		S3AccessKeyID: ms.AccessKeyID, S3SecretAccessKey: ms.SecretAccessKey}, "")
	if err != nil {
		return nil, fmt.Errorf("S3 client for asynchronous inference: %w", err)
	}
	return asyncinference.New(asyncinference.Options{Store: st, Gateway: gw, Configs: asyncConfigs{svc}, S3: client,
		Wake: asyncConfigs{svc}.wake, Clock: clk, Logger: log, Registerer: reg})
}

// asyncConfigs reads endpoints' AsyncInferenceConfig through the endpoint service.
type asyncConfigs struct{ svc *endpoint.Service }

func (a asyncConfigs) AsyncConfig(ctx context.Context, name string) (json.RawMessage, error) {
	ep, err := a.svc.GetEndpoint(ctx, name)
	if endpoint.IsNotFound(err) {
		return nil, fmt.Errorf("endpoint %q: %w", name, asyncinference.ErrUnknownEndpoint)
	}
	if err != nil {
		return nil, err
	}
	dep := ep.Current
	if dep == nil {
		dep = ep.Pending
	}
	if dep == nil || ep.ManagedBy != "" {
		return nil, nil
	}
	c, err := a.svc.GetEndpointConfig(ctx, dep.ConfigName)
	if err != nil {
		return nil, nil // the config was deleted: nothing says async
	}
	return c.AsyncInferenceConfig, nil
}

// wake scales every variant of name that has no desired instance to one.
func (a asyncConfigs) wake(ctx context.Context, name string) {
	ep, err := a.svc.GetEndpoint(ctx, name)
	if err != nil || ep.Current == nil {
		return
	}
	for _, v := range ep.Current.Variants {
		if v.DesiredCount == 0 {
			if err := a.svc.SetVariantCount(ctx, name, v.Name, 1); err != nil {
				slog.Default().Warn("asynchronous inference: scaling from zero", "endpoint", name, "variant", v.Name, "err", err)
			}
		}
	}
}
