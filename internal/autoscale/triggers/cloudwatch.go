package triggers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// Namespaces a cloudWatchTrigger may name.
const (
	NamespaceSageMaker = "AWS/SageMaker"
	NamespaceCapstan   = "capstan"
)

// Metric is a metric name CloudWatchReader knows.
type Metric string

// SageMaker endpoint metrics (namespace AWS/SageMaker).
const (
	MetricInvocations                Metric = "Invocations"
	MetricInvocationsPerInstance     Metric = "InvocationsPerInstance"
	MetricModelLatency               Metric = "ModelLatency"
	MetricConcurrentRequestsPerModel Metric = "ConcurrentRequestsPerModel"
	MetricInvocation5XXErrors        Metric = "Invocation5XXErrors"
	MetricInvocationModelErrors      Metric = "InvocationModelErrors"
)

// Built-in metrics (namespace capstan).
const (
	MetricQueueDepth         Metric = "QueueDepth"
	MetricInFlightPerReplica Metric = "InFlightPerReplica"
	MetricKVCacheUtilization Metric = "KVCacheUtilization"
	MetricTimeToFirstToken   Metric = "TimeToFirstToken"
	MetricArrivalRate        Metric = "ArrivalRate"
)

// kind says how a metric's samples arise, which decides the statistics that
// can be computed from cumulative counters.
type kind int

const (
	// perRequest: one sample per finished invocation whose value is known
	// exactly (1, 1/replicas, 0 or 1 for errors): Sum, SampleCount, Average,
	// Minimum and Maximum are all exact.
	perRequest kind = iota
	// perRequestSum: one sample per invocation but only their sum is kept
	// (latencies): Sum, SampleCount, Average.
	perRequestSum
	// gauge: sampled at every Read; every statistic including pNN.
	gauge
	// rate: a per-second rate over the period from a cumulative counter;
	// Average only.
	rate
)

type metricInfo struct {
	namespace string
	kind      kind
}

