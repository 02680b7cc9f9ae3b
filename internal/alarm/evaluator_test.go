package alarm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gateway registers collectors named and labelled as internal/gateway's
// (metrics.go), on a real registry; the latency histogram has the given
// buckets.
type gateway struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

func newGateway(t *testing.T, buckets []float64) *gateway {
	t.Helper()
	g := &gateway{reg: prometheus.NewRegistry()}
	g.requests = g.newRequests()
	g.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "capstan", Subsystem: "gateway", Name: "request_duration_seconds",
		Buckets: buckets,
	}, []string{"endpoint", "variant"})
	g.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "capstan", Subsystem: "gateway", Name: "in_flight_requests",
	}, []string{"endpoint", "variant"})
	g.reg.MustRegister(g.requests, g.latency, g.inFlight)
	return g
}

func (g *gateway) newRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "capstan", Subsystem: "gateway", Name: "requests_total",
	}, []string{"endpoint", "variant", "status"})
}

// restartRequests replaces the requests counter with a fresh one, as a
// restarted process would expose it: every series starts again from 0.
func (g *gateway) restartRequests() {
	g.reg.Unregister(g.requests)
	g.requests = g.newRequests()
	g.reg.MustRegister(g.requests)
}

func (g *gateway) count(endpoint, variant, status string, n int) {
	g.requests.WithLabelValues(endpoint, variant, status).Add(float64(n))
}

func (g *gateway) observe(endpoint, variant string, seconds float64, n int) {
	for range n {
		g.latency.WithLabelValues(endpoint, variant).Observe(seconds)
	}
}

// testBuckets make quantiles easy to work out by hand.
var testBuckets = []float64{0.1, 0.2, 0.4, 0.8}

const (
	requests = "capstan_gateway_requests_total"
	latency  = "capstan_gateway_request_duration_seconds"
	inFlight = "capstan_gateway_in_flight_requests"
)

func errorsAlarm(cmp Comparison, threshold float64) Alarm {
	return Alarm{Name: "high-errors", Metric: requests, Labels: map[string]string{"status": "5xx"}, Comparison: cmp, Threshold: threshold}
}

func latencyAlarm(s Statistic, cmp Comparison, threshold float64) Alarm {
	return Alarm{Name: "slow", Metric: latency, Statistic: s, Comparison: cmp, Threshold: threshold}
}

