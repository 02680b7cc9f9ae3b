package appautoscaling

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/store"
)

// TargetPrefix is the X-Amz-Target prefix of every operation; the server
// dispatches requests carrying it to this package's handler.
const TargetPrefix = "AnyScaleFrontendService."

// Server-side limits.
const (
	DefaultMaxBodyBytes          = 1 << 20
	DefaultMaxTargets            = 1000
	DefaultMaxPoliciesPerTarget  = 50 // AWS's quota of scaling policies per scalable target
	DefaultMaxActivitiesRetained = 200
)

// Variants is the seam to the endpoints being scaled. The lead implements it
// over endpoint.Service (VariantCapacity / SetVariantCount).
//
// Error contract: errors for unknown endpoints or variants wrap an
// endpoint.Error of kind ErrNotFound; SetDesired on an endpoint that is being
// created or updated returns one of kind ErrInProgress (the controller then
// retries on its next evaluation); other endpoint.Error kinds carry a message
// fit for the caller.
type Variants interface {
	// Variant returns the variant's desired instance count and the most it may
	// have (its reservation's instance count; 0 = unbounded).
	Variant(ctx context.Context, endpoint, variant string) (desired, limit int, err error)
	// SetDesired sets the variant's desired instance count.
	SetDesired(ctx context.Context, endpoint, variant string, n int) error
}

// ZeroScaler is implemented by Variants that know which endpoints may scale
// to zero instances (SageMaker allows MinCapacity 0 for asynchronous
// inference endpoints only); without it MinCapacity must be at least 1.
type ZeroScaler interface {
	AllowsZero(ctx context.Context, endpoint string) bool
}

// Reader reads one SageMaker CloudWatch-style metric of one endpoint;
// *triggers.CloudWatchReader satisfies it. variant "" is the whole endpoint.
// It returns an error when the metric is unknown or no value can be computed,
// wrapping triggers.ErrNoData when the period had no datapoint.
type Reader interface {
	Read(ctx context.Context, variant, metricName, statistic string, period time.Duration) (float64, error)
}

// Options configure the API and its controller. Zero values get defaults.
type Options struct {
	AccountID string // default 000000000000
	Region    string // default us-east-1
	Clock     clock.Clock
	Logger    *slog.Logger
	// Registerer receives the capstan_appautoscaling_* gauges; nil = none.
	Registerer prometheus.Registerer
	// Source is the gateway (*gateway.Gateway, with a metric store): the
	// controller reads metrics through one triggers.CloudWatchReader per
	// endpoint over it, from the metric store the CloudWatch API serves.
	Source triggers.Source
	// NewReader overrides how an endpoint's reader is made (tests feed
	// values by hand). With neither Source nor NewReader, policies have no
	// data and never scale.
	NewReader func(endpoint string) Reader

	// Interval between evaluations; one evaluation is one CloudWatch
	// datapoint (AWS target tracking uses one-minute datapoints). Default 60s.
	Interval time.Duration
	// ScaleOutDatapoints: consecutive datapoints above the target before the
	// high alarm scales out (AWS: 3 of 3). Default 3.
	ScaleOutDatapoints int
	// ScaleInDatapoints: consecutive datapoints below ScaleInRatio × target
	// before the low alarm scales in (AWS: 15 of 15). Default 15.
	ScaleInDatapoints int
	// ScaleInRatio is the low alarm's threshold as a fraction of the target.
	// Default 0.9, as AWS.
	ScaleInRatio float64
	// DefaultCooldown applies when a policy sets no ScaleOutCooldown /
	// ScaleInCooldown; AWS's default for SageMaker variants is 300s.
	DefaultCooldown time.Duration

	MaxBodyBytes          int64
	MaxTargets            int
	MaxPoliciesPerTarget  int
	MaxActivitiesRetained int // per scalable target; the oldest are pruned

	// NewID returns a fresh random identifier (UUID form); tests make it
	// deterministic.
	NewID func() string
}

func (o *Options) defaults() {
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.ScaleOutDatapoints <= 0 {
		o.ScaleOutDatapoints = 3
	}
	if o.ScaleInDatapoints <= 0 {
		o.ScaleInDatapoints = 15
	}
	if o.ScaleInRatio <= 0 || o.ScaleInRatio > 1 {
		o.ScaleInRatio = 0.9
	}
	if o.DefaultCooldown <= 0 {
		o.DefaultCooldown = 300 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxTargets <= 0 {
		o.MaxTargets = DefaultMaxTargets
	}
	if o.MaxPoliciesPerTarget <= 0 {
		o.MaxPoliciesPerTarget = DefaultMaxPoliciesPerTarget
	}
	if o.MaxActivitiesRetained <= 0 {
		o.MaxActivitiesRetained = DefaultMaxActivitiesRetained
	}
	if o.NewReader == nil && o.Source != nil {
		src, clk := o.Source, o.Clock
		o.NewReader = func(ep string) Reader { return triggers.NewCloudWatchReader(src, clk, ep) }
	}
	if o.NewID == nil {
		o.NewID = awsjson.UUID
	}
}

// API is the Application Auto Scaling handler plus its controller.
type API struct {
	st   *store.Store
	v    Variants
	opts Options
	log  *slog.Logger
	clk  clock.Clock
	ctl  *Controller
	h    *awsjson.Handler
}

var (
	_ http.Handler = (*API)(nil)
	_ Reader       = (*triggers.CloudWatchReader)(nil)
)

// NewAPI returns the API over st (its own buckets) and v.
func NewAPI(st *store.Store, v Variants, o Options) *API {
	o.defaults()
	a := &API{st: st, v: v, opts: o, log: o.Logger, clk: o.Clock}
	a.ctl = newController(st, v, o)
	ops := map[string]awsjson.Op{
		"RegisterScalableTarget":    a.registerScalableTarget,
		"DescribeScalableTargets":   a.describeScalableTargets,
		"DeregisterScalableTarget":  a.deregisterScalableTarget,
		"PutScalingPolicy":          a.putScalingPolicy,
		"DescribeScalingPolicies":   a.describeScalingPolicies,
		"DeleteScalingPolicy":       a.deleteScalingPolicy,
		"DescribeScalingActivities": a.describeScalingActivities,
	}
	a.h = &awsjson.Handler{Prefix: TargetPrefix, Name: "Application Auto Scaling API", Ops: ops, MaxBodyBytes: o.MaxBodyBytes,
		ToWire: a.toWire, TooLargeCode: CodeRequestTooLarge, InternalCode: CodeInternal,
		MessageMember: "Message", Log: o.Logger}
	return a
}

// Run runs the target-tracking controller until ctx is done.
func (a *API) Run(ctx context.Context) { a.ctl.Run(ctx) }

// Controller returns the target-tracking controller (for tests and for
// callers that drive evaluations themselves).
func (a *API) Controller() *Controller { return a.ctl }

// ServeHTTP dispatches on X-Amz-Target.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.h.ServeHTTP(w, r) }

// targetARNSuffix makes the 36-character hex id of a scalable target ARN
// (AWS's ids have that shape) from a UUID.
func targetARNSuffix(id string) string {
	h := strings.ReplaceAll(id, "-", "")
	for len(h) < 36 {
		h += h
	}
	return h[:36]
}

// Epoch is the AWS JSON timestamp, shared with the other AWS API.
type Epoch = awsjson.Epoch
