package endpoint

import (
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/gateway"
)

// Serverless variants (SageMaker ServerlessConfig) run on capstan's
// scale-to-zero machinery:
//
//   - Placement: a serverless replica is the simulated engine on the GPU of
//     catalog.ServerlessInstanceType (the smallest one-GPU type), and it
//     holds no fleet instance: SageMaker runs serverless compute on its own
//     capacity, outside the account's instances, and so does capstan (the
//     replicas are processes on this host). MemorySizeInMB sizes the bill,
//     not the simulated GPU.
//   - Scale: each replica takes ServerlessReplicaConcurrency requests at
//     once (one, as a SageMaker serverless container does). A variant keeps
//     ceil(ProvisionedConcurrency / that) replicas (0 without provisioned
//     concurrency) and grows to ceil(demand / that), demand being its
//     requests in flight plus those held while the endpoint has no replica,
//     up to ceil(MaxConcurrency / that). Once nothing has been in flight for
//     Options.ServerlessIdleTimeout it shrinks back to the provisioned count.
//   - At zero replicas the route has the controller as its activator: a
//     request is held by the gateway, Activate reconciles, the replica
//     starts, and the held requests go to it (the time from the activation
//     to the first healthy replica is capstan_endpoint_cold_start_seconds).
//   - Past MaxConcurrency requests in flight for the endpoint the gateway's
//     admission limit refuses the request (the runtime answers
//     ThrottlingException).
//   - Every answered request charges its compute time (per started
//     millisecond) × memory × catalog.ServerlessPricePerGBSecond to
//     Options.Costs (capstan_endpoint_cost_usd_total in capstan serve).

// ServerlessReplicaConcurrency is how many requests one serverless replica
// serves at once.
const ServerlessReplicaConcurrency = 1

// Serverless bounds (SageMaker's).
const (
	MaxServerlessConcurrency = 200
	// DefaultServerlessIdleTimeout is how long a serverless variant stays
	// scaled up with nothing in flight.
	DefaultServerlessIdleTimeout = 5 * time.Minute
)

// ServerlessConfig is a serverless variant's capacity. Field names follow
// SageMaker's ProductionVariantServerlessConfig.
type ServerlessConfig struct {
	MemorySizeInMB         int  `json:"MemorySizeInMB"`
	MaxConcurrency         int  `json:"MaxConcurrency"`
	ProvisionedConcurrency *int `json:"ProvisionedConcurrency,omitempty"`
}

// ServerlessUpdate is ProductionVariantServerlessUpdateConfig: the members
// given replace the serving ones.
type ServerlessUpdate struct {
	MaxConcurrency         *int
	ProvisionedConcurrency *int
}

func (c *ServerlessConfig) clone() *ServerlessConfig {
	if c == nil {
		return nil
	}
	out := *c
	if c.ProvisionedConcurrency != nil {
		out.ProvisionedConcurrency = new(int)
		*out.ProvisionedConcurrency = *c.ProvisionedConcurrency
	}
	return &out
}

// Equal reports whether c and o ask for the same capacity.
func (c *ServerlessConfig) Equal(o *ServerlessConfig) bool {
	if c == nil || o == nil {
		return c == o
	}
	pc := func(x *ServerlessConfig) int {
		if x.ProvisionedConcurrency == nil {
			return 0
		}
		return *x.ProvisionedConcurrency
	}
	return c.MemorySizeInMB == o.MemorySizeInMB && c.MaxConcurrency == o.MaxConcurrency && pc(c) == pc(o)
}

// provisioned is the replica count the variant keeps when idle.
func (c *ServerlessConfig) provisioned() int {
	if c.ProvisionedConcurrency == nil {
		return 0
	}
	return replicasFor(*c.ProvisionedConcurrency)
}

// most is the replica count MaxConcurrency allows.
func (c *ServerlessConfig) most() int { return replicasFor(c.MaxConcurrency) }

func replicasFor(concurrency int) int {
	if concurrency <= 0 {
		return 0
	}
	return (concurrency + ServerlessReplicaConcurrency - 1) / ServerlessReplicaConcurrency
}

// check refuses a config outside SageMaker's bounds (the API checks them
// too; this keeps the service safe for any caller).
func (c *ServerlessConfig) check(variant string) error {
	if !slices.Contains(catalog.ServerlessMemorySizes, c.MemorySizeInMB) {
		return invalidf("Variant %q: MemorySizeInMB %d is not one of %v.", variant, c.MemorySizeInMB, catalog.ServerlessMemorySizes)
	}
	if c.MaxConcurrency < 1 || c.MaxConcurrency > MaxServerlessConcurrency {
		return invalidf("Variant %q: MaxConcurrency %d is outside [1, %d].", variant, c.MaxConcurrency, MaxServerlessConcurrency)
	}
	if p := c.ProvisionedConcurrency; p != nil && (*p < 1 || *p > c.MaxConcurrency) {
		return invalidf("Variant %q: ProvisionedConcurrency %d must be between 1 and MaxConcurrency (%d).", variant, *p, c.MaxConcurrency)
	}
	return nil
}

// checkServerlessVariants refuses a config that gives a variant both
// instances and a ServerlessConfig, or mixes serverless and instance-based
// variants.
func checkServerlessVariants(vs []Variant) error {
	serverless := 0
	for _, v := range vs {
		if v.ServerlessConfig == nil {
			continue
		}
		serverless++
		if v.InstanceType != "" || v.InitialInstanceCount != 0 {
			return invalidf("Variant %q specifies both ServerlessConfig and InstanceType or InitialInstanceCount; a production variant is either serverless or instance-based.", v.VariantName)
		}
		if v.CapacityReservationConfig != nil {
			return invalidf("Variant %q: CapacityReservationConfig is not supported for serverless variants.", v.VariantName)
		}
		if err := v.ServerlessConfig.check(v.VariantName); err != nil {
			return err
		}
	}
	if serverless > 0 && serverless < len(vs) {
		return invalidf("An endpoint configuration cannot mix serverless and instance-based production variants.")
	}
	return nil
}

