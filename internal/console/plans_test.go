package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/chromedp/chromedp"
)

// The training-plan pages: the list, the purchase flow (search → offerings →
// review → buy) and a plan's page, driven in the browser against the real
// server while the test scripts the SageMaker API alongside, as a user would.

// setField sets an input's or select's value as typing would, so that the
// page's state follows (Preact listens to input and change events).
func setField(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		ok, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
			const e = document.querySelector(%q);
			if (!e) return false;
			e.value = %q;
			e.dispatchEvent(new Event('input', {bubbles: true}));
			e.dispatchEvent(new Event('change', {bubbles: true}));
			return true;
		})()`, sel, value))(ctx, tg)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no element %s", sel)
		}
		return nil
	})
}

// scrollTo scrolls the element sel into view (block: start, center, end).
func scrollTo(sel, block string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`document.querySelector(%q).scrollIntoView({block: %q, behavior: 'instant'})`, sel, block))
}

// utcInput is a time as the date-time inputs hold it (UTC wall time).
func utcInput(t time.Time) string { return t.UTC().Format("2006-01-02T15:04") }

// searchForm fills the purchase page's search form and submits it.
type searchForm struct {
	Type, Count, Duration, Target string
	Start, End                    time.Time
}

func (f searchForm) submit() chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS(`#plan-count`))}
	if f.Type != "" {
		steps = append(steps, setField(`#plan-type`, f.Type))
	}
	if f.Count != "" {
		steps = append(steps, setField(`#plan-count`, f.Count))
	}
	if f.Duration != "" {
		steps = append(steps, setField(`#plan-duration`, f.Duration))
	}
	if f.Target != "" {
		steps = append(steps, setField(`#plan-target`, f.Target))
	}
	if !f.Start.IsZero() {
		steps = append(steps, setField(`#plan-start`, utcInput(f.Start)))
	}
	if !f.End.IsZero() {
		steps = append(steps, setField(`#plan-end`, utcInput(f.End)))
	}
	steps = append(steps, chromedp.Click(chromedp.CSS(`[data-testid=search-offerings]`)))
	return chromedp.Steps(steps...)
}

func listPlanNames(t testing.TB, s *server) []string {
	t.Helper()
	var names []string
	p := sm.NewListTrainingPlansPaginator(s.SM, &sm.ListTrainingPlansInput{MaxResults: aws.Int32(100)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, pl := range out.TrainingPlanSummaries {
			names = append(names, aws.ToString(pl.TrainingPlanName))
		}
	}
	return names
}

// buyPlan buys the first offering of a search through the SDK.
func buyPlan(t testing.TB, s *server, name string, count int32, hours int64, after time.Time) {
	t.Helper()
	ctx := context.Background()
	out, err := s.SM.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
		InstanceType: types.ReservedCapacityInstanceTypeMlP548xlarge, InstanceCount: aws.Int32(count),
		DurationHours: aws.Int64(hours), StartTimeAfter: aws.Time(after),
		TargetResources: []types.SageMakerResourceName{types.SageMakerResourceNameEndpoint}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.TrainingPlanOfferings) == 0 {
		t.Fatalf("no offering for %s", name)
	}
	if _, err := s.SM.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name),
		TrainingPlanOfferingId: out.TrainingPlanOfferings[0].TrainingPlanOfferingId}); err != nil {
		t.Fatal(err)
	}
}

