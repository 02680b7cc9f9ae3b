package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/chromedp/chromedp"
)

// createEndpoint makes a model, a configuration and an endpoint of one
// ml.g5.2xlarge variant "AllTraffic" through the SageMaker API, as a user's
// script next to the console would, and waits until it is InService when
// wait is set.
func createEndpoint(t *testing.T, s *server, name string, wait bool) {
	t.Helper()
	s.createEndpoint(t, name, smtypes.ProductionVariant{VariantName: aws.String("AllTraffic"),
		InstanceType: smtypes.ProductionVariantInstanceType("ml.g5.2xlarge"), InitialInstanceCount: aws.Int32(1)})
	if wait {
		waitEndpoint(t, s, name, func(o *sm.DescribeEndpointOutput) bool { return o.EndpointStatus == smtypes.EndpointStatusInService })
	}
}

// waitEndpoint polls DescribeEndpoint until ok says so (a minute at most).
func waitEndpoint(t *testing.T, s *server, name string, ok func(*sm.DescribeEndpointOutput) bool) *sm.DescribeEndpointOutput {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last *sm.DescribeEndpointOutput
	for time.Now().Before(deadline) {
		out, err := s.SM.DescribeEndpoint(context.Background(), &sm.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			t.Fatalf("DescribeEndpoint %s: %v", name, err)
		}
		if ok(out) {
			return out
		}
		if out.EndpointStatus == smtypes.EndpointStatusFailed {
			t.Fatalf("endpoint %s failed: %s", name, aws.ToString(out.FailureReason))
		}
		last = out
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("endpoint %s: never got there (last status %s)", name, last.EndpointStatus)
	return nil
}

// invoke calls InvokeEndpoint once.
func invoke(t *testing.T, s *server, name string) {
	t.Helper()
	out, err := s.SMR.InvokeEndpoint(context.Background(), &smr.InvokeEndpointInput{EndpointName: aws.String(name),
		ContentType: aws.String("application/json"), Body: []byte(`{"inputs":"hi","parameters":{"max_new_tokens":8}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Body) == 0 {
		t.Fatal("empty invocation answer")
	}
}

// stream sends one streamed chat completion through the OpenAI door.
func stream(t *testing.T, s *server, name string) {
	t.Helper()
	res, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"`+name+`","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d %s", res.StatusCode, b)
	}
}

// typeInto replaces an input's value by typing, as a user selecting the
// field's text and typing over it.
func typeInto(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); e.select(); return true; })()`, sel))(ctx, tg)
			return err
		}),
		chromedp.KeyEvent(text),
	)
}

// js runs a JavaScript expression for its effect.
func js(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](expr)(ctx, tg)
		return err
	})
}

// poll waits until the JavaScript expression is true.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(25*time.Second))(ctx, tg)
		return err
	})
}

// countCalls makes the page count the API calls it sends to target
// (an X-Amz-Target such as SageMaker.UpdateEndpointWeightsAndCapacities) in
// window.__calls[target].
const countCalls = `(() => {
  if (window.__calls) return true;
  window.__calls = {};
  const orig = window.fetch;
  window.fetch = function (input, init) {
    const h = (init && init.headers) || (input && input.headers) || {};
    const t = h instanceof Headers ? h.get('X-Amz-Target') : h['X-Amz-Target'];
    if (t) window.__calls[t] = (window.__calls[t] || 0) + 1;
    return orig.apply(this, arguments);
  };
  return true;
})()`