// spread observes, on endpoint a variant v1, 100 requests whose deltas
// give cumulative bucket counts 40, 80, 96, 100 at 0.1, 0.2, 0.4, 0.8:
// p50 = 0.1+0.1·10/40 = 0.125, p90 = 0.2+0.2·10/16 = 0.325,
// p99 = 0.4+0.4·3/4 = 0.7, mean = (40·0.05+40·0.15+16·0.3+4·0.7)/100 = 0.156.
func spread(g *gateway) {
	g.observe("a", "v1", 0.05, 40)
	g.observe("a", "v1", 0.15, 40)
	g.observe("a", "v1", 0.3, 16)
	g.observe("a", "v1", 0.7, 4)
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name       string
		alarms     []Alarm // armed in this order, for endpoint "a"
		before     func(g *gateway)
		after      func(g *gateway)
		atArm      string // Check's reason right after Arm; "" = does not fire
		wantReason string // Check's reason after after; "" = does not fire
	}{
		{
			name:       "increase above threshold fires; growth before arming is not counted",
			alarms:     []Alarm{errorsAlarm(GreaterThanThreshold, 5)},
			before:     func(g *gateway) { g.count("a", "v1", "500", 10) },
			after:      func(g *gateway) { g.count("a", "v1", "500", 4); g.count("a", "v1", "503", 3) },
			wantReason: `alarm "high-errors": capstan_gateway_requests_total{status="5xx"} increase 7 > threshold 5`,
		},
		{
			name:   "increase equal to a GreaterThan threshold does not fire",
			alarms: []Alarm{errorsAlarm(GreaterThanThreshold, 5)},
			before: func(g *gateway) { g.count("a", "v1", "500", 10) },
			after:  func(g *gateway) { g.count("a", "v1", "500", 5) },
		},
		{
			name:       "GreaterThanOrEqualToThreshold fires at the threshold",
			alarms:     []Alarm{errorsAlarm(GreaterThanOrEqualToThreshold, 5)},
			after:      func(g *gateway) { g.count("a", "v1", "502", 5) },
			wantReason: `alarm "high-errors": capstan_gateway_requests_total{status="5xx"} increase 5 >= threshold 5`,
		},
		{
			name:   "GreaterThanOrEqualToThreshold below the threshold does not fire",
			alarms: []Alarm{errorsAlarm(GreaterThanOrEqualToThreshold, 5)},
			after:  func(g *gateway) { g.count("a", "v1", "502", 4) },
		},
		{
			name:       "LessThanThreshold fires below",
			alarms:     []Alarm{{Name: "quiet", Metric: requests, Labels: map[string]string{"status": "200"}, Comparison: LessThanThreshold, Threshold: 3}},
			before:     func(g *gateway) { g.count("a", "v1", "200", 50) },
			after:      func(g *gateway) { g.count("a", "v1", "200", 2) },
			atArm:      `alarm "quiet": capstan_gateway_requests_total{status="200"} increase 0 < threshold 3`,
			wantReason: `alarm "quiet": capstan_gateway_requests_total{status="200"} increase 2 < threshold 3`,
		},
		{
			name:   "LessThanThreshold at the threshold does not fire",
			alarms: []Alarm{{Name: "quiet", Metric: requests, Labels: map[string]string{"status": "200"}, Comparison: LessThanThreshold, Threshold: 3}},
			before: func(g *gateway) { g.count("a", "v1", "200", 1) },
			after:  func(g *gateway) { g.count("a", "v1", "200", 3) },
			atArm:  `alarm "quiet": capstan_gateway_requests_total{status="200"} increase 0 < threshold 3`,
		},
		{
			name:       "LessThanOrEqualToThreshold fires at the threshold",
			alarms:     []Alarm{{Name: "quiet", Metric: requests, Labels: map[string]string{"status": "200"}, Comparison: LessThanOrEqualToThreshold, Threshold: 3}},
			before:     func(g *gateway) { g.count("a", "v1", "200", 1) },
			after:      func(g *gateway) { g.count("a", "v1", "200", 3) },
			atArm:      `alarm "quiet": capstan_gateway_requests_total{status="200"} increase 0 <= threshold 3`,
			wantReason: `alarm "quiet": capstan_gateway_requests_total{status="200"} increase 3 <= threshold 3`,
		},
		{
			name:   "LessThanOrEqualToThreshold above the threshold does not fire",
			alarms: []Alarm{{Name: "quiet", Metric: requests, Labels: map[string]string{"status": "200"}, Comparison: LessThanOrEqualToThreshold, Threshold: 3}},
			before: func(g *gateway) { g.count("a", "v1", "200", 1) },
			after:  func(g *gateway) { g.count("a", "v1", "200", 4) },
			atArm:  `alarm "quiet": capstan_gateway_requests_total{status="200"} increase 0 <= threshold 3`,
		},
		{
			name:   "another endpoint's series are ignored",
			alarms: []Alarm{errorsAlarm(GreaterThanThreshold, 5)},
			after:  func(g *gateway) { g.count("b", "v1", "500", 100); g.count("a", "v1", "500", 1) },
		},
		{
			name:   "an endpoint whose name prefixes another's is not mixed with it",
			alarms: []Alarm{errorsAlarm(GreaterThanThreshold, 5)},
			after:  func(g *gateway) { g.count("a-canary", "v1", "500", 100) },
		},
		{
			name:       "an exact status counts only that code",
			alarms:     []Alarm{{Name: "unavailable", Metric: requests, Labels: map[string]string{"status": "503"}, Comparison: GreaterThanThreshold, Threshold: 2}},
			after:      func(g *gateway) { g.count("a", "v1", "503", 3); g.count("a", "v1", "500", 40) },
			wantReason: `alarm "unavailable": capstan_gateway_requests_total{status="503"} increase 3 > threshold 2`,
		},
		{
			name:   "a status class matches no other class nor error",
			alarms: []Alarm{errorsAlarm(GreaterThanThreshold, 0)},
			after: func(g *gateway) {
				g.count("a", "v1", "200", 9)
				g.count("a", "v1", "404", 9)
				g.count("a", "v1", "error", 9)
			},
		},
		{
			name:       "a variant label narrows to that variant",
			alarms:     []Alarm{{Name: "green-errors", Metric: requests, Labels: map[string]string{"variant": "green", "status": "5xx"}, Comparison: GreaterThanThreshold, Threshold: 1}},
			after:      func(g *gateway) { g.count("a", "blue", "500", 50); g.count("a", "green", "500", 2) },
			wantReason: `alarm "green-errors": capstan_gateway_requests_total{status="5xx",variant="green"} increase 2 > threshold 1`,
		},
		{
			name:       "series that appear after arming count from zero",
			alarms:     []Alarm{errorsAlarm(GreaterThanThreshold, 5)},
			after:      func(g *gateway) { g.count("a", "v1", "504", 6) },
			wantReason: `alarm "high-errors": capstan_gateway_requests_total{status="5xx"} increase 6 > threshold 5`,
		},
		{
			name:       "a restarted counter counts its new value, not a negative growth",
			alarms:     []Alarm{errorsAlarm(GreaterThanThreshold, 2)},
			before:     func(g *gateway) { g.count("a", "v1", "500", 10) },
			after:      func(g *gateway) { g.restartRequests(); g.count("a", "v1", "500", 3) },
			wantReason: `alarm "high-errors": capstan_gateway_requests_total{status="5xx"} increase 3 > threshold 2`,
		},
		{
			name:   "no matching series is no data, even for LessThan",
			alarms: []Alarm{{Name: "quiet", Metric: requests, Labels: map[string]string{"status": "200"}, Comparison: LessThanThreshold, Threshold: 3}},
			after:  func(g *gateway) { g.count("b", "v1", "200", 1) },
		},
		{
			name:   "gauge value sums the endpoint's variants now",
			alarms: []Alarm{{Name: "busy", Metric: inFlight, Comparison: GreaterThanThreshold, Threshold: 6}},
			before: func(g *gateway) { g.inFlight.WithLabelValues("a", "v1").Set(100) },
			after: func(g *gateway) {
				g.inFlight.WithLabelValues("a", "v1").Set(4)
				g.inFlight.WithLabelValues("a", "v2").Set(3)
				g.inFlight.WithLabelValues("b", "v1").Set(1000)
			},
			atArm:      `alarm "busy": capstan_gateway_in_flight_requests value 100 > threshold 6`,
			wantReason: `alarm "busy": capstan_gateway_in_flight_requests value 7 > threshold 6`,
		},
		{
			name:   "gauge value under a GreaterThan threshold does not fire",
			alarms: []Alarm{{Name: "busy", Metric: inFlight, Statistic: Value, Comparison: GreaterThanThreshold, Threshold: 6}},
			after:  func(g *gateway) { g.inFlight.WithLabelValues("a", "v1").Set(6) },
		},
		{
			name:       "histogram p50 over observations since armed",
			alarms:     []Alarm{latencyAlarm(P50, GreaterThanThreshold, 0.12)},
			before:     func(g *gateway) { g.observe("a", "v1", 5, 1000) },
			after:      spread,
			wantReason: `alarm "slow": capstan_gateway_request_duration_seconds p50 0.125 > threshold 0.12`,
		},
		{
			name:   "histogram p50 under the threshold does not fire",
			alarms: []Alarm{latencyAlarm(P50, GreaterThanThreshold, 0.13)},
			before: func(g *gateway) { g.observe("a", "v1", 5, 1000) },
			after:  spread,
		},
		{
			name:       "histogram p90",
			alarms:     []Alarm{latencyAlarm(P90, GreaterThanOrEqualToThreshold, 0.325)},
			before:     func(g *gateway) { g.observe("a", "v1", 5, 1000) },
			after:      spread,
			wantReason: `alarm "slow": capstan_gateway_request_duration_seconds p90 0.325 >= threshold 0.325`,
		},
		{
			name:       "histogram p99",
			alarms:     []Alarm{latencyAlarm(P99, LessThanThreshold, 0.75)},
			before:     func(g *gateway) { g.observe("a", "v1", 5, 1000) },
			after:      spread,
			wantReason: `alarm "slow": capstan_gateway_request_duration_seconds p99 0.7 < threshold 0.75`,
		},
		{
			name:       "histogram mean",
			alarms:     []Alarm{latencyAlarm(Mean, GreaterThanThreshold, 0.15)},
			before:     func(g *gateway) { g.observe("a", "v1", 5, 1000) },
			after:      spread,
			wantReason: `alarm "slow": capstan_gateway_request_duration_seconds mean 0.156 > threshold 0.15`,
		},
		{
			name:       "a quantile beyond the last bucket is its upper bound",
			alarms:     []Alarm{latencyAlarm(P99, GreaterThanThreshold, 0.5)},
			after:      func(g *gateway) { g.observe("a", "v1", 5, 10) },
			wantReason: `alarm "slow": capstan_gateway_request_duration_seconds p99 0.8 > threshold 0.5`,
		},
		{
			// Cumulative 1, 1, 4 at 0.1, 0.2, 0.4: rank 2 gives 0.2+0.2·1/3.
			name:   "histogram series of the endpoint's variants are added",
			alarms: []Alarm{latencyAlarm(P50, GreaterThanThreshold, 0.15)},
			after: func(g *gateway) {
				g.observe("a", "v1", 0.05, 1)
				g.observe("a", "v2", 0.3, 3)
				g.observe("b", "v1", 0.05, 100)
			},
			wantReason: `alarm "slow": capstan_gateway_request_duration_seconds p50 0.266667 > threshold 0.15`,
		},
		{
			name:   "no observations since armed is no data",
			alarms: []Alarm{latencyAlarm(Mean, LessThanThreshold, 1)},
			before: func(g *gateway) { g.observe("a", "v1", 0.05, 10) },
			after:  func(g *gateway) { g.observe("b", "v1", 0.05, 10) },
		},
		{
			name:   "a statistic that does not fit a metric without series when armed is no data",
			alarms: []Alarm{{Name: "odd", Metric: requests, Statistic: P99, Comparison: GreaterThanThreshold, Threshold: 0}},
			after:  func(g *gateway) { g.count("a", "v1", "500", 10) },
		},
		{
			name: "the first alarm breaching, in the order armed, is reported",
			alarms: []Alarm{
				errorsAlarm(GreaterThanThreshold, 100),
				latencyAlarm(Mean, GreaterThanThreshold, 1),
				{Name: "any-errors", Metric: requests, Labels: map[string]string{"status": "5xx"}, Comparison: GreaterThanThreshold, Threshold: 0},
			},
			after:      func(g *gateway) { g.count("a", "v1", "500", 1); g.observe("a", "v1", 5, 1) },
			wantReason: `alarm "slow": capstan_gateway_request_duration_seconds mean 5 > threshold 1`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, testBuckets)
			if tc.before != nil {
				tc.before(g)
			}
			ev, err := NewEvaluator(g.reg, tc.alarms)
			if err != nil {
				t.Fatal(err)
			}
			names := make([]string, len(tc.alarms))
			for i, a := range tc.alarms {
				names[i] = a.Name
			}
			w, err := ev.Arm(context.Background(), "a", names)
			if err != nil {
				t.Fatal(err)
			}
			if fired, reason := w.Check(); fired != (tc.atArm != "") || reason != tc.atArm {
				t.Fatalf("Check right after Arm = %v, %q; want %v, %q", fired, reason, tc.atArm != "", tc.atArm)
			}
			tc.after(g)
			fired, reason := w.Check()
			if fired != (tc.wantReason != "") || reason != tc.wantReason {
				t.Fatalf("Check = %v, %q; want %v, %q", fired, reason, tc.wantReason != "", tc.wantReason)
			}
		})
	}
}

