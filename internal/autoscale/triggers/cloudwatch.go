package triggers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// Namespaces a cloudWatchTrigger may name.
const (
	NamespaceSageMaker = gateway.NamespaceSageMaker
	NamespaceCapstan   = gateway.NamespaceCapstan
)

// Metric is a metric name CloudWatchReader knows.
type Metric string

// SageMaker endpoint metrics (namespace AWS/SageMaker, dimensions
// EndpointName and VariantName).
const (
	MetricInvocations                Metric = gateway.MetricInvocations
	MetricInvocationsPerInstance     Metric = gateway.MetricInvocationsPerInstance
	MetricModelLatency               Metric = gateway.MetricModelLatency
	MetricOverheadLatency            Metric = gateway.MetricOverheadLatency
	MetricConcurrentRequestsPerModel Metric = gateway.MetricConcurrentRequestsPerModel
	MetricInvocation4XXErrors        Metric = gateway.MetricInvocation4XXErrors
	MetricInvocation5XXErrors        Metric = gateway.MetricInvocation5XXErrors
	MetricInvocationModelErrors      Metric = gateway.MetricInvocationModelErrors
)

// Built-in metrics (namespace capstan, dimension EndpointName).
const (
	MetricQueueDepth         Metric = gateway.MetricQueueDepth
	MetricInFlightPerReplica Metric = gateway.MetricInFlightPerReplica
	MetricKVCacheUtilization Metric = gateway.MetricKVCacheUtilization
	MetricTimeToFirstToken   Metric = gateway.MetricTimeToFirstToken
	MetricArrivalRate        Metric = gateway.MetricArrivalRate
)

// kind says how a metric's samples arise.
type kind int

const (
	// perRequest: one sample per finished invocation (or stream, for
	// TimeToFirstToken), recorded by the gateway.
	perRequest kind = iota
	// gauge: sampled once per second by the gateway's Sampler, and by
	// every Read first (one sample a second is kept, the newest).
	gauge
)

type metricInfo struct {
	namespace string
	kind      kind
}

var metrics = map[Metric]metricInfo{
	MetricInvocations:                {NamespaceSageMaker, perRequest},
	MetricInvocationsPerInstance:     {NamespaceSageMaker, perRequest},
	MetricModelLatency:               {NamespaceSageMaker, perRequest},
	MetricOverheadLatency:            {NamespaceSageMaker, perRequest},
	MetricConcurrentRequestsPerModel: {NamespaceSageMaker, gauge},
	MetricInvocation4XXErrors:        {NamespaceSageMaker, perRequest},
	MetricInvocation5XXErrors:        {NamespaceSageMaker, perRequest},
	MetricInvocationModelErrors:      {NamespaceSageMaker, perRequest},
	MetricQueueDepth:                 {NamespaceCapstan, gauge},
	MetricInFlightPerReplica:         {NamespaceCapstan, gauge},
	MetricKVCacheUtilization:         {NamespaceCapstan, gauge},
	MetricTimeToFirstToken:           {NamespaceCapstan, perRequest},
	MetricArrivalRate:                {NamespaceCapstan, gauge},
}

// Metrics lists the metric names of a namespace, sorted.
func Metrics(namespace string) []string {
	var out []string
	for m, info := range metrics {
		if info.namespace == namespace {
			out = append(out, string(m))
		}
	}
	slices.Sort(out)
	return out
}

// statOK: every metric has every statistic (Sum, SampleCount, Average,
// Minimum, Maximum, pNN with 0 < NN < 100): the store keeps each period's
// samples as count, sum, extremes and a histogram.
func statOK(stat string) bool {
	if slices.Contains(metricstore.StatisticNames, stat) {
		return true
	}
	_, ok := metricstore.ParsePercentile(stat)
	return ok
}

// ErrNoData is returned by CloudWatchReader.Read when the period holds no
// data point (no finished invocation for per-request metrics), as CloudWatch
// returns no datapoint; a trigger then uses its minValue.
var ErrNoData = errors.New("no data points in the period")

// MetricSource is a Source that records CloudWatch-style metrics into a
// metric store; *gateway.Gateway satisfies it (with Options.MetricStore set).
type MetricSource interface {
	Source
	// MetricStore is where the metrics are; nil when none is recorded.
	MetricStore() *metricstore.Store
	// SampleGauges records the endpoint's gauges now (one sample a second
	// is kept, the newest).
	SampleGauges(endpoint string)
}