// TestPlansPurchase buys a plan in the browser: the list (empty), search,
// offerings, select, review, buy, the plan's page. (A server of its own: it
// starts at a fresh server's empty list.)
func TestPlansPurchase(t *testing.T) {
	s := startServer(t, "")
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open the plans list",
		chromedp.Navigate(s.URL+"/console/plans"),
		waitText("main h1", "Training plans"),
		waitText("main", "No training plans yet"),
		chromedp.Click(chromedp.CSS(`[data-testid=buy-plan]`)),
		waitText("main h1", "Buy a training plan"),
	)
	now := serverNow(t, s)
	run(t, ctx, "search offerings",
		searchForm{Type: "ml.p5.48xlarge", Count: "2", Duration: "168", Target: "endpoint",
			Start: now.Add(time.Hour), End: now.Add(30 * 24 * time.Hour)}.submit(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=offerings] tbody tr`)),
	)
	// 2 × ml.p5.48xlarge × 168 h at the catalog's 113.068/h.
	run(t, ctx, "the offerings", waitText(`[data-testid=offerings]`, "$37,990.85"),
		waitText(`[data-testid=offerings]`, "us-east-1a"), waitText(`[data-testid=offerings]`, "168 h"))
	if n := count(t, ctx, `[data-testid=offerings] tbody tr`); n < 2 {
		t.Fatalf("%d offerings, want several (3 start times per zone)", n)
	}
	run(t, ctx, "scroll to the offerings", scrollTo(`[data-testid=offerings]`, "center"))
	screenshot(t, ctx, "plans-search", true)
	run(t, ctx, "select the first offering and review it",
		chromedp.Click(chromedp.CSS(`[data-testid=select-offering]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=review]`)),
		waitText(`[data-testid=review]`, "ml.p5.48xlarge"),
		waitText(`[data-testid=review-fee]`, "$37,990.85 USD"),
		waitText(`[data-testid=review]`, "endpoint"),
		chromedp.SendKeys(chromedp.CSS(`#plan-name`), "console-plan"),
	)
	run(t, ctx, "scroll to the review", scrollTo(`[data-testid=review]`, "center"))
	screenshot(t, ctx, "plans-review", true)
	run(t, ctx, "buy",
		chromedp.Click(chromedp.CSS(`[data-testid=buy]`)),
		waitText("main h1", "console-plan"),
		waitText(`[data-testid=plan-status]`, "Scheduled"),
		waitText(`[data-testid=plan-fee]`, "$37,990.85"),
		waitText(`[data-testid=plan-capacity]`, "2 × ml.p5.48xlarge"),
		waitText(`[data-testid=plan-time-left]`, "Starts in"),
	)
	d, err := s.SM.DescribeTrainingPlan(context.Background(), &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("console-plan")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(d.TotalInstanceCount) != 2 || aws.ToString(d.UpfrontFee) != "37990.85" {
		t.Fatalf("the plan bought: %d instances, fee %s", aws.ToInt32(d.TotalInstanceCount), aws.ToString(d.UpfrontFee))
	}
	run(t, ctx, "the list shows it",
		chromedp.Click(chromedp.CSS(`main a[href="/console/plans"]`)),
		waitText(`[data-testid=plans]`, "console-plan"),
		waitText(`[data-testid=plans]`, "Scheduled"),
		waitText(`[data-testid=plans]`, "2 × ml.p5.48xlarge"),
		waitText(`[data-testid=plans]`, "$37,990.85"),
	)
}

