package console_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/chromedp/chromedp"
)

// seedScale creates what the page-load bar is stated for through the
// SageMaker API: endpoints serverless endpoints (InService at zero replicas,
// so no engine processes) PREFIX-ep-000, … and plans training plans
// PREFIX-plan-00, … of one instance each in consecutive weeks.
func seedScale(t testing.TB, s *server, prefix string, endpoints, plans int) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.SM.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(prefix + "-model"),
		ExecutionRoleArn: aws.String("arn:aws:iam::000000000000:role/capstan"),
		PrimaryContainer: &types.ContainerDefinition{Image: aws.String("capstan/sim"),
			Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.2-1B-Instruct"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SM.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(prefix + "-cfg"),
		ProductionVariants: []types.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(prefix + "-model"),
			ServerlessConfig: &types.ProductionVariantServerlessConfig{MemorySizeInMB: aws.Int32(2048), MaxConcurrency: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	for i := range endpoints {
		if _, err := s.SM.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(fmt.Sprintf("%s-ep-%03d", prefix, i)),
			EndpointConfigName: aws.String(prefix + "-cfg")}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	for i := range plans {
		from := start.Add(time.Duration(i) * 7 * 24 * time.Hour)
		out, err := s.SM.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
			TargetResources: []types.SageMakerResourceName{types.SageMakerResourceNameEndpoint},
			InstanceType:    types.ReservedCapacityInstanceType("ml.p5.48xlarge"), InstanceCount: aws.Int32(1),
			DurationHours: aws.Int64(24), StartTimeAfter: aws.Time(from), EndTimeBefore: aws.Time(from.Add(7 * 24 * time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.TrainingPlanOfferings) == 0 {
			t.Fatalf("no offering for plan %d", i)
		}
		if _, err := s.SM.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(fmt.Sprintf("%s-plan-%02d", prefix, i)),
			TrainingPlanOfferingId: out.TrainingPlanOfferings[0].TrainingPlanOfferingId}); err != nil {
			t.Fatal(err)
		}
	}
}

// consolePage is a page of the console and the script that is true once it
// shows its data (not just its frame).
type consolePage struct {
	name, path, ready string
}

// loadTime opens p in a fresh navigation and returns the time from the
// navigation's start to the first animation frame in which p.ready holds,
// as the page itself measures it (performance.now()).
func loadTime(t testing.TB, ctx context.Context, base string, p consolePage) time.Duration {
	t.Helper()
	run(t, ctx, "open "+p.path, chromedp.Navigate(base+p.path))
	ms := get(t, ctx, "wait for "+p.name, chromedp.Evaluate[float64](`new Promise((resolve, reject) => {
		const deadline = performance.now() + 20000;
		const tick = () => {
			let ok = false;
			try { ok = !!(`+p.ready+`); } catch (e) {}
			if (ok) return resolve(performance.now());
			if (performance.now() > deadline) return reject(new Error("not ready: `+p.name+`"));
			requestAnimationFrame(tick);
		};
		tick();
	})`, chromedp.EvalAwaitPromise))
	return time.Duration(ms * float64(time.Millisecond))
}

// BenchmarkPageLoad is the console's page-load bar: every page loads in
// ≤ 300 ms with 200 endpoints and 50 training plans. Each iteration loads
// every page once; it reports each page's median and worst load time.
//
//	go test ./internal/console -run '^$' -bench PageLoad -benchtime 5x
func BenchmarkPageLoad(b *testing.B) {
	s := startServer(b, "")
	seedScale(b, s, "scale", 200, 50)
	ctx := newBrowser(b, 1280, 800)
	rows := func(testid string, n int) string {
		return fmt.Sprintf(`document.querySelectorAll('[data-testid=%q] tbody tr').length >= %d`, testid, n)
	}
	pages := []consolePage{
		{"endpoints", "/console/endpoints", rows("endpoints", 200)},
		// The same list once every row's variants, instances and plan have
		// filled in (one DescribeEndpoint per endpoint, after the rows show).
		{"endpoints-described", "/console/endpoints", rows("endpoints", 200) + ` && !document.querySelector('[data-testid=endpoints]').innerText.includes('…')`},
		{"endpoint", "/console/endpoints/scale-ep-123", `document.querySelector('main h1') && document.querySelector('main h1').innerText.includes('scale-ep-123') && document.body.innerText.includes('InService')`},
		{"plans", "/console/plans", rows("plans", 50)},
		{"plan", "/console/plans/scale-plan-25", `document.querySelector('[data-testid=plan-status]') != null && !document.querySelector('main').innerText.includes('Loading')`},
		{"buy-plan", "/console/plans/new", `document.querySelector('main form select, main form input') != null`},
		{"clusters", "/console/clusters", rows("clusters", 1)},
		{"cluster", "/console/clusters/ml-cluster", rows("nodes", 1)},
		{"deployments", "/console/deployments", `document.querySelector('main h1') && document.querySelector('main h1').innerText.includes('Deployments') && !document.querySelector('main').innerText.includes('Loading')`},
		{"apply", "/console/apply", `document.querySelector('main textarea') != null`},
	}
	times := make([][]time.Duration, len(pages))
	for b.Loop() {
		for i, p := range pages {
			times[i] = append(times[i], loadTime(b, ctx, s.URL, p))
		}
	}
	for i, p := range pages {
		ts := times[i]
		sort.Slice(ts, func(a, c int) bool { return ts[a] < ts[c] })
		b.ReportMetric(float64(ts[len(ts)/2].Microseconds())/1000, p.name+"-ms")
		b.ReportMetric(float64(ts[len(ts)-1].Microseconds())/1000, p.name+"-max-ms")
	}
}
