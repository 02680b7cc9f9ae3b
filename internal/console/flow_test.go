package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/chromedp/chromedp"
)

// TestPlanToExpiry is the console's story end to end, as the SageMaker
// training-plan guide tells it: search offerings → buy a plan in the
// console → create an endpoint on it (through the API, as a script would) →
// see it InService with traffic on its chart → let the dev clock run past
// the plan's end → the console shows the expiry and the endpoint's error.
func TestPlanToExpiry(t *testing.T) {
	s := sharedServer(t)
	ctx := newBrowser(t, 1280, 800)
	bg := context.Background()
	planName, ep := name(t, "eval-week"), name(t, "eval-ep")

	// Search and buy in the browser.
	run(t, ctx, "search offerings",
		chromedp.Navigate(s.URL+"/console/plans/new"),
		searchForm{Type: "ml.p5.48xlarge", Count: "1", Duration: "24", Target: "endpoint"}.submit(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=offerings] tbody tr`)),
	)
	screenshot(t, ctx, "plans-offerings", false)
	run(t, ctx, "review",
		chromedp.Click(chromedp.CSS(`[data-testid=select-offering]`)),
		chromedp.WaitVisible(chromedp.CSS(`#plan-name`)),
		chromedp.SendKeys(chromedp.CSS(`#plan-name`), planName),
	)
	run(t, ctx, "buy",
		chromedp.Click(chromedp.CSS(`[data-testid=buy]`)),
		waitText("main h1", planName),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=plan-status]`)),
	)
	plan, err := s.SM.DescribeTrainingPlan(bg, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String(planName)})
	if err != nil {
		t.Fatalf("the plan bought in the console: %v", err)
	}
	// Move to the plan's start: the endpoint runs only on it.
	if wait := plan.StartTime.Sub(serverNow(t, s)); wait > 0 {
		s.advanceClock(t, wait+time.Second, "")
	}
	run(t, ctx, "the plan is active", waitText(`[data-testid=plan-status]`, "Active"))

	// An endpoint on the plan, through the API.
	s.createEndpoint(t, ep, onPlan(plan.TrainingPlanArn))
	waitEndpoint(t, s, ep, func(o *sm.DescribeEndpointOutput) bool { return o.EndpointStatus == smtypes.EndpointStatusInService })
	for i := range 12 {
		if _, err := s.SMR.InvokeEndpoint(bg, &smr.InvokeEndpointInput{EndpointName: aws.String(ep), ContentType: aws.String("application/json"),
			Body: []byte(fmt.Sprintf(`{"inputs":"request %d","parameters":{"max_new_tokens":8}}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "the endpoint page shows it InService with traffic",
		chromedp.Navigate(s.URL+"/console/endpoints/"+ep),
		waitText("main", "InService"),
		poll(`Number(document.querySelector('[data-testid=chart-requests]')?.getAttribute('data-points')) > 0`),
	)
	screenshot(t, ctx, "endpoint-traffic", true)
	run(t, ctx, "the plan page lists the endpoint",
		chromedp.Navigate(s.URL+"/console/plans/"+planName),
		waitText("main", ep),
	)
	screenshot(t, ctx, "plan-in-use", false)

	// Past the plan's end.
	s.advanceClock(t, plan.EndTime.Sub(serverNow(t, s))+time.Minute, "")
	run(t, ctx, "the plan page shows the expiry",
		waitText(`[data-testid=plan-status]`, "Expired"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=plan-expired]`)),
	)
	screenshot(t, ctx, "plan-expired", true)
	run(t, ctx, "the endpoint page shows its error",
		chromedp.Navigate(s.URL+"/console/endpoints/"+ep),
		waitText(`[data-testid=endpoint-failure]`, "ended at"),
	)
	screenshot(t, ctx, "endpoint-plan-expired", true)
	d, err := s.SM.DescribeEndpoint(bg, &sm.DescribeEndpointInput{EndpointName: aws.String(ep)})
	if err != nil {
		t.Fatal(err)
	}
	if d.FailureReason == nil || !strings.Contains(*d.FailureReason, "ended at") {
		t.Fatalf("DescribeEndpoint after the plan's end: status %s, reason %v", d.EndpointStatus, aws.ToString(d.FailureReason))
	}
}
