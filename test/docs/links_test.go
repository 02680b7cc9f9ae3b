//go:build linux

package docs

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// linkTimeout bounds opening one link: the load, and its text showing.
const linkTimeout = 20 * time.Second

// openLinks opens, in headless Chromium, every link of d to a loopback
// address that carries no skip-open marker (each URL once, with
// 127.0.0.1:8080 rewritten to the file's server as in the blocks), after the
// file's blocks have run. Each must answer its document with a status below
// 400, show text (document.body.innerText) within linkTimeout, and throw no
// uncaught script error. It returns the failures, "" when there are none.
func openLinks(t *testing.T, d *doc, addr string) string {
	t.Helper()
	type visit struct {
		url   string
		where []string
	}
	var visits []*visit
	byURL := map[string]*visit{}
	for _, l := range d.links {
		where := fmt.Sprintf("%s:%d", d.path, l.line)
		if l.skip != "" {
			t.Logf("skip-open %s %s: %s", where, l.url, l.skip)
			continue
		}
		v := byURL[l.url]
		if v == nil {
			v = &visit{url: l.url}
			byURL[l.url] = v
			visits = append(visits, v)
		}
		v.where = append(v.where, where)
	}
	if len(visits) == 0 {
		return ""
	}
	ctx := testutil.NewBrowser(t, 1280, 800)
	uncaught := testutil.UncaughtErrors(t, ctx)
	var failures []string
	for _, v := range visits {
		target := rewrite(v.url, "", addr)
		before := len(uncaught())
		why := openPage(ctx, target)
		if errs := uncaught()[before:]; len(errs) > 0 {
			why = strings.TrimPrefix(why+"; uncaught script errors: "+strings.Join(errs, "; "), "; ")
		}
		if why != "" {
			failures = append(failures, fmt.Sprintf("%s: opening %s (as %s): %s", strings.Join(v.where, ", "), v.url, target, why))
			continue
		}
		t.Logf("opened %s: %s", strings.Join(v.where, ", "), v.url)
	}
	return strings.Join(failures, "\n")
}