// TestEndpointsPages: an endpoint made through the SDK and invoked a few
// times is in the list and on its page with its status, variants and live
// charts; its capacity changes through the form (a bad value shows the
// server's error next to the field, a double click submits once); it is
// deleted after a confirmation step.
func TestEndpointsPages(t *testing.T) {
	s := sharedServer(t)
	name := name(t, "console-ep")
	createEndpoint(t, s, name, true)
	// Traffic spread over ten minutes of the server's clock: InvokeEndpoint
	// calls, and OpenAI streams (their time to first token).
	invocations := 0
	for round := range 5 {
		if round > 0 {
			s.advanceClock(t, 2*time.Minute, "")
		}
		for range 1 + round%3 {
			invoke(t, s, name)
			invocations++
		}
		stream(t, s, name)
	}
	time.Sleep(1100 * time.Millisecond) // a gauge sample after the last request
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "the list shows the endpoint",
		chromedp.Navigate(s.URL+"/console/endpoints"),
		waitText("main h1", "Endpoints"),
		chromedp.WaitVisible(chromedp.CSS(`table[data-testid=endpoints]`)),
		waitText(`table[data-testid=endpoints]`, name),
		waitRow(`table[data-testid=endpoints]`, name, "", "InService"),
	)
	screenshot(t, ctx, "endpoints-list", false)

	run(t, ctx, "open the endpoint's page from its link",
		chromedp.Click(chromedp.CSS(`table[data-testid=endpoints] a[href="/console/endpoints/`+name+`"]`)),
		waitText("main h1", name),
		waitText(`[data-testid=endpoint-status]`, "InService"),
		waitText(`table[data-testid=endpoint-variants]`, "ml.g5.2xlarge"),
		waitText(`table[data-testid=endpoint-config]`, name+"-model"),
		waitText(`[data-testid=endpoint-history]`, "Created."),
		// The four invocations are in the window, and the charts have points.
		poll(`Number(document.querySelector('[data-testid=endpoint-metrics-summary]')?.dataset.requests) >= `+fmt.Sprint(invocations)),
		poll(`Number(document.querySelector('[data-testid=chart-requests]')?.dataset.points) > 0`),
		poll(`Number(document.querySelector('[data-testid=chart-latency]')?.dataset.points) > 0`),
		poll(`Number(document.querySelector('[data-testid=chart-replicas]')?.dataset.points) > 0`),
		poll(`Number(document.querySelector('[data-testid=chart-ttft]')?.dataset.points) > 0`),
	)
	if got := get(t, ctx, "no failure flag", chromedp.Evaluate[bool](`!!document.querySelector('[data-testid=endpoint-failure]')`)); got {
		t.Fatal("a failure flag on an endpoint InService")
	}
	run(t, ctx, "scroll to the charts", js(`(() => { document.querySelector('#endpoint-metrics-h').scrollIntoView({block: 'start'}); return true; })()`))
	screenshot(t, ctx, "endpoint-detail", false)

	// A bad count: the server's validation error, next to the field.
	const count = `#update-AllTraffic-count`
	run(t, ctx, "a negative instance count",
		typeInto(count, "-3"),
		chromedp.Click(chromedp.CSS(`form[data-testid=update-AllTraffic] button[type=submit]`)),
		waitText(`[data-testid=error-update-AllTraffic-count]`, "ValidationException"),
		waitText(`[data-testid=error-update-AllTraffic-count]`, "desiredInstanceCount"),
	)
	if d := waitEndpoint(t, s, name, func(*sm.DescribeEndpointOutput) bool { return true }); aws.ToInt32(d.ProductionVariants[0].DesiredInstanceCount) != 1 {
		t.Fatalf("a refused update changed the count to %d", aws.ToInt32(d.ProductionVariants[0].DesiredInstanceCount))
	}

	// Count 2 with a double click: one call, and the API shows the change.
	run(t, ctx, "update the capacity to 2 with a double click",
		js(countCalls),
		js(`window.__sameDocument = true`),
		typeInto(count, "2"),
		// Two clicks in one task: the second comes before the first's answer.
		js(`(() => { const b = document.querySelector('form[data-testid=update-AllTraffic] button[type=submit]'); b.click(); b.click(); return true; })()`),
		waitText(`[data-testid=update-done-AllTraffic]`, "Update accepted"),
	)
	waitEndpoint(t, s, name, func(o *sm.DescribeEndpointOutput) bool {
		v := o.ProductionVariants[0]
		return aws.ToInt32(v.DesiredInstanceCount) == 2 && aws.ToInt32(v.CurrentInstanceCount) == 2 && o.EndpointStatus == smtypes.EndpointStatusInService
	})
	if same := get(t, ctx, "still the same document", chromedp.Evaluate[bool](`window.__sameDocument === true`)); !same {
		t.Fatal("the double click reloaded the page (a form submitted by the browser)")
	}
	if n := get(t, ctx, "count the update calls", chromedp.Evaluate[int](`window.__calls['SageMaker.UpdateEndpointWeightsAndCapacities'] || 0`)); n != 1 {
		t.Fatalf("%d UpdateEndpointWeightsAndCapacities calls for a double click, want 1", n)
	}
	run(t, ctx, "the page shows 2 instances", waitText(`table[data-testid=endpoint-variants]`, "2 / 2"))

	// Delete: nothing happens until the name is typed and confirmed.
	run(t, ctx, "delete asks for the name",
		chromedp.Click(chromedp.CSS(`[data-testid=delete-endpoint]`)),
		chromedp.WaitVisible(chromedp.CSS(`#delete-confirm`)),
	)
	if disabled := get(t, ctx, "confirm is disabled", chromedp.Evaluate[bool](`document.querySelector('[data-testid=delete-confirm-button]').disabled`)); !disabled {
		t.Fatal("the delete button is enabled before the name is typed")
	}
	run(t, ctx, "type the name and delete",
		typeInto(`#delete-confirm`, name),
		chromedp.Click(chromedp.CSS(`[data-testid=delete-confirm-button]`)),
		waitText("main h1", "Endpoints"),
	)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.SM.DescribeEndpoint(context.Background(), &sm.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil && strings.Contains(err.Error(), "Could not find") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint is still there after delete: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run(t, ctx, "the list no longer shows it", poll(`!document.querySelector('table[data-testid=endpoints]') || !document.querySelector('table[data-testid=endpoints]').innerText.includes('`+name+`')`))
}

