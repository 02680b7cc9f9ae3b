package deployment

import (
	"github.com/capstan-dev/capstan/internal/engines"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// EndpointRegistry registers deployments as SageMaker endpoints.
// *endpoint.Service implements it.
//
// Error contract: PutManaged returns an error wrapping endpoint.ErrNameInUse
// when another manifest or a SageMaker-created endpoint holds the name; the
// deployment then fails with reason EndpointNameInUse and takes no route.
// DeleteManaged is a no-op for a name the owner does not hold.
type EndpointRegistry interface {
	PutManaged(ctx context.Context, m endpoint.ManagedEndpoint) error
	DeleteManaged(ctx context.Context, name, owner string) error
}

var _ EndpointRegistry = (*endpoint.Service)(nil)

// TriggerBuilder turns an autoScalingSpec into a scaler config and triggers
// (triggers.Build).
type TriggerBuilder func(spec *manifest.AutoScalingSpec, env triggers.Env) (autoscale.Config, []autoscale.Trigger, error)

// Options wire a Service. Store, Clock, Engine, Cluster and Gateway are
// required; the rest have defaults or switch features off when nil.
type Options struct {
	Store      *store.Store
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Engine runs the replicas (start with the engine flags and a KV events
	// port, health gate, drain and stop, orphan sweep); its runtime is the
	// one deployments run on and its router must be Gateway.
	Engine  *serving.Engine
	Cluster *cluster.Cluster
	Gateway *gateway.Gateway
	// Engines are the real engines installed here (capstan.yaml engines):
	// worker.image picks one (engines.Machine.Choose).
	Engines engines.Machine
	// Models resolves model sources; nil resolves JumpStart ids and IEC
	// modelNames against the catalog only (no download).
	Models ModelFetcher
	// Endpoints registers sageMakerEndpoint.name / spec.endpointName; nil
	// means names are used for routes only.
	Endpoints EndpointRegistry
	// Triggers builds autoscaling triggers (default triggers.Build).
	Triggers TriggerBuilder
	// Catalog resolves instance types (default catalog.Default()).
	Catalog *catalog.Catalog
	// StartTimeout: a replica not healthy by then is reported (default 10m).
	StartTimeout time.Duration
	// Resync is how often every deployment is reconciled regardless of
	// events (default 1s).
	Resync time.Duration
	// GatewayURL is "http://ADDR", for status.endpoints.url.
	GatewayURL string
	// Region and AccountID build SageMaker endpoint ARNs (defaults
	// us-east-1 and 000000000000, as the SageMaker API's).
	Region, AccountID string
	// MaxEvents bounds the events kept per object (default 64).
	MaxEvents int
	// NodeEvents, when set, hears which replica is bound to or moved off
	// which node, for the node's own events (`capstan describe node`).
	NodeEvents NodeEvents
	// Provisioned reports whether a node autoscaler adds nodes to a
	// cluster for its pending replicas. A replica on a leaving node of
	// such a cluster keeps serving while its replacement waits for a new
	// node; elsewhere (nil: nowhere) it stops at once, since the room its
	// replacement waits for may be its own.
	Provisioned func(cluster string) bool
	// TieredStorage is a cluster's tiered storage (its TieredStorageConfig,
	// the tiered-storage add-on): on with the share of a node's memory a
	// tieredstorage KV tier without l2CacheSize gets. nil: no cluster has
	// it, and such a tier gets manifest.DefaultTieredStorageBytes.
	TieredStorage func(cluster string) (memoryPercent int, on bool)
	// Groups lists a cluster's instance groups of an instance type (nil:
	// the pool's nodes are all that is known). A replica that finds no
	// node of its type says why by them: a group scaled to zero, or cut
	// into MIG slices of other profiles, is not a missing group.
	Groups func(cluster, instanceType string) []GroupInfo
	// DataDir is capstan serve's data directory: each node's tieredstorage
	// KV store lives in DataDir/tieredstorage/<cluster>/<node>. Empty, a
	// deployment with tieredstorage does not start its replicas (the
	// status says why).
	DataDir string
}

// GroupInfo is an instance group as a replica waiting for a node of its
// type reads it.
type GroupInfo struct {
	Name string
	// Target is the node count the group works toward, Running how many
	// of its nodes run now.
	Target, Running int
	// MIGLayout cuts its nodes' GPUs ("" or all-disabled: whole GPUs).
	MIGLayout string
}

// NodeEvents records events on nodes (*hyperpod.Service).
type NodeEvents interface {
	NodeEvent(ctx context.Context, nodeName, reason, message string) error
}

// Service stores manifests and runs their deployments.
type Service struct {
	store  *store.Store
	clock  clock.Clock
	log    *slog.Logger
	ctrl   *Controller
	models ModelFetcher // nil: sources are not checked at apply
}

// New validates o and returns a Service; call Run to start the controller.
func New(o Options) (*Service, error) {
	var missing []error
	if o.Store == nil {
		missing = append(missing, errors.New("Store"))
	}
	if o.Clock == nil {
		missing = append(missing, errors.New("Clock"))
	}
	if o.Engine == nil {
		missing = append(missing, errors.New("Engine"))
	}
	if o.Cluster == nil {
		missing = append(missing, errors.New("Cluster"))
	}
	if o.Gateway == nil {
		missing = append(missing, errors.New("Gateway"))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("deployment: options required: %w", errors.Join(missing...))
	}
	if o.Engine.Router() != serving.Router(o.Gateway) {
		// Routes set here and drains done by the engine must meet in one gateway.
		return nil, errors.New("deployment: Engine must route through Gateway")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Triggers == nil {
		o.Triggers = triggers.Build
	}
	if o.Catalog == nil {
		o.Catalog = catalog.Default()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Minute
	}
	if o.Resync <= 0 {
		o.Resync = time.Second
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = 64
	}
	if o.DataDir != "" {
		// Replicas run in their own directories: a relative path would
		// name a different store in each.
		abs, err := filepath.Abs(o.DataDir)
		if err != nil {
			return nil, fmt.Errorf("deployment: data directory: %w", err)
		}
		o.DataDir = abs
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("deployment: %w", err)
	}
	c := newController(o, m)
	return &Service{store: o.Store, clock: o.Clock, log: o.Logger, ctrl: c, models: o.Models}, nil
}

// Run drives the controller until ctx is done.
func (s *Service) Run(ctx context.Context) { s.ctrl.Run(ctx) }

// Controller returns the controller, for callers (and tests) that reconcile
// one object synchronously.
func (s *Service) Controller() *Controller { return s.ctrl }

// Key is the controller's work-queue key of an object.
func Key(kind, namespace, name string) string { return key(kind, namespace, name) }
