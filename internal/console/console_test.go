package console_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestServedAssets checks what the server answers for the console's paths
// without a browser: pages, config, assets, caching and security headers.
func TestServedAssets(t *testing.T) {
	s := sharedServer(t)
	get := func(path string, hdr map[string]string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	// A browser at the root goes to the console; an API client's GET / is
	// still the AWS protocol's.
	if res, _ := get("/", map[string]string{"Accept": "text/html,application/xhtml+xml"}); res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/console/" {
		t.Fatalf("GET / from a browser: %d %q, want 302 to /console/", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := get("/console", nil); res.Header.Get("Location") != "/console/" {
		t.Fatalf("GET /console: %d %q, want a redirect to /console/", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := get("/", nil); res.StatusCode == http.StatusFound {
		t.Fatal("GET / without Accept: text/html was sent to the console")
	}
	res, body := get("/console/endpoints/some-endpoint", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `<div id="app">`) {
		t.Fatalf("a console page: %d\n%s", res.StatusCode, body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}
	res, body = get("/console/config.json", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"sigv4":false`) || !strings.Contains(body, `"devClock":true`) {
		t.Fatalf("config.json: %d %s", res.StatusCode, body)
	}
	// Every asset index.html names is served, immutable.
	_, index := get("/console/", nil)
	n := 0
	for _, part := range strings.Split(index, `"/console/assets/`)[1:] {
		name := part[:strings.IndexByte(part, '"')]
		res, _ := get("/console/assets/"+name, nil)
		if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("asset %s: %d %q", name, res.StatusCode, res.Header.Get("Cache-Control"))
		}
		n++
	}
	if n < 2 {
		t.Fatalf("index.html names %d assets, want the script and the stylesheet:\n%s", n, index)
	}
	if res, _ := get("/console/assets/missing.js", nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a missing asset: %d, want 404", res.StatusCode)
	}
}

// TestSignIn: with credentials configured the console asks for them before
// it shows anything, and then its signed calls work. (A server of its own:
// the shared one has no credentials.)
func TestSignIn(t *testing.T) {
	s := startServer(t, "credentials: [{accessKeyId: AKIDCONSOLE, secretAccessKey: console-secret}]\nadminTokens: [console-admin-token-0123456789]\n")
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open the console",
		chromedp.Navigate(s.URL+"/console/endpoints"),
		chromedp.WaitVisible(chromedp.CSS(`#accessKeyId`)),
		chromedp.SendKeys(chromedp.CSS(`#accessKeyId`), "AKIDCONSOLE"),
		chromedp.SendKeys(chromedp.CSS(`#secretAccessKey`), "console-secret"),
		chromedp.SendKeys(chromedp.CSS(`#adminToken`), "console-admin-token-0123456789"),
		chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
		waitText("main h1", "Endpoints"),
	)
}