var _ MetricSource = (*gateway.Gateway)(nil)

// CloudWatchReader reads an endpoint's CloudWatch-style metrics from the
// metric store its source records into (package metricstore), for
// cloudWatchTrigger and for Application Auto Scaling target tracking: it
// reads exactly what the CloudWatch API serves. Safe for concurrent use.
type CloudWatchReader struct {
	src      Source
	clk      clock.Clock
	endpoint string
}

// NewCloudWatchReader returns a reader of endpoint's metrics. src must be a
// MetricSource with a store for Read to find data.
func NewCloudWatchReader(src Source, clk clock.Clock, endpoint string) *CloudWatchReader {
	return &CloudWatchReader{src: src, clk: clk, endpoint: endpoint}
}

// Read returns the metric's statistic over the last period: the store's
// aggregate of the period's whole seconds ending with the current one,
// [now−period, now) with both ends rounded up to the next whole second, so
// that what was recorded in the current second counts.
//
// metricName: see Metrics(NamespaceSageMaker) and Metrics(NamespaceCapstan);
// ModelLatency and OverheadLatency are in microseconds like SageMaker's,
// TimeToFirstToken in seconds. statistic: Sum, SampleCount, Average,
// Minimum, Maximum or pNN. variant "" = whole endpoint (the samples of all
// its variants together); a variant the endpoint does not have is an error
// unless the endpoint has at most one variant (a manifest deployment's
// single variant may be named differently in the gateway), and the capstan
// built-ins are always whole-endpoint. Gauges are sampled first, so the
// current second holds the value now. Returns ErrNoData (wrapped) when the
// period has no data point.
func (r *CloudWatchReader) Read(ctx context.Context, variant, metricName, statistic string, period time.Duration) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m := Metric(metricName)
	info, ok := metrics[m]
	if !ok {
		return 0, fmt.Errorf("unknown metric %q; known: %s", metricName, strings.Join(append(Metrics(NamespaceSageMaker), Metrics(NamespaceCapstan)...), ", "))
	}
	if !statOK(statistic) {
		return 0, fmt.Errorf("statistic %q is not available for %s; use Sum, SampleCount, Average, Minimum, Maximum or pNN", statistic, metricName)
	}
	if period <= 0 {
		return 0, fmt.Errorf("period %v must be positive", period)
	}
	ms, _ := r.src.(MetricSource)
	var st *metricstore.Store
	if ms != nil {
		st = ms.MetricStore()
	}
	if st == nil {
		return 0, fmt.Errorf("%s: no metric store: the gateway records no CloudWatch metrics", metricName)
	}
	if info.kind == gauge {
		ms.SampleGauges(r.endpoint)
	}
	// The series to read: the endpoint's built-in series, or one per
	// variant the gateway has seen (all of them for the whole endpoint).
	ep := metricstore.Dimension{Name: gateway.DimensionEndpointName, Value: r.endpoint}
	var series [][]metricstore.Dimension
	if info.namespace == NamespaceCapstan {
		series = [][]metricstore.Dimension{{ep}}
	} else {
		vs := r.src.Snapshot(r.endpoint).Variants
		if _, ok := vs[variant]; !ok && variant != "" {
			if len(vs) > 1 {
				return 0, fmt.Errorf("endpoint %q has no variant %q", r.endpoint, variant)
			}
			variant = ""
		}
		for name := range vs {
			if variant == "" || name == variant {
				series = append(series, []metricstore.Dimension{ep, {Name: gateway.DimensionVariantName, Value: name}})
			}
		}
	}
	per := (period + time.Second - 1).Truncate(time.Second)
	end := r.clk.Now().Truncate(time.Second).Add(time.Second)
	var total metricstore.Aggregate
	for _, dims := range series {
		aggs, err := st.Statistics(metricstore.Query{Namespace: info.namespace, Metric: metricName, Dimensions: dims,
			Start: end.Add(-per), End: end, Period: per})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", metricName, err)
		}
		for _, a := range aggs {
			total.Merge(a)
		}
	}
	if total.SampleCount == 0 {
		return 0, fmt.Errorf("%s over %v: %w", metricName, period, ErrNoData)
	}
	return total.Value(statistic)
}