// TestPlansBadInput: the server's validation errors show next to the field
// they name, and nothing is bought.
func TestPlansBadInput(t *testing.T) {
	s := sharedServer(t)
	taken := name(t, "taken")
	before := listPlanNames(t, s)
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open the purchase page", chromedp.Navigate(s.URL+"/console/plans/new"), waitText("main h1", "Buy a training plan"))
	now := serverNow(t, s)
	cases := []struct {
		what  string
		form  searchForm
		field string
		want  string
	}{
		{"count 0", searchForm{Count: "0"}, "plan-count", "ValidationException: InstanceCount must be at least 1."},
		{"count 100000", searchForm{Count: "100000"}, "plan-count", "Value '100000' at 'instanceCount' failed to satisfy constraint: Member must have value less than or equal to 256"},
		{"end before start", searchForm{Count: "1", Start: now.Add(48 * time.Hour), End: now.Add(24 * time.Hour)}, "plan-end", "must be before EndTimeBefore"},
		{"duration 0", searchForm{Count: "1", Start: now.Add(time.Hour), End: now.Add(30 * 24 * time.Hour), Duration: "0"}, "plan-duration", "at 'durationHours' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"a window in the past", searchForm{Count: "1", Duration: "24", Start: now.Add(-72 * time.Hour), End: now.Add(-24 * time.Hour)}, "plan-end", "is in the past; it must be after the current time"},
	}
	for _, c := range cases {
		run(t, ctx, c.what, c.form.submit(), waitText(`[data-testid=error-`+c.field+`]`, c.want))
		// Only that field is marked, and no offerings are shown.
		n := get(t, ctx, c.what+": errors shown", chromedp.Evaluate[int](`document.querySelectorAll('.field-error').length`))
		if n != 1 {
			t.Fatalf("%s: %d field errors shown, want 1", c.what, n)
		}
		if get(t, ctx, c.what+": offerings", chromedp.Evaluate[bool](`!!document.querySelector('[data-testid=offerings]')`)) {
			t.Fatalf("%s: offerings shown after an error", c.what)
		}
	}
	screenshot(t, ctx, "plans-bad-input", false)
	// A start in the past is not an error to the server (offerings start no
	// earlier than its now); the page says so next to the field, and the
	// offerings start at the server's now.
	run(t, ctx, "a start in the past",
		searchForm{Count: "1", Duration: "24", Start: now.Add(-72 * time.Hour), End: now.Add(30 * 24 * time.Hour)}.submit(),
		waitText(`#plan-start-hint`, "This is in the past: offerings start no earlier than the server's time"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=offerings] tbody tr`)),
	)
	first := get(t, ctx, "first offering's start", chromedp.Evaluate[string](`document.querySelector('[data-testid=offerings] tbody td').innerText`))
	if first < now.UTC().Format("2006-01-02 15:04") {
		t.Fatalf("first offering starts %s, before the server's now %s", first, now)
	}
	// A bad plan name and a taken one: the server's errors next to the name.
	buyPlan(t, s, taken, 1, 24, now.Add(time.Hour))
	// A fresh page: rows left from the search above would satisfy the
	// wait below and then be replaced under the click.
	run(t, ctx, "search again",
		chromedp.Navigate(s.URL+"/console/plans/new"),
		searchForm{Count: "1", Duration: "24", Start: now.Add(time.Hour), End: now.Add(30 * 24 * time.Hour)}.submit(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=offerings] tbody tr`)),
		chromedp.Click(chromedp.CSS(`[data-testid=select-offering]`)),
		chromedp.WaitVisible(chromedp.CSS(`#plan-name`)),
		chromedp.SendKeys(chromedp.CSS(`#plan-name`), "bad name!"),
		chromedp.Click(chromedp.CSS(`[data-testid=buy]`)),
		waitText(`[data-testid=error-plan-name]`, "at 'trainingPlanName' failed to satisfy constraint: Member must satisfy regular expression pattern"),
		setField(`#plan-name`, strings.ToUpper(taken)),
		chromedp.Click(chromedp.CSS(`[data-testid=buy]`)),
		waitText(`[data-testid=error-plan-name]`, "ResourceInUse: Training plan "+strings.ToUpper(taken)+" already exists. Choose a different name."),
	)
	if got := newNames(before, listPlanNames(t, s)); len(got) != 1 || got[0] != taken {
		t.Fatalf("plans new after bad input: %v, want only the one bought through the API", got)
	}
	if h := get(t, ctx, "still on the page", chromedp.Evaluate[string](`document.querySelector('main h1').innerText`)); h != "Buy a training plan" {
		t.Fatalf("page %q after a refused purchase", h)
	}
}

