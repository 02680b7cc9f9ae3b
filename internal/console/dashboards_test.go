package console_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardsPage: the Dashboards nav page shows the Inference dashboard
// from capstan's own store; on the Cluster tab a fresh server's default
// cluster already has data (its nodes); the time range and refresh chosen
// go into the URL as Grafana keeps them and survive a reload, and reach the
// queries (the range's step). A server with the store turned off says so.
// (Every panel with traffic through every door: test/e2e/observability_flow.sh.)
func TestDashboardsPage(t *testing.T) {
	s := startServer(t, "metricsStore: {scrapeInterval: 1s}\n")
	ctx := newBrowser(t, 1280, 900)
	// Refreshed every 5 s: a page opened before the store's first scrapes
	// of the cluster's series shows them at the next refresh.
	run(t, ctx, "open Dashboards",
		chromedp.Navigate(s.URL+"/console/dashboards?refresh=5s"),
		waitHeading("Dashboards"),
		waitText(`main`, "Requests, latency, TTFB and TTFT"),
		waitText(`main`, "scraped every 1s, kept for 3h"),
		chromedp.Click(chromedp.CSS(`.dash-tabs a[href^="/console/dashboards/capstan-cluster"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-title="Nodes by status"][data-state=data]`)),
		waitText(`[data-title="Nodes by status"] .dash-legend`, "ml-cluster Running"),
	)
	run(t, ctx, "pick a time range and a refresh",
		chromedp.SetValue(`[data-testid=time-range]`, "now-5m"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=time-range]').dispatchEvent(new Event('change', {bubbles: true}))`),
		chromedp.SetValue(`[data-testid=refresh]`, "10s"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=refresh]').dispatchEvent(new Event('change', {bubbles: true}))`),
	)
	search := get(t, ctx, "the URL", chromedp.Evaluate[string](`location.pathname + location.search`))
	if search != "/console/dashboards/capstan-cluster?from=now-5m&refresh=10s" {
		t.Errorf("the URL is %s, want the cluster dashboard with from=now-5m&refresh=10s", search)
	}
	run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-title="Nodes by status"][data-state=data]`)))
	for sel, want := range map[string]string{`[data-testid=time-range]`: "now-5m", `[data-testid=refresh]`: "10s"} {
		if got := get(t, ctx, sel, chromedp.Evaluate[string](`document.querySelector('`+sel+`').value`)); got != want {
			t.Errorf("after a reload %s shows %q, want %q", sel, got, want)
		}
	}
	// Five minutes at a point per scrape (1 s): $__rate_interval 4 s.
	grid := get(t, ctx, "the queries' range", chromedp.Evaluate[map[string]string](`({...document.querySelector('.dash-grid').dataset})`))
	if grid["range"] != "300" || grid["step"] != "1" || grid["rateInterval"] != "4s" {
		t.Errorf("queries over %v, want range 300 s, step 1 s, rate interval 4s", grid)
	}
	screenshot(t, ctx, "dashboards-cluster-5m", false)

	off := startServer(t, "metricsStore: {disabled: true}\n")
	run(t, ctx, "a server without the store",
		chromedp.Navigate(off.URL+"/console/dashboards"),
		waitText(`[data-testid=error]`, "metricsStore.disabled"),
	)
}
