package console_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// navPage is a section of the console: its label in the header's nav, where
// the link goes, the page's heading and a text only that page shows with the
// test's data.
type navPage struct {
	label, path, heading, text string
}

// navPages are the header's nav links, in order.
var navPages = []navPage{
	{"Endpoints", "/console/endpoints", "Endpoints", "scale-ep-000"},
	{"Training plans", "/console/plans", "Training plans", "scale-plan-00"},
	{"Clusters", "/console/clusters", "Clusters", "ml-cluster"},
	{"Deployments", "/console/deployments", "Deployments", "JumpStartModel"},
	{"Spaces", "/console/spaces", "Spaces", "No spaces yet."},
	{"Dashboards", "/console/dashboards", "Dashboards", "Requests, latency, TTFB and TTFT"},
	{"Apply manifest", "/console/apply", "Apply a manifest", "as capstan apply -f takes them"},
}

// TestFrontPage opens the URLs README.md and docs/console.md tell a user to
// open — the server's root, /console/ and /console — as a browser does, and
// each shows the endpoints page (heading, the endpoint, every nav label) at
// /console/endpoints with Endpoints marked current. From there a click on
// each nav link shows that page's heading and data and marks that link
// current, and the browser's Back returns through them, each page showing
// its text again. No script error goes uncaught.
//
// A server of its own: the Spaces page must show a fresh server's empty list.
func TestFrontPage(t *testing.T) {
	s := startServer(t, "")
	seedScale(t, s, "scale", 1, 1)
	s.apply(t, demoYAML, "")
	ctx := newBrowser(t, 1280, 800)
	uncaught := testutil.UncaughtErrors(t, ctx)

	for _, path := range []string{"/", "/console/", "/console"} {
		run(t, ctx, "open "+path, chromedp.Navigate(s.URL+path))
		shows(t, ctx, "open "+path, navPages[0])
		body := get(t, ctx, "page text", chromedp.Evaluate[string](`document.body.innerText`))
		for _, p := range navPages {
			if !strings.Contains(body, p.label) {
				t.Errorf("open %s: the page does not show the nav label %q:\n%s", path, p.label, body)
			}
		}
		if path == "/console/" {
			screenshot(t, ctx, "front-page", false)
		}
	}

	// From the front page, through the nav by clicking.
	for _, p := range navPages {
		sel := fmt.Sprintf(`header nav a[href=%q]`, p.path)
		if label := get(t, ctx, "the link to "+p.path, chromedp.Evaluate[string](fmt.Sprintf(
			`(() => { const a = document.querySelector(%q); return a ? a.innerText : ""; })()`, sel))); label != p.label {
			t.Fatalf("the nav link to %s says %q, want %q", p.path, label, p.label)
		}
		run(t, ctx, "click "+p.label, chromedp.Click(chromedp.CSS(sel)))
		shows(t, ctx, "click "+p.label, p)
	}

	// Back, as the browser's button does it: through the history entries
	// the clicks pushed, to the front page.
	for i := len(navPages) - 2; i >= 0; i-- {
		run(t, ctx, "back to "+navPages[i].label, back())
		shows(t, ctx, "back to "+navPages[i].label, navPages[i])
	}

	if errs := uncaught(); len(errs) > 0 {
		t.Errorf("uncaught script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// shows waits until the page shown is p — its heading in main, its text —
// and checks the address is p.path and that the nav marks p's link, and only
// it, as the current page.
func shows(t *testing.T, ctx context.Context, what string, p navPage) {
	t.Helper()
	run(t, ctx, what+": wait for "+p.label, waitHeading(p.heading), waitText(`main`, p.text))
	if got := get(t, ctx, "location", chromedp.Evaluate[string](`location.pathname`)); got != p.path {
		t.Errorf("%s: the address is %s, want %s", what, got, p.path)
	}
	current := get(t, ctx, "aria-current", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('header nav a[aria-current=page]')].map(a => a.innerText)`))
	if !slices.Equal(current, []string{p.label}) {
		t.Errorf("%s: the nav marks %q as the current page, want [%q]", what, current, p.label)
	}
}

// waitHeading waits until main's h1 reads exactly heading.
func waitHeading(heading string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`new Promise((resolve, reject) => {
			const deadline = performance.now() + 20000;
			const tick = () => {
				const h = document.querySelector('main h1');
				const got = h ? h.innerText.trim() : '';
				if (got === %q) return resolve(true);
				if (performance.now() > deadline) return reject(new Error('main h1 is ' + JSON.stringify(got) + ', want ' + JSON.stringify(%q)));
				setTimeout(tick, 50);
			};
			tick();
		})`, heading, heading), chromedp.EvalAwaitPromise)(ctx, tg)
		return err
	})
}

// back goes one entry back in the tab's history, as the browser's Back button
// does (Page.navigateToHistoryEntry). chromedp.NavigateBack would wait for a
// load event that a single-page app's entries never fire.
func back() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		h, err := cdp.Call(ctx, tg, page.GetNavigationHistory, cdp.Empty{})
		if err != nil {
			return err
		}
		if h.CurrentIndex <= 0 || int(h.CurrentIndex) >= len(h.Entries) {
			return fmt.Errorf("no history entry before %d", h.CurrentIndex)
		}
		_, err = cdp.Call(ctx, tg, page.NavigateToHistoryEntry, page.NavigateToHistoryEntryParams{EntryID: h.Entries[h.CurrentIndex-1].ID})
		return err
	})
}