// TestPlansDoubleBuy: two clicks on Buy in a row buy one plan.
func TestPlansDoubleBuy(t *testing.T) {
	s := sharedServer(t)
	double := name(t, "double")
	before := listPlanNames(t, s)
	ctx := newBrowser(t, 1280, 800)
	now := serverNow(t, s)
	run(t, ctx, "search and select",
		chromedp.Navigate(s.URL+"/console/plans/new"),
		searchForm{Count: "1", Duration: "24", Start: now.Add(time.Hour), End: now.Add(10 * 24 * time.Hour)}.submit(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=offerings] tbody tr`)),
		chromedp.Click(chromedp.CSS(`[data-testid=select-offering]`)),
		chromedp.SendKeys(chromedp.CSS(`#plan-name`), double),
	)
	// Both clicks land before the first call answers (one task, no render
	// in between), then a third after a short delay, as a user's would.
	run(t, ctx, "double click buy",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const orig = window.fetch;
			window.__creates = 0;
			window.fetch = (url, init) => {
				if (init && init.headers && JSON.stringify(init.headers).includes('CreateTrainingPlan')) window.__creates++;
				return orig(url, init);
			};
			const b = document.querySelector('[data-testid=buy]');
			b.click(); b.click();
			setTimeout(() => b.click(), 5);
		})()`),
		waitText("main h1", double),
		waitText(`[data-testid=plan-status]`, "Scheduled"),
	)
	time.Sleep(500 * time.Millisecond)
	// One call: the plan's name would refuse a second one anyway, so count
	// the calls the page made, not only the plans.
	if n := get(t, ctx, "CreateTrainingPlan calls", chromedp.Evaluate[int](`window.__creates`)); n != 1 {
		t.Fatalf("%d CreateTrainingPlan calls after a double click, want 1", n)
	}
	if got := newNames(before, listPlanNames(t, s)); len(got) != 1 {
		t.Fatalf("plans new after a double click: %v, want one", got)
	}
	if h := get(t, ctx, "no error", chromedp.Evaluate[string](`document.body.innerText`)); strings.Contains(h, "already exists") || strings.Contains(h, "ValidationException") {
		t.Fatalf("an error after a double click:\n%s", h)
	}
}

// TestPlanLifecycle: a plan's page follows the server's clock — Scheduled,
// then Active and about to expire, then Expired with the endpoint on it
// flagged — refreshing itself; the list flags it too.
func TestPlanLifecycle(t *testing.T) {
	s := sharedServer(t)
	life, onPlanEp, onDemandEp := name(t, "life"), name(t, "on-plan"), name(t, "on-demand")
	ctx := newBrowser(t, 1280, 800)
	now := serverNow(t, s)
	buyPlan(t, s, life, 1, 24, now.Add(2*time.Hour))
	// An endpoint on the plan, as docs/reservations.md sets one up.
	s.createEndpoint(t, onPlanEp, onPlan(aws.String("arn:aws:sagemaker:us-east-1:000000000000:training-plan/"+life)))
	// An endpoint on no plan is not listed.
	s.createEndpoint(t, onDemandEp, types.ProductionVariant{VariantName: aws.String("AllTraffic"),
		InitialInstanceCount: aws.Int32(1), InstanceType: types.ProductionVariantInstanceTypeMlG52xlarge})
	run(t, ctx, "the scheduled plan",
		chromedp.Navigate(s.URL+"/console/plans/"+life),
		waitText("main h1", life),
		waitText(`[data-testid=plan-status]`, "Scheduled"),
		waitText(`[data-testid=plan-time-left]`, "Starts in 1h"),
		waitText(`[data-testid=plan-endpoints]`, onPlanEp),
		waitText(`[data-testid=plan-endpoints]`, "Creating"),
	)
	if n := count(t, ctx, `[data-testid=plan-endpoints] tbody tr`); n != 1 {
		t.Fatalf("%d endpoints on the plan, want 1 (%s)", n, onPlanEp)
	}
	s.advanceClock(t, 3*time.Hour, "")
	run(t, ctx, "active, expiring within a day",
		waitText(`[data-testid=plan-status]`, "Active"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=plan-expiring]`)),
		waitText(`[data-testid=plan-expiring]`, "This plan expires in 22h 5"),
		waitText(`[data-testid=plan-in-use]`, "1"),
		waitText(`[data-testid=plan-available]`, "0"),
		waitText(`[data-testid=plan-endpoints] a[href="/console/endpoints/`+onPlanEp+`"]`, onPlanEp),
	)
	screenshot(t, ctx, "plan-detail", false)
	run(t, ctx, "the list flags it",
		chromedp.Click(chromedp.CSS(`main a[href="/console/plans"]`)),
		waitRow(`[data-testid=plans]`, life, `.flag.warn`, "expires in 22h 5"),
		chromedp.Click(chromedp.CSS(`[data-testid=plans] a[href="/console/plans/`+life+`"]`)),
		waitText(`[data-testid=plan-status]`, "Active"),
	)
	s.advanceClock(t, 24*time.Hour, "")
	run(t, ctx, "expired",
		waitText(`[data-testid=plan-status]`, "Expired"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=plan-expired]`)),
		waitText(`[data-testid=plan-time-left]`, "Expired"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=plan-endpoint-expired]`)),
		waitText(`[data-testid=plan-endpoints]`, "Failed"),
	)
	if get(t, ctx, "no expiring flag", chromedp.Evaluate[bool](`!!document.querySelector('[data-testid=plan-expiring]')`)) {
		t.Fatal("an expired plan is flagged as expiring")
	}
	run(t, ctx, "the list shows it expired",
		chromedp.Click(chromedp.CSS(`main a[href="/console/plans"]`)),
		waitRow(`[data-testid=plans]`, life, "", "Expired"),
	)
	if rowHas(t, ctx, `[data-testid=plans]`, life, `.flag.warn`) {
		t.Fatal("an expired plan is flagged as expiring in the list")
	}
}