func TestArmErrors(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	alarms := []Alarm{
		errorsAlarm(GreaterThanThreshold, 5),
		latencyAlarm("", GreaterThanThreshold, 1),
		{Name: "p99-of-a-counter", Metric: requests, Statistic: P99, Comparison: GreaterThanThreshold, Threshold: 1},
		{Name: "value-of-a-counter", Metric: requests, Statistic: Value, Comparison: GreaterThanThreshold, Threshold: 1},
		{Name: "increase-of-a-gauge", Metric: inFlight, Statistic: Increase, Comparison: GreaterThanThreshold, Threshold: 1},
	}
	tests := []struct {
		name     string
		ctx      context.Context
		endpoint string
		names    []string
		wantErr  string
	}{
		{"canceled context", canceled, "a", []string{"high-errors"}, "context canceled"},
		{"no endpoint", context.Background(), "", []string{"high-errors"}, "endpoint is empty"},
		{"histogram without statistic", context.Background(), "a", []string{"slow"}, `alarm "slow": a histogram needs statistic p50, p90, p99 or mean`},
		{"quantile of a counter", context.Background(), "a", []string{"p99-of-a-counter"}, `alarm "p99-of-a-counter": statistic p99 does not apply to a counter`},
		{"value of a counter", context.Background(), "a", []string{"value-of-a-counter"}, "statistic value does not apply to a counter"},
		{"increase of a gauge", context.Background(), "a", []string{"increase-of-a-gauge"}, "statistic increase does not apply to a gauge"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, testBuckets)
			// Every family has a series, so Arm knows each metric's type.
			g.count("x", "v1", "200", 1)
			g.observe("x", "v1", 0.1, 1)
			g.inFlight.WithLabelValues("x", "v1").Set(1)
			ev, err := NewEvaluator(g.reg, alarms)
			if err != nil {
				t.Fatal(err)
			}
			w, err := ev.Arm(tc.ctx, tc.endpoint, tc.names)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Arm = %v, %v; want error containing %q", w, err, tc.wantErr)
			}
		})
	}
}

