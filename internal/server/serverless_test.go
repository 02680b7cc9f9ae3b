package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/metricstore"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// gatedEngine answers like fakeEngine but holds every request while closed.
type gatedEngine struct {
	mu   sync.Mutex
	gate chan struct{} // closed: requests pass
}

func newGatedEngine(t *testing.T) (*gatedEngine, *httptest.Server) {
	g := &gatedEngine{gate: make(chan struct{})}
	close(g.gate)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		gate := g.gate
		g.mu.Unlock()
		if r.URL.Path != "/health" && r.URL.Path != "/metrics" {
			<-gate
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"echo":%q}`, body)
	}))
	t.Cleanup(func() { g.open(); srv.Close() })
	return g, srv
}

func (g *gatedEngine) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedEngine) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

// metricValue sums a counter's or a gauge's value, or a histogram's sample
// count, over the series of name with endpoint ep.
func metricValue(t *testing.T, url, name, ep string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, m := range fams[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "endpoint" && lp.GetValue() == ep {
				if m.GetCounter() != nil {
					sum += m.GetCounter().GetValue()
				} else if m.GetGauge() != nil {
					sum += m.GetGauge().GetValue()
				} else if m.GetHistogram() != nil {
					sum += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return sum
}

func running(rt *fake.Runtime, state runtime.State) []string {
	var out []string
	for _, r := range rt.List() {
		if r.State == state {
			out = append(out, r.Spec.ID)
		}
	}
	return out
}

func serverlessVariant(mem, maxc int32, pc *int32) smtypes.ProductionVariant {
	return smtypes.ProductionVariant{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m1"),
		ServerlessConfig: &smtypes.ProductionVariantServerlessConfig{MemorySizeInMB: aws.Int32(mem), MaxConcurrency: aws.Int32(maxc),
			ProvisionedConcurrency: pc}}
}

func TestServerlessEndpoint(t *testing.T) {
	gate, eng := newGatedEngine(t)
	rt := fake.New(fake.Manual())
	rt.SetDefaultAddr(strings.TrimPrefix(eng.URL, "http://"))
	h := startHarnessOn(t, config.Config{DevClock: true}, rt, rt)
	dev := h.srv.Clock.(*clock.Dev)
	ctx := context.Background()
	h.setup(t, "m1", "unused", 1)
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("sl"),
		ProductionVariants: []smtypes.ProductionVariant{serverlessVariant(2048, 2, nil)}}); err != nil {
		t.Fatal(err)
	}
	dc, err := h.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String("sl")})
	if err != nil {
		t.Fatal(err)
	}
	if sc := dc.ProductionVariants[0].ServerlessConfig; sc == nil || aws.ToInt32(sc.MemorySizeInMB) != 2048 || aws.ToInt32(sc.MaxConcurrency) != 2 ||
		dc.ProductionVariants[0].InstanceType != "" || dc.ProductionVariants[0].InitialInstanceCount != nil {
		t.Fatalf("described variant %+v", dc.ProductionVariants[0])
	}
	h.createEP(t, "sl", "sl")
	d := h.waitStatus(t, "sl", smtypes.EndpointStatusInService)
	pv := d.ProductionVariants[0]
	if pv.CurrentServerlessConfig == nil || aws.ToInt32(pv.CurrentServerlessConfig.MemorySizeInMB) != 2048 ||
		pv.DesiredServerlessConfig == nil || aws.ToInt32(pv.DesiredServerlessConfig.MaxConcurrency) != 2 || aws.ToInt32(pv.CurrentInstanceCount) != 0 {
		t.Fatalf("serving variant %+v", pv)
	}
	if n := len(rt.List()); n != 0 {
		t.Fatalf("%d replicas at InService, want 0", n)
	}

	// Cold start: the first invocation is held until a replica is healthy.
	done := make(chan error, 1)
	go func() { done <- h.invoke("sl") }()
	testutil.Eventually(t, 20*time.Second, "a replica starting", func() bool { return len(running(rt, runtime.StateStarting)) == 1 })
	testutil.Eventually(t, 20*time.Second, "the invocation held by the activator", func() bool {
		return metricValue(t, h.url, "capstan_gateway_held_requests", "sl") == 1
	})
	// Held, and nothing can answer it before the replica is made healthy below.
	select {
	case err := <-done:
		t.Fatalf("answered before the replica was healthy: %v", err)
	default:
	}
	// A second held, by the server's clock: the cold start measured below.
	if err := dev.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.SetState(running(rt, runtime.StateStarting)[0], runtime.StateHealthy, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("cold-started invocation: %v", err)
	}
	testutil.Eventually(t, 20*time.Second, "the cold start observed", func() bool {
		return metricValue(t, h.url, "capstan_endpoint_cold_start_seconds", "sl") == 1
	})
	// The same cold start, as CloudWatch's ModelSetupTime (microseconds).
	if got := h.srv.MetricStore.List("AWS/SageMaker", "ModelSetupTime", []metricstore.Dimension{{Name: "EndpointName", Value: "sl"}}); len(got) != 1 {
		t.Fatalf("ModelSetupTime series %v, want one", got)
	} else if aggs, err := h.srv.MetricStore.Statistics(metricstore.Query{Namespace: "AWS/SageMaker", Metric: "ModelSetupTime",
		Dimensions: got[0].Dimensions, Start: h.srv.Clock.Now().Add(-time.Hour), End: h.srv.Clock.Now().Add(time.Second), Period: time.Hour}); err != nil ||
		len(aggs) != 1 || aggs[0].SampleCount != 1 || !(aggs[0].Sum >= 1_000_000) {
		t.Fatalf("ModelSetupTime %+v, %v: want one cold start of at least the second held", aggs, err)
	}
	cost1 := metricValue(t, h.url, "capstan_endpoint_cost_usd_total", "sl")
	if cost1 <= 0 {
		t.Fatalf("cost after one request = %v", cost1)
	}
	if err := h.invoke("sl"); err != nil {
		t.Fatal(err)
	}
	if cost2 := metricValue(t, h.url, "capstan_endpoint_cost_usd_total", "sl"); cost2 <= cost1 {
		t.Fatalf("cost did not grow with a request: %v then %v", cost1, cost2)
	}

	// MaxConcurrency 2: two slow requests are served, a third is throttled.
	gate.close()
	results := make(chan error, 2)
	for range 2 {
		go func() { results <- h.invoke("sl") }()
	}
	testutil.Eventually(t, 20*time.Second, "two requests in flight", func() bool { return h.srv.Gateway.Snapshot("sl").InFlight == 2 })
	err = h.invoke("sl")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
		t.Fatalf("third concurrent invocation: %v, want ThrottlingException", err)
	}
	// The load scales the variant out to two replicas.
	testutil.Eventually(t, 20*time.Second, "a second replica", func() bool { return len(rt.List()) == 2 })
	for _, id := range running(rt, runtime.StateStarting) {
		_ = rt.SetState(id, runtime.StateHealthy, "")
	}
	gate.open()
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("invocation within MaxConcurrency: %v", err)
		}
	}
	d = h.waitStatus(t, "sl", smtypes.EndpointStatusInService)
	if n := aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount); n != 2 {
		t.Fatalf("CurrentInstanceCount %d after two concurrent requests, want 2", n)
	}

	// Idle past the timeout: back to zero replicas.
	if err := dev.Advance(6 * time.Minute); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "zero replicas", func() bool {
		return len(running(rt, runtime.StateHealthy)) == 0 && len(running(rt, runtime.StateStarting)) == 0
	})
	d = h.waitStatus(t, "sl", smtypes.EndpointStatusInService)
	if n := aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount); n != 0 {
		t.Fatalf("CurrentInstanceCount %d after idle, want 0", n)
	}

	// ServerlessUpdateConfig changes MaxConcurrency and provisioned concurrency in place.
	if _, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("sl"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"),
			ServerlessUpdateConfig: &smtypes.ProductionVariantServerlessUpdateConfig{MaxConcurrency: aws.Int32(3), ProvisionedConcurrency: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "a provisioned replica", func() bool { return len(running(rt, runtime.StateStarting)) == 1 })
	_ = rt.SetState(running(rt, runtime.StateStarting)[0], runtime.StateHealthy, "")
	d = h.waitStatus(t, "sl", smtypes.EndpointStatusInService)
	if sc := d.ProductionVariants[0].CurrentServerlessConfig; aws.ToInt32(sc.MaxConcurrency) != 3 || aws.ToInt32(sc.ProvisionedConcurrency) != 1 ||
		aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount) != 1 {
		t.Fatalf("after ServerlessUpdateConfig: %+v", d.ProductionVariants[0])
	}

	// UpdateEndpoint to a config with another ServerlessConfig.
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("sl4g"),
		ProductionVariants: []smtypes.ProductionVariant{serverlessVariant(4096, 5, nil)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("sl"), EndpointConfigName: aws.String("sl4g")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the update to sl4g", func() bool {
		d, err := h.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("sl")})
		return err == nil && d.EndpointStatus == smtypes.EndpointStatusInService && aws.ToString(d.EndpointConfigName) == "sl4g" &&
			aws.ToInt32(d.ProductionVariants[0].CurrentServerlessConfig.MemorySizeInMB) == 4096
	})
	testutil.Eventually(t, 20*time.Second, "the old provisioned replica stopped", func() bool { return len(running(rt, runtime.StateHealthy)) == 0 })
}

func TestServerlessConfigValidation(t *testing.T) {
	h := startHarness(t, config.Config{})
	ctx := context.Background()
	h.setup(t, "m1", "unused", 1)
	pc := func(n int32) *int32 { return &n }
	both := serverlessVariant(2048, 2, nil)
	both.InstanceType, both.InitialInstanceCount = "ml.g5.xlarge", aws.Int32(1)
	for _, tc := range []struct {
		name string
		v    smtypes.ProductionVariant
		want string
	}{
		{"memory below the minimum", serverlessVariant(1000, 2, nil),
			"Value '1000' at 'productionVariants.1.member.serverlessConfig.memorySizeInMB' failed to satisfy constraint: Member must have value greater than or equal to 1024"},
		{"memory not a size", serverlessVariant(1500, 2, nil),
			"Value '1500' at 'productionVariants.1.member.serverlessConfig.memorySizeInMB' failed to satisfy constraint: Member must satisfy enum value set"},
		{"memory above the maximum", serverlessVariant(8192, 2, nil), "Member must have value less than or equal to 6144"},
		{"max concurrency 0", serverlessVariant(2048, 0, nil), "'productionVariants.1.member.serverlessConfig.maxConcurrency' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"max concurrency 201", serverlessVariant(2048, 201, nil), "Member must have value less than or equal to 200"},
		{"provisioned over max", serverlessVariant(2048, 2, pc(3)), "ProvisionedConcurrency 3 must be between 1 and MaxConcurrency (2)"},
		{"instance type and serverless", both, "specifies both ServerlessConfig and InstanceType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("bad"),
				ProductionVariants: []smtypes.ProductionVariant{tc.v}})
			code, msg := apiCode(err)
			if code != "ValidationException" || !strings.Contains(msg, tc.want) {
				t.Fatalf("got %s %q, want ValidationException containing %q", code, msg, tc.want)
			}
		})
	}
	if _, err := h.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String("bad")}); err == nil {
		t.Fatal("a refused config was stored")
	}

	// ServerlessUpdateConfig on an instance-based variant, and DesiredInstanceCount
	// on a serverless one, are refused.
	h.createEP(t, "inst", "unused")
	h.waitStatus(t, "inst", smtypes.EndpointStatusInService)
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("sl"),
		ProductionVariants: []smtypes.ProductionVariant{serverlessVariant(1024, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	h.createEP(t, "sl", "sl")
	h.waitStatus(t, "sl", smtypes.EndpointStatusInService)
	for _, tc := range []struct {
		ep   string
		d    smtypes.DesiredWeightAndCapacity
		want string
	}{
		{"inst", smtypes.DesiredWeightAndCapacity{VariantName: aws.String("AllTraffic"),
			ServerlessUpdateConfig: &smtypes.ProductionVariantServerlessUpdateConfig{MaxConcurrency: aws.Int32(3)}}, "is not serverless"},
		{"sl", smtypes.DesiredWeightAndCapacity{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(2)}, "is serverless"},
		{"sl", smtypes.DesiredWeightAndCapacity{VariantName: aws.String("AllTraffic"),
			ServerlessUpdateConfig: &smtypes.ProductionVariantServerlessUpdateConfig{ProvisionedConcurrency: aws.Int32(2)}}, "must be between 1 and MaxConcurrency (1)"},
		{"sl", smtypes.DesiredWeightAndCapacity{VariantName: aws.String("AllTraffic"),
			ServerlessUpdateConfig: &smtypes.ProductionVariantServerlessUpdateConfig{MaxConcurrency: aws.Int32(0)}},
			"'desiredWeightsAndCapacities.1.member.serverlessUpdateConfig.maxConcurrency' failed to satisfy constraint"},
	} {
		_, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String(tc.ep),
			DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{tc.d}})
		if code, msg := apiCode(err); code != "ValidationException" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: got %s %q, want ValidationException containing %q", tc.ep, code, msg, tc.want)
		}
	}
	d := h.waitStatus(t, "sl", smtypes.EndpointStatusInService)
	if sc := d.ProductionVariants[0].DesiredServerlessConfig; aws.ToInt32(sc.MaxConcurrency) != 1 || sc.ProvisionedConcurrency != nil {
		t.Fatalf("a refused update changed the desired config: %+v", sc)
	}
}

// TestServerlessProvisionedConcurrency: provisioned concurrency is warm at
// InService and stays after the idle timeout.
func TestServerlessProvisionedConcurrency(t *testing.T) {
	h := startHarness(t, config.Config{DevClock: true})
	dev := h.srv.Clock.(*clock.Dev)
	ctx := context.Background()
	h.setup(t, "m1", "unused", 1)
	pc := int32(2)
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("pc"),
		ProductionVariants: []smtypes.ProductionVariant{serverlessVariant(3072, 4, &pc)}}); err != nil {
		t.Fatal(err)
	}
	h.createEP(t, "pc", "pc")
	d := h.waitStatus(t, "pc", smtypes.EndpointStatusInService)
	if n := aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount); n != 2 || len(running(h.rt, runtime.StateHealthy)) != 2 {
		t.Fatalf("InService with %d replicas (%v), want the 2 provisioned", n, running(h.rt, runtime.StateHealthy))
	}
	if err := h.invoke("pc"); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, h.url, "capstan_endpoint_cold_start_seconds", "pc"); got != 0 {
		t.Fatalf("%v cold starts with provisioned replicas, want 0", got)
	}
	if err := dev.Advance(10 * time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few resyncs
	if n := len(running(h.rt, runtime.StateHealthy)); n != 2 {
		t.Fatalf("%d replicas after idle, want the 2 provisioned", n)
	}
}
