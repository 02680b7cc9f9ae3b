// Command dashcheck opens every dashboard of capstan's web console
// (/console/dashboards/<uid>) in headless Chromium, as a user would, and
// checks that each panel shows data drawn from capstan's own metric store:
// a chart, a stat or a table with at least one finite value. It prints one
// line per panel and exits 1 when a panel has none (or, for a title given
// with -expect-empty, when it has some), or shows an error.
//
// test/e2e/observability_flow.sh runs it after sending traffic through
// every door:
//
//	go run ./test/e2e/dashcheck -url http://127.0.0.1:8080 [-expect-empty TITLE]... [-only TITLE]...
//	    [-endpoint NAME] [-screenshots DIR]
//
// -endpoint NAME also picks NAME in the Inference dashboard's Endpoint
// variable and checks that the URL keeps it (var-endpoint, as Grafana's)
// and that the request-rate panel then shows only NAME's series.
// -screenshots DIR writes each dashboard's full page to
// DIR/dashboards-<name>.png.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/capstan-dev/capstan/internal/dashboards"
	"github.com/capstan-dev/capstan/internal/testutil"
)

type titles []string

func (t *titles) String() string     { return strings.Join(*t, ", ") }
func (t *titles) Set(v string) error { *t = append(*t, v); return nil }

// panel is what the page says of one panel (Dashboards.jsx data-*).
type panel struct {
	Title  string `json:"title"`
	State  string `json:"state"`
	Series int    `json:"series"`
	Points int    `json:"points"`
	Error  string `json:"error"`
}

const readPanels = `[...document.querySelectorAll('[data-testid="dashboard-panel"]')].map((p) => ({
  title: p.dataset.title, state: p.dataset.state, series: Number(p.dataset.series), points: Number(p.dataset.points),
  error: (p.querySelector('[data-testid="error"]') || {}).textContent || '',
}))`

func main() {
	base := flag.String("url", "", "capstan serve's base URL")
	shots := flag.String("screenshots", "", "write each dashboard's full page to DIR/dashboards-<name>.png")
	endpoint := flag.String("endpoint", "", "pick this endpoint in the Inference dashboard's variable and check the filter")
	timeout := flag.Duration("timeout", 90*time.Second, "how long a dashboard may take to show data")
	var empty, only titles
	flag.Var(&empty, "expect-empty", "a panel that must show no data (repeatable)")
	flag.Var(&only, "only", "check just this panel (repeatable)")
	flag.Parse()
	if *base == "" {
		fmt.Fprintln(os.Stderr, "usage: dashcheck -url URL [-expect-empty TITLE]... [-only TITLE]... [-endpoint NAME] [-screenshots DIR]")
		os.Exit(2)
	}
	if err := run(strings.TrimSuffix(*base, "/"), *shots, *endpoint, *timeout, empty, only); err != nil {
		fmt.Fprintln(os.Stderr, "dashcheck:", err)
		os.Exit(1)
	}
}

func run(base, shots, endpoint string, timeout time.Duration, empty, only titles) error {
	var idx dashboards.Index
	resp, err := http.Get(base + dashboards.ServePath)
	if err != nil {
		return err
	}
	err = json.NewDecoder(resp.Body).Decode(&idx)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d %v", dashboards.ServePath, resp.StatusCode, err)
	}
	browser, stop, err := testutil.StartBrowser(1400, 1000, func(string, ...any) {})
	if err != nil {
		return err
	}
	defer stop()
	var failed []string
	for _, d := range idx.Dashboards {
		tab, cancel := chromedp.NewContext(browser)
		// Open the tab on its own context: a first action under a timeout
		// would close the tab when the timeout's context ends.
		if err := chromedp.Do(tab); err != nil {
			cancel()
			return fmt.Errorf("open a tab: %w", err)
		}
		bad, err := checkDashboard(tab, base, d, shots, timeout, empty, only)
		if err == nil && d.UID == dashboards.InferenceUID && len(only) == 0 {
			err = checkHover(tab)
		}
		if err == nil && endpoint != "" && d.UID == dashboards.InferenceUID && len(only) == 0 {
			err = checkFilter(tab, endpoint, timeout)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", d.Title, err)
		}
		failed = append(failed, bad...)
	}
	if len(failed) > 0 {
		return fmt.Errorf("panels without the expected data:\n  %s", strings.Join(failed, "\n  "))
	}
	return nil
}