// LoadReader is the gateway's live view of an endpoint's requests
// (*gateway.Gateway implements it).
type LoadReader interface {
	Snapshot(endpoint string) gateway.EndpointSnapshot
}

// SetupTimeRecorder is implemented by a LoadReader that also records
// serverless cold starts as CloudWatch's ModelSetupTime (the gateway, into
// its metric store).
type SetupTimeRecorder interface {
	RecordModelSetupTime(endpoint, variant string, d time.Duration)
}

var _ SetupTimeRecorder = (*gateway.Gateway)(nil)

// serverlessState is one serverless variant's in-memory scaling state.
type serverlessState struct {
	busy      time.Time // last time a request was in flight or held
	coldStart time.Time // activation at zero replicas not yet served (zero: none)
}

// Costs is charged per request (capacity.Collector implements it).
type Costs interface {
	AddCost(endpoint string, usd float64)
}

// endpointMetrics are the endpoint controller's Prometheus series.
type endpointMetrics struct {
	coldStart *prometheus.HistogramVec
}

func newEndpointMetrics(reg prometheus.Registerer, log *slog.Logger) *endpointMetrics {
	m := &endpointMetrics{
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "capstan_endpoint_cold_start_seconds",
			Help:    "Time from an activation of a serverless variant at zero replicas to its first replica serving.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"endpoint", "variant"}),
	}
	if reg != nil {
		if err := reg.Register(m.coldStart); err != nil {
			log.Warn("register endpoint metrics", "err", err)
		}
	}
	return m
}

// meter returns the per-request billing hook of a serverless variant.
func (c *Controller) meter(endpoint string, memoryMB int) func(time.Duration) {
	costs := c.opts.Costs
	if costs == nil {
		return nil
	}
	return func(d time.Duration) {
		// Per started millisecond, at least one.
		ms := max((d+time.Millisecond-1)/time.Millisecond, 1)
		costs.AddCost(endpoint, catalog.ServerlessCost(memoryMB, int64(ms)))
	}
}

func (c *Controller) serverless(key string) *serverlessState {
	st, ok := c.sl[key]
	if !ok {
		st = &serverlessState{}
		c.sl[key] = st
	}
	return st
}

// scaleServerless sets the desired replica count of each serverless variant
// of the serving deployment from its load, applies a ServerlessUpdateConfig,
// and records cold starts that ended. It reports whether the record changed.
func (c *Controller) scaleServerless(ep *Endpoint) bool {
	cur := ep.Current
	if cur == nil || ep.Pending != nil {
		return false
	}
	var snap gateway.EndpointSnapshot
	loaded := false
	now := c.clock.Now()
	changed := false
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range cur.Variants {
		v := &cur.Variants[i]
		if v.Serverless == nil {
			continue
		}
		if v.DesiredServerless != nil && !v.Serverless.Equal(v.DesiredServerless) {
			v.Serverless = v.DesiredServerless.clone()
			changed = true
		}
		if !loaded && c.opts.Load != nil {
			snap, loaded = c.opts.Load.Snapshot(ep.Name), true
		}
		st := c.serverless(ep.Name + "/" + v.Name)
		demand := snap.Variants[v.Name].InFlight + snap.Held
		if demand > 0 {
			st.busy = now
		}
		healthy := 0
		for _, id := range v.Replicas {
			if c.eng.Healthy(id) {
				healthy++
			}
		}
		if !st.coldStart.IsZero() && healthy > 0 {
			c.m.coldStart.WithLabelValues(ep.Name, v.Name).Observe(now.Sub(st.coldStart).Seconds())
			if r, ok := c.opts.Load.(SetupTimeRecorder); ok {
				r.RecordModelSetupTime(ep.Name, v.Name, now.Sub(st.coldStart))
			}
			c.log.Info("serverless cold start served", "endpoint", ep.Name, "variant", v.Name, "seconds", now.Sub(st.coldStart).Seconds())
			st.coldStart = time.Time{}
		}
		want := max(v.Serverless.provisioned(), min(replicasFor(demand), v.Serverless.most()))
		switch {
		case want > v.DesiredCount:
		case want < v.DesiredCount && now.Sub(st.busy) >= c.opts.ServerlessIdleTimeout:
		default:
			continue
		}
		if v.DesiredCount == 0 && len(v.Replicas) == 0 && want > 0 && demand > 0 && st.coldStart.IsZero() {
			st.coldStart = now
		}
		c.log.Info("serverless scale", "endpoint", ep.Name, "variant", v.Name, "from", v.DesiredCount, "to", want, "demand", demand)
		v.DesiredCount = want
		changed = true
	}
	return changed
}

// forgetServerless drops the in-memory state of an endpoint's variants.
func (c *Controller) forgetServerless(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.sl {
		if len(k) > len(name) && k[:len(name)+1] == name+"/" {
			delete(c.sl, k)
		}
	}
}

// serverlessRoute sets a serverless variant's billing meter (route adds its
// MaxConcurrency to the endpoint's admission limit).
func (c *Controller) serverlessRoute(vr *gateway.VariantRoute, ep string, v *VariantState) {
	if v.Serverless != nil {
		vr.Meter = c.meter(ep, v.Serverless.MemorySizeInMB)
	}
}