var metrics = map[Metric]metricInfo{
	MetricInvocations:                {NamespaceSageMaker, perRequest},
	MetricInvocationsPerInstance:     {NamespaceSageMaker, perRequest},
	MetricModelLatency:               {NamespaceSageMaker, perRequestSum},
	MetricConcurrentRequestsPerModel: {NamespaceSageMaker, gauge},
	MetricInvocation5XXErrors:        {NamespaceSageMaker, perRequest},
	MetricInvocationModelErrors:      {NamespaceSageMaker, perRequest},
	MetricQueueDepth:                 {NamespaceCapstan, gauge},
	MetricInFlightPerReplica:         {NamespaceCapstan, gauge},
	MetricKVCacheUtilization:         {NamespaceCapstan, gauge},
	MetricTimeToFirstToken:           {NamespaceCapstan, perRequestSum},
	MetricArrivalRate:                {NamespaceCapstan, rate},
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

// Statistics computable for a metric kind; pNN is allowed for gauges only.
func statOK(k kind, stat string) bool {
	if k == rate {
		return stat == "Average"
	}
	switch stat {
	case "Sum", "SampleCount", "Average":
		return true
	case "Minimum", "Maximum":
		return k != perRequestSum
	}
	_, ok := percentile(stat)
	return ok && k == gauge
}

// percentile parses "p90" / "p99.9" into a fraction.
func percentile(stat string) (float64, bool) {
	if !strings.HasPrefix(stat, "p") {
		return 0, false
	}
	p, err := strconv.ParseFloat(stat[1:], 64)
	if err != nil || !(p > 0 && p < 100) {
		return 0, false
	}
	return p / 100, true
}

// ErrNoData is returned by CloudWatchReader.Read when the period holds no
// data point (no finished invocation for per-request metrics), as CloudWatch
// returns no datapoint; a trigger then uses its minValue.
var ErrNoData = errors.New("no data points in the period")

// maxSamples bounds the reader's history. Samples are kept at least
// period/samplesPerPeriod apart, so it always covers more than a period,
// however often Read is called.
const (
	maxSamples       = 4096
	samplesPerPeriod = 1024
)

type sample struct {
	at   time.Time
	snap gateway.EndpointSnapshot
}

// CloudWatchReader computes SageMaker CloudWatch metric values from
// successive snapshots, for cloudWatchTrigger and for Application Auto
// Scaling target tracking. Every Read records a snapshot; counters are
// differenced against the newest recorded snapshot at least one period old
// (or the oldest one, if history is shorter), gauges are summarised over the
// snapshots recorded within the period. A snapshot is recorded at creation so
// that the first Read already has a baseline. Safe for concurrent use.
type CloudWatchReader struct {
	src      Source
	clk      clock.Clock
	endpoint string

	mu      sync.Mutex
	samples []sample
}

// NewCloudWatchReader returns a reader of endpoint's metrics; it records the
// first snapshot now.
func NewCloudWatchReader(src Source, clk clock.Clock, endpoint string) *CloudWatchReader {
	r := &CloudWatchReader{src: src, clk: clk, endpoint: endpoint}
	r.samples = append(r.samples, sample{clk.Now(), src.Snapshot(endpoint)})
	return r
}

// Read returns the metric's statistic over the last period.
// metricName: see Metrics(NamespaceSageMaker) and Metrics(NamespaceCapstan);
// ModelLatency is in microseconds like SageMaker's, TimeToFirstToken in
// seconds. statistic: Sum, SampleCount, Average, Minimum, Maximum, or pNN
// for gauges. variant "" = whole endpoint; a variant the endpoint does not
// have is an error unless the endpoint has at most one variant (a manifest
// deployment's single variant may be named differently in the gateway), and
// the capstan built-ins are always whole-endpoint. Returns ErrNoData (wrapped)
// when the period has no data point.
func (r *CloudWatchReader) Read(ctx context.Context, variant, metricName, statistic string, period time.Duration) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m := Metric(metricName)
	info, ok := metrics[m]
	if !ok {
		return 0, fmt.Errorf("unknown metric %q; known: %s", metricName, strings.Join(append(Metrics(NamespaceSageMaker), Metrics(NamespaceCapstan)...), ", "))
	}
	if !statOK(info.kind, statistic) {
		return 0, fmt.Errorf("statistic %q is not available for %s", statistic, metricName)
	}
	if period <= 0 {
		return 0, fmt.Errorf("period %v must be positive", period)
	}
	// Time and snapshot are taken under the lock so that concurrent readers
	// append history in time order.
	r.mu.Lock()
	now := r.clk.Now()
	cur := r.src.Snapshot(r.endpoint)
	if info.namespace == NamespaceCapstan {
		variant = ""
	}
	if variant != "" {
		if _, ok := cur.Variants[variant]; !ok {
			if len(cur.Variants) > 1 {
				r.mu.Unlock()
				return 0, fmt.Errorf("endpoint %q has no variant %q", r.endpoint, variant)
			}
			variant = ""
		}
	}
	// History is in time order: i is the first sample inside the window
	// (strictly after the cutoff); the one before it is the baseline.
	cutoff := now.Add(-period)
	i, _ := slices.BinarySearchFunc(r.samples, cutoff, func(s sample, t time.Time) int {
		if s.at.After(t) {
			return 1
		}
		return -1
	})
	baseAt, base := r.samples[max(i-1, 0)].at, r.samples[max(i-1, 0)].snap
	var vals []float64
	if info.kind == gauge {
		vals = make([]float64, 0, len(r.samples)-i+1)
		for _, s := range r.samples[i:] {
			// A sample taken at this very instant is superseded by cur.
			if s.at.Before(now) {
				vals = append(vals, gaugeValue(m, s.snap, variant))
			}
		}
		vals = append(vals, gaugeValue(m, cur, variant))
	}
	if n := len(r.samples); n >= 2 && now.Sub(r.samples[n-2].at) < period/samplesPerPeriod {
		// Frequent reads (peeks between polls) would otherwise crowd the
		// bounded history: keep samples at least period/samplesPerPeriod
		// apart by replacing the newest instead of appending, so the history
		// always spans more than a period.
		r.samples[n-1] = sample{now, cur}
	} else {
		r.samples = append(r.samples, sample{now, cur})
	}
	r.prune(now)
	r.mu.Unlock()

	switch info.kind {
	case gauge:
		return summarize(vals, statistic)
	case rate:
		return rateValue(base, cur, now.Sub(baseAt))
	}
	return perRequestValue(m, base, cur, variant, statistic)
}

// prune keeps the history bounded. Callers may read with different periods
// (Application Auto Scaling), so age alone decides: samples more than a day
// old go, keeping one as a baseline, and at most maxSamples stay.
func (r *CloudWatchReader) prune(now time.Time) {
	cutoff := now.Add(-24 * time.Hour)
	i := 0
	for i < len(r.samples)-1 && r.samples[i+1].at.Before(cutoff) {
		i++
	}
	if n := len(r.samples) - i; n > maxSamples {
		// Drop a quarter at once so the copy is amortised over many reads.
		i = len(r.samples) - maxSamples*3/4
	}
	if i > 0 {
		r.samples = slices.Delete(r.samples, 0, i)
	}
}