func TestArmUnknownAlarms(t *testing.T) {
	g := newGateway(t, testBuckets)
	ev, err := NewEvaluator(g.reg, []Alarm{errorsAlarm(GreaterThanThreshold, 5)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ev.Arm(context.Background(), "a", []string{"nope", "high-errors", "gone", "nope"})
	var u *UnknownAlarmError
	if !errors.As(err, &u) || !slices.Equal(u.Names, []string{"nope", "gone"}) {
		t.Fatalf("Arm error = %v; want *UnknownAlarmError{nope, gone}", err)
	}
	if got := err.Error(); got != "unknown alarms: nope, gone" {
		t.Fatalf("Error() = %q", got)
	}
	if !IsUnknownAlarm(fmt.Errorf("update endpoint: %w", err)) {
		t.Fatal("IsUnknownAlarm(wrapped) = false")
	}
	if IsUnknownAlarm(errors.New("unknown alarms: nope")) {
		t.Fatal("IsUnknownAlarm(plain error) = true")
	}
}

func TestGatherFailure(t *testing.T) {
	g := newGateway(t, testBuckets)
	broken := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return nil, errors.New("collector broke") })
	partial := prometheus.Gatherers{g.reg, broken}
	alarms := []Alarm{errorsAlarm(GreaterThanThreshold, 1)}

	ev, err := NewEvaluator(partial, alarms)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Arm(context.Background(), "a", []string{"high-errors"}); err == nil || !strings.Contains(err.Error(), "collector broke") {
		t.Fatalf("Arm on a failing gatherer = %v; want the gather error", err)
	}

	// Armed on a healthy gatherer, a Check whose gather half-fails still
	// judges the families that came back.
	ev, err = NewEvaluator(g.reg, alarms)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ev.Arm(context.Background(), "a", []string{"high-errors"})
	if err != nil {
		t.Fatal(err)
	}
	w.gatherer = partial
	g.count("a", "v1", "500", 2)
	if fired, _ := w.Check(); !fired {
		t.Fatal("Check on a partial gather did not fire")
	}
}