// checkDashboard opens one dashboard (the last 15 minutes, refreshed every
// 5 s) and waits until every panel checked is as expected, or timeout.
func checkDashboard(tab context.Context, base string, d dashboards.IndexEntry, shots string, timeout time.Duration, empty, only titles) ([]string, error) {
	url := base + "/console/dashboards/" + d.UID + "?from=now-15m&refresh=5s"
	if _, err := do(tab, chromedp.Steps(chromedp.Navigate(url), chromedp.WaitVisible(`[data-testid="dashboard-panel"]`))); err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	deadline := time.Now().Add(timeout)
	var bad []string
	var panels []panel
	var err error
	for {
		bad = nil
		if panels, err = do(tab, chromedp.Evaluate[[]panel](readPanels)); err != nil {
			return nil, err
		}
		for _, p := range panels {
			if len(only) > 0 && !slices.Contains(only, p.Title) {
				continue
			}
			want := "data"
			if slices.Contains(empty, p.Title) {
				want = "empty"
			}
			if p.State != want {
				bad = append(bad, fmt.Sprintf("%s / %s: %s, want %s %s", d.Title, p.Title, p.State, want, p.Error))
			}
		}
		if len(panels) > 0 && len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, p := range panels {
		if len(only) == 0 || slices.Contains(only, p.Title) {
			fmt.Printf("%s %s / %s: %s (%d series, %d points)\n", map[bool]string{true: "ok", false: "BAD"}[!contains(bad, p.Title)],
				d.Title, p.Title, p.State, p.Series, p.Points)
		}
	}
	if shots != "" && len(bad) == 0 {
		name := strings.ToLower(strings.TrimPrefix(d.Title, "capstan / "))
		png, err := do(tab, chromedp.FullScreenshot(100))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(shots, "dashboards-"+name+".png"), png, 0o644); err != nil {
			return nil, err
		}
	}
	return bad, nil
}

// do runs one browser action, bounded so a hung page fails the check.
func do[T any](tab context.Context, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	return chromedp.Run(ctx, a)
}

func contains(bad []string, title string) bool {
	for _, b := range bad {
		if strings.Contains(b, " / "+title+": ") {
			return true
		}
	}
	return false
}

// checkHover moves the mouse over the request-rate chart, as a user reading
// a value does: its legend must switch from the last values to the values at
// the cursor's time.
func checkHover(tab context.Context) error {
	const sel = `[data-title^="Request rate"]`
	box, err := do(tab, chromedp.Evaluate[[]float64](`(() => {
  const r = document.querySelector('`+sel+` .u-over').getBoundingClientRect();
  return [r.left + r.width * 0.9, r.top + r.height / 2];
})()`))
	if err != nil || len(box) != 2 {
		return fmt.Errorf("hover: find the chart: %v", err)
	}
	if _, err := do(tab, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0], box[1])); err != nil {
		return fmt.Errorf("hover: %w", err)
	}
	at, err := do(tab, chromedp.Evaluate[string](`document.querySelector('`+sel+` .dash-legend').dataset.at`))
	if err != nil {
		return err
	}
	if _, perr := time.Parse(time.RFC3339, at); perr != nil {
		return fmt.Errorf("hover: the legend shows %q, want the values at a time under the cursor", at)
	}
	fmt.Printf("ok hover over Request rate: legend at %s\n", at)
	return nil
}

// checkFilter picks endpoint in the Endpoint variable, as a user does in
// its list, and waits until the URL says so and the request-rate panel's
// legend lists only that endpoint.
func checkFilter(tab context.Context, endpoint string, timeout time.Duration) error {
	pick := fmt.Sprintf(`(() => {
  const s = document.querySelector('[data-testid="var-endpoint"]');
  const o = [...s.options].find((o) => o.value === %q);
  if (!o) return false;
  for (const x of s.options) x.selected = x === o;
  s.dispatchEvent(new Event('change', { bubbles: true }));
  return true;
})()`, endpoint)
	const legend = `[...document.querySelectorAll('[data-title^="Request rate"] .dash-legend li')].map((li) => li.textContent)`
	deadline := time.Now().Add(timeout)
	for {
		picked, err := do(tab, chromedp.Evaluate[bool](pick))
		if err != nil {
			return err
		}
		time.Sleep(time.Second) // the panels reload
		entries, err := do(tab, chromedp.Evaluate[[]string](legend))
		if err != nil {
			return err
		}
		search, err := do(tab, chromedp.Evaluate[string](`location.search`))
		if err != nil {
			return err
		}
		ok := picked && strings.Contains(search, "var-endpoint="+endpoint) && len(entries) > 0
		for _, e := range entries {
			ok = ok && strings.HasPrefix(e, endpoint+"/")
		}
		if ok {
			fmt.Printf("ok Endpoint variable %s: URL %s, request-rate legend %q\n", endpoint, search, entries)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("endpoint variable %s: picked %v, URL %q, request-rate legend %q", endpoint, picked, search, entries)
		}
		time.Sleep(time.Second)
	}
}