// gaugeValue reads one gauge from one snapshot.
func gaugeValue(m Metric, s gateway.EndpointSnapshot, variant string) float64 {
	switch m {
	case MetricConcurrentRequestsPerModel:
		if variant != "" {
			return float64(s.Variants[variant].InFlight)
		}
		return float64(s.InFlight + s.Queued)
	case MetricQueueDepth:
		return float64(s.Queued + s.EngineWaiting)
	case MetricInFlightPerReplica:
		// Requests at the endpoint (in flight plus queued, held ones
		// included) per replica, like Knative's concurrency: queued requests
		// are demand too, and at zero replicas they make the trigger active.
		return float64(s.InFlight+s.Queued) / float64(max(s.Replicas, 1))
	case MetricKVCacheUtilization:
		return s.KVUsage
	}
	return math.NaN()
}

// rateValue is ArrivalRate: arrivals per second between two snapshots span
// apart (the real span, which is the period once history is long enough).
func rateValue(base, cur gateway.EndpointSnapshot, span time.Duration) (float64, error) {
	if span <= 0 {
		return 0, ErrNoData
	}
	return float64(delta(cur.Arrivals, base.Arrivals)) / span.Seconds(), nil
}

type counters struct {
	requests, errors uint64
	latency          float64
	replicas         int
}

func countersOf(s gateway.EndpointSnapshot, variant string) counters {
	if variant != "" {
		v := s.Variants[variant]
		return counters{v.Requests, v.Errors, v.LatencySeconds, v.Replicas}
	}
	return counters{s.Requests, s.Errors, s.LatencySeconds, s.Replicas}
}

// delta of a cumulative counter; a decrease means the route was re-created,
// and the new value is then the increase (Prometheus' reset rule).
func delta[T uint64 | float64](cur, base T) T {
	if cur < base {
		return cur
	}
	return cur - base
}

func perRequestValue(m Metric, base, cur gateway.EndpointSnapshot, variant, stat string) (float64, error) {
	if m == MetricTimeToFirstToken {
		n := delta(cur.TTFTCount, base.TTFTCount)
		if n == 0 {
			return 0, ErrNoData
		}
		sum := delta(cur.TTFTSeconds, base.TTFTSeconds)
		return fromSum(sum, n, stat), nil
	}
	c, b := countersOf(cur, variant), countersOf(base, variant)
	n := delta(c.requests, b.requests)
	if n == 0 {
		return 0, ErrNoData
	}
	switch m {
	case MetricModelLatency:
		return fromSum(delta(c.latency, b.latency)*1e6, n, stat), nil
	case MetricInvocations:
		// Each invocation is a sample of value 1.
		return fromSamples(float64(n), n, 1, 1, stat), nil
	case MetricInvocationsPerInstance:
		// SageMaker sends 1/instances per invocation; capstan uses the
		// replica count now.
		per := 1 / float64(max(c.replicas, 1))
		return fromSamples(float64(n)*per, n, per, per, stat), nil
	case MetricInvocation5XXErrors, MetricInvocationModelErrors:
		// One 0/1 sample per invocation: Average is the error rate.
		e := min(delta(c.errors, b.errors), n)
		lo, hi := 0.0, 0.0
		if e == n {
			lo = 1
		}
		if e > 0 {
			hi = 1
		}
		return fromSamples(float64(e), n, lo, hi, stat), nil
	}
	return 0, fmt.Errorf("metric %s has no counter mapping", m)
}

func fromSum(sum float64, n uint64, stat string) float64 {
	switch stat {
	case "Sum":
		return sum
	case "SampleCount":
		return float64(n)
	}
	return sum / float64(n)
}

func fromSamples(sum float64, n uint64, lo, hi float64, stat string) float64 {
	switch stat {
	case "Minimum":
		return lo
	case "Maximum":
		return hi
	}
	return fromSum(sum, n, stat)
}

// summarize applies a statistic to gauge samples (never empty: the current
// snapshot is always one). Percentiles use the nearest-rank method.
func summarize(vals []float64, stat string) (float64, error) {
	if len(vals) == 0 {
		return 0, ErrNoData
	}
	switch stat {
	case "SampleCount":
		return float64(len(vals)), nil
	case "Minimum":
		return slices.Min(vals), nil
	case "Maximum":
		return slices.Max(vals), nil
	}
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	switch stat {
	case "Sum":
		return sum, nil
	case "Average":
		return sum / float64(len(vals)), nil
	}
	p, ok := percentile(stat)
	if !ok {
		return 0, fmt.Errorf("unknown statistic %q", stat)
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	rank := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(rank, 0)], nil
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
	case !statOK(info.kind, t.MetricStat):
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

// Peek implements autoscale.Peeker: the reader works on the gateway's
// in-memory counters, cheap enough to read between polls. It always reads
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