// TestPlansListFifty: the list shows 50 plans from one ListTrainingPlans
// call. (A server of its own: the list must hold exactly its 50 plans.)
func TestPlansListFifty(t *testing.T) {
	s := startServer(t, "")
	now := serverNow(t, s)
	for i := 0; i < 50; i++ {
		buyPlan(t, s, fmt.Sprintf("plan-%02d", i), 1, 24, now.Add(time.Duration(i)*48*time.Hour+time.Hour))
	}
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open the purchase page", chromedp.Navigate(s.URL+"/console/plans/new"), waitText("main h1", "Buy a training plan"))
	// Count the page's ListTrainingPlans calls until it shows all 50 rows.
	// (How fast: BenchmarkPageLoad.)
	run(t, ctx, "go to the list", js(`(() => {
		const orig = window.fetch;
		window.__listCalls = 0;
		window.fetch = (url, init) => {
			if (init && init.headers && JSON.stringify(init.headers).includes('ListTrainingPlans')) window.__listCalls++;
			return orig(url, init);
		};
		document.querySelector('header nav a[href="/console/plans"]').click();
		return true;
	})()`), poll(`document.querySelectorAll('[data-testid=plans] tbody tr').length === 50`))
	if calls := get(t, ctx, "calls", chromedp.Evaluate[int](`window.__listCalls`)); calls != 1 {
		t.Fatalf("%d ListTrainingPlans calls for 50 plans, want 1", calls)
	}
}

// TestPlansPhone: at a phone's width the pages fit (no sideways scrolling)
// and the purchase flow works.
func TestPlansPhone(t *testing.T) {
	s := sharedServer(t)
	plan, bought := name(t, "phone-plan"), name(t, "from-a-phone")
	now := serverNow(t, s)
	buyPlan(t, s, plan, 1, 24, now.Add(time.Hour))
	ctx := newBrowser(t, 390, 844)
	// Chromium's windows are at least 500 px wide: emulate the phone's viewport.
	run(t, ctx, "a phone's viewport", chromedp.EmulateViewport(390, 844))
	fits := func(what string) {
		t.Helper()
		w := get(t, ctx, what+": width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		if w > 390 {
			wide := get(t, ctx, what+": wide elements", chromedp.Evaluate[string](`[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 392).slice(0, 8).map(e => e.tagName + '.' + e.className + '[' + Math.round(e.getBoundingClientRect().right) + ']: ' + (e.innerText || '').slice(0, 40)).join('\\n')`))
			t.Fatalf("%s is %d px wide at a 390 px viewport; wider than it:\n%s", what, w, wide)
		}
	}
	run(t, ctx, "the list", chromedp.Navigate(s.URL+"/console/plans"), waitText(`[data-testid=plans]`, plan))
	fits("the list")
	run(t, ctx, "search",
		chromedp.Navigate(s.URL+"/console/plans/new"),
		searchForm{Count: "1", Duration: "24"}.submit(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=offerings] tbody tr`)),
		chromedp.Click(chromedp.CSS(`[data-testid=select-offering]`)),
		chromedp.WaitVisible(chromedp.CSS(`#plan-name`)),
	)
	fits("the purchase page")
	run(t, ctx, "buy",
		chromedp.SendKeys(chromedp.CSS(`#plan-name`), bought),
		chromedp.Click(chromedp.CSS(`[data-testid=buy]`)),
		waitText("main h1", bought),
		waitText(`[data-testid=plan-capacity]`, "1 × ml.p5.48xlarge"),
	)
	fits("the plan's page")
	screenshot(t, ctx, "plan-detail-phone", false)
}