// openPage navigates the tab to url and waits for its text; it returns why
// the page fails ("" when it shows text).
func openPage(ctx context.Context, url string) string {
	tctx, cancel := context.WithTimeout(ctx, linkTimeout)
	defer cancel()
	res, err := chromedp.Run(tctx, chromedp.NavigateResponse(url))
	if err != nil {
		return fmt.Sprintf("did not load: %v", err)
	}
	if res != nil && res.Status >= 400 {
		return fmt.Sprintf("HTTP %d %s", res.Status, res.StatusText)
	}
	text := `document.readyState === 'complete' && document.body ? document.body.innerText.trim() : ''`
	for {
		got, err := chromedp.Run(tctx, chromedp.Evaluate[string](text))
		if err == nil && got != "" {
			break
		}
		if tctx.Err() != nil {
			hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
			html, _ := chromedp.Run(hctx, chromedp.Evaluate[string](`document.body ? document.body.outerHTML : ''`))
			hcancel()
			return fmt.Sprintf("shows no text within %s; its body: %s", linkTimeout, tail(strings.Join(strings.Fields(html), " "), 1<<10))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A moment more for what the page does once it shows something (its
	// first API calls), so their uncaught errors are seen too.
	time.Sleep(time.Second)
	return ""
}

// TestLinks checks which links the parser finds to open: markdown links to a
// loopback address outside code, with a skip-open marker's reason on the
// links of the paragraph after it, and the problems that fail a file.
func TestLinks(t *testing.T) {
	type found struct {
		line      int
		url, skip string
	}
	cases := []struct {
		name, md string
		want     []found
		problem  string // substring of the one expected problem, "" for none
	}{
		{"kinds", "Open <http://127.0.0.1:8080/console/> or [the plans](http://localhost:8080/console/plans \"t\").\n\n" +
			"[ref]: http://127.0.0.1:8080/console/spaces\n",
			[]found{{1, "http://127.0.0.1:8080/console/", ""}, {1, "http://localhost:8080/console/plans", ""}, {3, "http://127.0.0.1:8080/console/spaces", ""}}, ""},
		{"not loopback", "See <https://github.com/x/y> and [docs](https://docs.aws.amazon.com/).\n", nil, ""},
		{"code is not a link", "Run `curl <http://127.0.0.1:8080/healthz>`; the base URL is `http://127.0.0.1:8080`.\n\n" +
			"```sh\necho '<http://127.0.0.1:8080/console/>'\n```\n", nil, ""},
		{"link text in code", "[`/console/`](http://127.0.0.1:8080/console/)\n", []found{{1, "http://127.0.0.1:8080/console/", ""}}, ""},
		{"other port", "Grafana: <http://127.0.0.1:3000/>.\n", []found{{1, "http://127.0.0.1:3000/", ""}}, ""},
		{"skip-open", "<!-- docs-test: skip-open: Grafana is not started -->\n\nThen open\n<http://127.0.0.1:3000/>.\n\n" +
			"The console: <http://127.0.0.1:8080/console/>.\n",
			[]found{{4, "http://127.0.0.1:3000/", "Grafana is not started"}, {6, "http://127.0.0.1:8080/console/", ""}}, ""},
		{"skip-open without reason", "<!-- docs-test: skip-open -->\n<http://127.0.0.1:3000/>\n",
			[]found{{2, "http://127.0.0.1:3000/", "(no reason)"}}, "x.md:1: skip-open marker without a reason"},
		{"skip-open without a link", "<!-- docs-test: skip-open: why -->\nno link here\n\n<http://127.0.0.1:3000/>\n",
			[]found{{4, "http://127.0.0.1:3000/", ""}}, "x.md:1: skip-open marker not followed by a paragraph with a link to open"},
		{"skip-open before a block", "<!-- docs-test: skip-open: why -->\n```sh\necho\n```\n", nil, "not followed by a paragraph with a link"},
		{"open as code", "Then open `http://127.0.0.1:3000` in a browser.\n", nil, "x.md:1: a URL to open written as code"},
		{"the rule quoted", "The test fails on `` open `http://127.0.0.1:3000` ``.\n", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.md")
			if err := os.WriteFile(p, []byte(c.md), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := parse(p, "x.md")
			if err != nil {
				t.Fatal(err)
			}
			var got []found
			for _, l := range d.links {
				got = append(got, found{l.line, l.url, l.skip})
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("links = %+v, want %+v", got, c.want)
			}
			switch {
			case c.problem == "" && len(d.problems) > 0:
				t.Errorf("unexpected problems: %q", d.problems)
			case c.problem != "" && (len(d.problems) != 1 || !strings.Contains(d.problems[0], c.problem)):
				t.Errorf("problems = %q, want one containing %q", d.problems, c.problem)
			}
		})
	}
}

// TestOpenLinks drives the opener on a small document against the file's
// server and a page server of the test's own: the console at the docs'
// address passes; a page that shows nothing (the console's old front page:
// an empty <div id="app">), one whose script throws, a 404, a closed port
// each fail with the link's file:line; a skip-open link is not opened; and
// links are opened after the blocks ran (a page exists only once a block
// asked for it).
func TestOpenLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts capstan serve and chromium")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := capstanBinary(t, root)
	var made atomic.Bool
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/make":
			made.Store(true)
		case "/made":
			if !made.Load() {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, "<p>made by a block</p>")
		case "/blank":
			fmt.Fprint(w, `<div id="app"></div>`)
		case "/throws":
			fmt.Fprint(w, `<p>text</p><script>null.boom</script>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer pages.Close()
	closed := fmt.Sprintf("http://127.0.0.1:%d/", freePort(t))
	md := "```sh\ncurl -sf " + pages.URL + "/make\n```\n\n" +
		"The console: <http://127.0.0.1:8080/console/>.\n\n" +
		"Made: <" + pages.URL + "/made>.\n\n" +
		"Blank: [blank](" + pages.URL + "/blank).\n\n" +
		"Throws: <" + pages.URL + "/throws>.\n\n" +
		"Missing: <" + pages.URL + "/missing>.\n\n" +
		"Closed: <" + closed + ">.\n\n" +
		"<!-- docs-test: skip-open: nothing listens there -->\n" +
		"Skipped: <" + closed + "skipped>.\n"
	p := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(p, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := parse(p, "x.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.problems) > 0 {
		t.Fatalf("problems: %q", d.problems)
	}
	failure := runDoc(t, bin, d)
	t.Logf("failure:\n%s", failure)
	for _, w := range []string{
		"x.md:9: opening " + pages.URL + "/blank (as " + pages.URL + "/blank): shows no text within",
		`<div id="app"></div>`,
		"x.md:11: opening " + pages.URL + "/throws",
		"uncaught script errors: Uncaught TypeError",
		"x.md:13: opening " + pages.URL + "/missing (as " + pages.URL + "/missing): HTTP 404",
		"x.md:15: opening " + closed + " (as " + closed + "): did not load",
	} {
		if !strings.Contains(failure, w) {
			t.Errorf("failure does not contain %q", w)
		}
	}
	for _, n := range []string{"x.md:5:", "x.md:7:", "skipped"} {
		if strings.Contains(failure, n) {
			t.Errorf("failure names %q, which should pass or not be opened", n)
		}
	}
	if got := len(regexp.MustCompile(`(?m)^x\.md:\d+: opening `).FindAllString(failure, -1)); got != 4 {
		t.Errorf("%d failures, want 4", got)
	}
}