// TestEndpointOnExpiredPlan: an endpoint on a training plan links to the
// plan, a count beyond the plan's capacity is refused next to the field,
// and once the plan has expired the page flags the failure.
func TestEndpointOnExpiredPlan(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	name, plan := name(t, "plan-ep"), name(t, "console-plan")
	now := serverNow(t, s)
	offers, err := s.SM.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
		TargetResources: []smtypes.SageMakerResourceName{"endpoint"}, InstanceType: "ml.p5.48xlarge",
		InstanceCount: aws.Int32(1), DurationHours: aws.Int64(24), StartTimeAfter: aws.Time(now),
		EndTimeBefore: aws.Time(now.Add(30 * 24 * time.Hour))})
	if err != nil || len(offers.TrainingPlanOfferings) == 0 {
		t.Fatalf("search: %+v %v", offers, err)
	}
	bought, err := s.SM.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(plan),
		TrainingPlanOfferingId: offers.TrainingPlanOfferings[0].TrainingPlanOfferingId})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.SM.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String(plan)})
	if err != nil {
		t.Fatal(err)
	}
	if d := aws.ToTime(p.StartTime).Sub(serverNow(t, s)); d > 0 {
		s.advanceClock(t, d.Truncate(time.Second)+time.Minute, "")
	}
	s.createEndpoint(t, name, onPlan(bought.TrainingPlanArn))
	waitEndpoint(t, s, name, func(o *sm.DescribeEndpointOutput) bool { return o.EndpointStatus == smtypes.EndpointStatusInService })

	b := newBrowser(t, 1280, 800)
	run(t, b, "the endpoint's page links its plan",
		chromedp.Navigate(s.URL+"/console/endpoints/"+name),
		waitText(`[data-testid=endpoint-status]`, "InService"),
		chromedp.WaitVisible(chromedp.CSS(`table[data-testid=endpoint-variants] a[href="/console/plans/`+plan+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table[data-testid=endpoint-config] a[href="/console/plans/`+plan+`"]`)),
		waitText(`table[data-testid=endpoint-variants]`, "1 used here"),
	)
	// Two instances of a one-instance plan: the server's refusal, next to
	// the count.
	run(t, b, "a count beyond the plan",
		typeInto(`#update-AllTraffic-count`, "2"),
		chromedp.Click(chromedp.CSS(`form[data-testid=update-AllTraffic] button[type=submit]`)),
		waitText(`[data-testid=error-update-AllTraffic-count]`, "Exception"),
	)
	msg := get(t, b, "the error", chromedp.Text(chromedp.CSS(`[data-testid=error-update-AllTraffic-count]`)))
	t.Logf("count beyond the plan: %s", msg)
	if d := waitEndpoint(t, s, name, func(*sm.DescribeEndpointOutput) bool { return true }); aws.ToInt32(d.ProductionVariants[0].DesiredInstanceCount) != 1 {
		t.Fatal("a refused update changed the count")
	}

	// The plan ends: the endpoint fails, and its page says why.
	s.advanceClock(t, 25*time.Hour, "")
	d := waitEndpoint(t, s, name, func(o *sm.DescribeEndpointOutput) bool { return o.EndpointStatus == smtypes.EndpointStatusFailed })
	run(t, b, "the failure is flagged",
		waitText(`[data-testid=endpoint-status]`, "Failed"),
		waitText(`.flag.bad[data-testid=endpoint-failure]`, aws.ToString(d.FailureReason)),
		waitText(`[data-testid=endpoint-history]`, aws.ToString(d.FailureReason)),
	)
	run(t, b, "back to the top", js(`(() => { window.scrollTo(0, 0); document.activeElement.blur(); return true; })()`))
	screenshot(t, b, "endpoint-failed", true)

	// At a phone's width nothing is wider than the screen.
	run(t, b, "the page at 390 px",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(s.URL+"/console/endpoints/"+name),
		waitText(`[data-testid=endpoint-status]`, "Failed"),
		poll(`!!document.querySelector('[data-testid=chart-requests] canvas')`),
	)
	screenshot(t, b, "endpoint-phone", false)
	if w := get(t, b, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Fatalf("the page is %d px wide at a 390 px viewport", w)
	}
}

// TestEndpointsListIsCheap: with 200 endpoints the list shows every one
// after two ListEndpoints calls of 100; then each row's variants, instances
// and plan fill in from one DescribeEndpoint per endpoint, which the next poll
// of the unchanged list does not repeat. (How fast: BenchmarkPageLoad.)
//
// A server of its own: it counts the calls for exactly its 200 endpoints.
func TestEndpointsListIsCheap(t *testing.T) {
	s := startServer(t, "")
	ctx := context.Background()
	if _, err := s.SM.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("many-model"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"),
			Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}}); err != nil {
		t.Fatal(err)
	}
	// Serverless endpoints hold no replica until invoked.
	if _, err := s.SM.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("many-cfg"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("many-model"),
			ServerlessConfig: &smtypes.ProductionVariantServerlessConfig{MemorySizeInMB: aws.Int32(2048), MaxConcurrency: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if _, err := s.SM.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(fmt.Sprintf("many-%03d", i)),
			EndpointConfigName: aws.String("many-cfg")}); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, 1280, 800)
	rows := `document.querySelectorAll('table[data-testid=endpoints] tbody tr')`
	run(t, b, "open another page, count the calls, go to the list",
		chromedp.Navigate(s.URL+"/console/plans"),
		chromedp.WaitVisible(chromedp.CSS(`main h1`)),
		js(countCalls),
		js(`(() => { document.querySelector('header nav a[href="/console/endpoints"]').click(); return true; })()`),
		poll(rows+`.length === `+fmt.Sprint(n)),
		js(`(() => { window.__listed = {...window.__calls}; return true; })()`),
		// Then each row's variants, instances and plan fill in.
		poll(`![...`+rows+`].some(r => r.innerText.includes('…'))`),
	)
	calls := get(t, b, "calls", chromedp.Evaluate[map[string]int](`window.__listed`))
	if calls["SageMaker.ListEndpoints"] != 2 {
		t.Fatalf("calls when the list of %d endpoints showed: %v, want 2 ListEndpoints", n, calls)
	}
	row := get(t, b, "a row", chromedp.Evaluate[string](rows+`[0].innerText`))
	for _, want := range []string{"InService", "AllTraffic", "serverless", "on-demand"} {
		if !strings.Contains(row, want) {
			t.Fatalf("row %q lacks %q", row, want)
		}
	}
	// A poll of the unchanged list describes nothing again.
	run(t, b, "the next poll", poll(`window.__calls['SageMaker.ListEndpoints'] >= 4`))
	calls = get(t, b, "calls", chromedp.Evaluate[map[string]int](`window.__calls`))
	if calls["SageMaker.DescribeEndpoint"] != n {
		t.Fatalf("DescribeEndpoint calls after two polls: %d, want %d (each endpoint once)", calls["SageMaker.DescribeEndpoint"], n)
	}
	run(t, b, "the filter narrows the list",
		typeInto(`#endpoints-filter`, "many-19"),
		poll(`document.querySelectorAll('table[data-testid=endpoints] tbody tr').length === 10`),
	)
}