// cloudWatchTrigger is a cloudWatchTrigger (or built-in) read through a
// CloudWatchReader.
type cloudWatchTrigger struct {
	name     string
	target   autoscale.Target
	reader   *CloudWatchReader
	variant  string
	metric   string
	stat     string
	period   time.Duration
	minValue float64
	cache    *valueCache
}

var _ autoscale.Peeker = (*cloudWatchTrigger)(nil)

func newCloudWatchTrigger(t *manifest.CloudWatchTrigger, polling time.Duration, env Env, field string) (*cloudWatchTrigger, error) {
	if env.Source == nil {
		return nil, fmt.Errorf("triggers: %s: no metric source (Env.Source) for a cloudWatchTrigger", field)
	}
	info, ok := metrics[Metric(t.MetricName)]
	switch {
	case t.Namespace != NamespaceSageMaker && t.Namespace != NamespaceCapstan:
		return nil, fmt.Errorf("triggers: %s.namespace: %q is not mapped; capstan serves %s and %s", field, t.Namespace, NamespaceSageMaker, NamespaceCapstan)
	case !ok || info.namespace != t.Namespace:
		return nil, fmt.Errorf("triggers: %s.metricName: %q is not a %s metric; one of %s", field, t.MetricName, t.Namespace, strings.Join(Metrics(t.Namespace), ", "))
	case !statOK(t.MetricStat):
		return nil, fmt.Errorf("triggers: %s.metricStat: %q is not available for %s", field, t.MetricStat, t.MetricName)
	}
	var variant string
	for i, d := range t.Dimensions {
		switch d.Name {
		case "EndpointName":
			// A trigger reads its own deployment only: naming another
			// endpoint is a mistake worth stopping on.
			if d.Value != env.Endpoint {
				return nil, fmt.Errorf("triggers: %s.dimensions[%d]: EndpointName %q is not this deployment's endpoint %q", field, i, d.Value, env.Endpoint)
			}
		case "VariantName":
			variant = d.Value
		default:
			// Other dimensions (e.g. InferenceComponentName) have no
			// meaning in capstan; ignored, as documented.
			env.logger().Warn("cloudWatchTrigger dimension ignored", "field", fmt.Sprintf("%s.dimensions[%d]", field, i), "dimension", d.Name)
		}
	}
	period := seconds(*t.MetricCollectionPeriod)
	minV := 0.0
	if t.MinValue != nil {
		minV = *t.MinValue
	}
	return &cloudWatchTrigger{
		name:     t.Name,
		target:   target(t.MetricType, t.TargetValue, t.ActivationTargetValue),
		reader:   NewCloudWatchReader(env.Source, env.Clock, env.Endpoint),
		variant:  variant,
		metric:   t.MetricName,
		stat:     t.MetricStat,
		period:   period,
		minValue: minV,
		cache:    newCache(t.UseCachedMetrics, polling, env.Clock),
	}, nil
}

func (c *cloudWatchTrigger) Name() string             { return c.name }
func (c *cloudWatchTrigger) Target() autoscale.Target { return c.target }

// Value reads the statistic over the last period; no data gives minValue,
// as KEDA's CloudWatch scaler does with ignoreNullValues (its default).
func (c *cloudWatchTrigger) Value(ctx context.Context) (float64, error) {
	return c.cache.get(ctx, c.read)
}

// Peek implements autoscale.Peeker: the reader works on the in-memory
// metric store, cheap enough to read between polls. It always reads
// the source, and what it reads refreshes useCachedMetrics' value: a poll
// run early because of this peek must not be served the value of the
// scheduled poll just before it.
func (c *cloudWatchTrigger) Peek(ctx context.Context) (float64, error) {
	v, err := c.read(ctx)
	if err == nil {
		c.cache.put(v)
	}
	return v, err
}

func (c *cloudWatchTrigger) read(ctx context.Context) (float64, error) {
	v, err := c.reader.Read(ctx, c.variant, c.metric, c.stat, c.period)
	if errors.Is(err, ErrNoData) {
		return c.minValue, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cloudwatch %s/%s: %w", c.metric, c.stat, err)
	}
	return v, nil
}
