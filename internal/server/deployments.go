package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/appautoscaling"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/modelsource"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// deploymentDeps is what newDeployments needs from Start.
type deploymentDeps struct {
	cfg        config.Config
	store      *store.Store
	clock      clock.Clock
	log        *slog.Logger
	reg        prometheus.Registerer
	eng        *serving.Engine
	gw         *gateway.Gateway
	endpoints  *endpoint.Service
	cat        *catalog.Catalog
	gatewayURL string
	pool       *cluster.Cluster
	nodeEvents deployment.NodeEvents
	// provisioned: whether the node autoscaler adds nodes to a cluster.
	provisioned func(cluster string) bool
	// tieredStorage: a cluster's tiered storage share of node memory, and
	// whether it is on.
	tieredStorage func(cluster string) (int, bool)
	// groups: a cluster's instance groups of a type, with their nodes.
	groups func(cluster, instanceType string) []deployment.GroupInfo
	// models is the model-source fetcher both doors share (newModelSource).
	models *modelsource.Fetcher
}

// The SageMaker door fetches models through the manifests' fetcher, and
// DeleteModel removes the extracted archives no model or endpoint uses.
var (
	_ endpoint.ModelSource    = (*modelsource.Fetcher)(nil)
	_ endpoint.ModelDataCache = (*modelsource.Fetcher)(nil)
)

// newModelSource builds the model-source fetcher from the serve config's
// modelSources block. Manifests' deployments and SageMaker's CreateModel
// (ModelDataUrl / ModelDataSource) use this one fetcher, so both reach S3
// with the same endpoint and credentials and share one cache.
func newModelSource(cfg config.Config, cat *catalog.Catalog, clk clock.Clock, log *slog.Logger) (*modelsource.Fetcher, error) {
	ms := cfg.ModelSources
	return modelsource.New(modelsource.Options{
		CacheDir: ms.CacheDir, FSxRoot: ms.FSxRoot, HuggingFaceEndpoint: ms.HuggingFaceEndpoint,
		S3Endpoint: ms.S3.Endpoint, S3Region: ms.S3.Region,
		S3AccessKeyID: ms.S3.AccessKeyID, S3SecretAccessKey: ms.S3.SecretAccessKey,
		MaxArchiveBytes: ms.MaxArchiveBytes, MaxCacheBytes: ms.MaxCacheBytes,
		Catalog: cat, Logger: log, Clock: clk,
	})
}

// newDeployments builds the manifests' side of capstan: the model-source
// fetcher and the deployment service that runs
// InferenceEndpointConfig and JumpStartModel objects on the serving engine
// the SageMaker endpoints share.
func newDeployments(d deploymentDeps, o Options) (*deployment.Service, error) {
	return deployment.New(deployment.Options{
		Store: d.store, Clock: d.clock, Logger: d.log, Registerer: d.reg,
		Engine: d.eng, Engines: d.cfg.Engines, Cluster: d.pool, NodeEvents: d.nodeEvents, Provisioned: d.provisioned, TieredStorage: d.tieredStorage, Groups: d.groups, Gateway: d.gw, Models: d.models, Endpoints: d.endpoints,
		Triggers: triggers.Build, Catalog: d.cat, StartTimeout: d.cfg.Endpoints.StartTimeout.Duration,
		Resync: o.Resync, GatewayURL: d.gatewayURL, Region: d.cfg.Region, AccountID: d.cfg.AccountID, DataDir: d.cfg.DataDir,
	})
}

// variantsAdapter lets Application Auto Scaling read and set SageMaker
// variants' instance counts through the endpoint service, which bounds them
// by the variant's reservation.
type variantsAdapter struct{ svc *endpoint.Service }

var _ appautoscaling.Variants = variantsAdapter{}

func (v variantsAdapter) Variant(ctx context.Context, ep, variant string) (int, int, error) {
	return v.svc.VariantCapacity(ctx, ep, variant)
}

func (v variantsAdapter) SetDesired(ctx context.Context, ep, variant string, n int) error {
	return v.svc.SetVariantCount(ctx, ep, variant, n)
}

// awsJSONDispatch sends AWS JSON 1.1 calls to the service their X-Amz-Target
// names: Application Auto Scaling's AnyScaleFrontendService.* to aas,
// everything else (SageMaker.*) to sagemaker, which answers unknown targets.
func awsJSONDispatch(sagemaker, aas http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("X-Amz-Target"), appautoscaling.TargetPrefix) {
			aas.ServeHTTP(w, r)
			return
		}
		sagemaker.ServeHTTP(w, r)
	})
}
