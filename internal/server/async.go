package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/appautoscaling"
	"github.com/capstan-dev/capstan/internal/asyncinference"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
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
	var unavailable error
	if ms.Endpoint == "" {
		unavailable = modelsource.ErrS3NotConfigured
	}
	return asyncinference.New(asyncinference.Options{Store: st, Gateway: gw, Configs: asyncConfigs{svc, log}, S3: client,
		S3Unavailable: unavailable, Wake: asyncConfigs{svc, log}.wake, Clock: clk, Logger: log, Registerer: reg})
}

// asyncReaders makes Application Auto Scaling's per-endpoint metric readers:
// the gateway's CloudWatch-style metrics plus the async backlog.
func asyncReaders(q *asyncinference.Manager, gw *gateway.Gateway, clk clock.Clock) func(string) appautoscaling.Reader {
	return func(ep string) appautoscaling.Reader {
		return backlogReader{Reader: triggers.NewCloudWatchReader(gw, clk, ep), q: q, gw: gw, ep: ep}
	}
}

// asyncConfigs reads endpoints' AsyncInferenceConfig through the endpoint service.
type asyncConfigs struct {
	svc *endpoint.Service
	log *slog.Logger
}

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
				a.log.Warn("asynchronous inference: scaling from zero", "endpoint", name, "variant", v.Name, "err", err)
			}
		}
	}
}

// AllowsZero lets Application Auto Scaling take an asynchronous inference
// endpoint's variants to MinCapacity 0, as SageMaker does.
func (v variantsAdapter) AllowsZero(ctx context.Context, ep string) bool {
	raw, err := asyncConfigs{svc: v.svc}.AsyncConfig(ctx, ep)
	return err == nil && len(raw) > 0 && string(raw) != "null"
}

var _ appautoscaling.ZeroScaler = variantsAdapter{}

// Asynchronous inference metrics target tracking can read (namespace
// AWS/SageMaker, dimension EndpointName), as SageMaker publishes them.
const (
	MetricApproximateBacklogSize            = "ApproximateBacklogSize"
	MetricApproximateBacklogSizePerInstance = "ApproximateBacklogSizePerInstance"
	MetricHasBacklogWithoutCapacity         = "HasBacklogWithoutCapacity"
)

// backlogReader adds the asynchronous inference backlog metrics to an
// endpoint's CloudWatch-style reader. They are gauges read at evaluation
// time: every statistic of one sample is the sample.
type backlogReader struct {
	appautoscaling.Reader
	q  *asyncinference.Manager
	gw *gateway.Gateway
	ep string
}

func (r backlogReader) Read(ctx context.Context, variant, metric, stat string, period time.Duration) (float64, error) {
	switch metric {
	case MetricApproximateBacklogSize, MetricApproximateBacklogSizePerInstance, MetricHasBacklogWithoutCapacity:
	default:
		return r.Reader.Read(ctx, variant, metric, stat, period)
	}
	b := float64(r.q.Backlog(r.ep))
	n := r.gw.Snapshot(r.ep).Replicas
	switch metric {
	case MetricApproximateBacklogSize:
		return b, nil
	case MetricApproximateBacklogSizePerInstance:
		// At zero instances the whole backlog counts, so a target-tracking
		// policy proposes one instance (scale from zero).
		return b / float64(max(n, 1)), nil
	default:
		if n == 0 && b > 0 {
			return 1, nil
		}
		return 0, nil
	}
}
