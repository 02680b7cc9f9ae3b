package spaceproxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/capstan-dev/capstan/internal/spaces"
)

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5000": true, "[::1]:5000": true, "127.8.9.10:1": true,
		"10.0.0.5:5000": false, "[2001:db8::1]:80": false, "garbage": false, "": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestStripCookie(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	r.Header.Set("Cookie", "_xsrf=abc; "+CookieName+"=secret; username-x=y")
	stripCookie(r, CookieName)
	if _, err := r.Cookie(CookieName); err == nil {
		t.Errorf("capstan's cookie still sent: %q", r.Header.Get("Cookie"))
	}
	for _, name := range []string{"_xsrf", "username-x"} {
		if _, err := r.Cookie(name); err != nil {
			t.Errorf("the app's cookie %s was dropped: %q", name, r.Header.Get("Cookie"))
		}
	}
}

// TestCookieApp: an app that takes the token as a cookie and serves at /
// (code-server) gets the cookie, not the header, and paths without the
// space's base; a client's own cookie of that name never reaches it.
func TestCookieApp(t *testing.T) {
	var got struct{ path, cookie, auth, other string }
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.path, got.auth = r.URL.RequestURI(), r.Header.Get("Authorization")
		got.cookie, got.other = "", ""
		if c, err := r.Cookie("code-server-session"); err == nil {
			got.cookie = c.Value
		}
		if c, err := r.Cookie("theme"); err == nil {
			got.other = c.Value
		}
	}))
	t.Cleanup(app.Close)
	u, _ := url.Parse(app.URL)
	port, _ := strconv.Atoi(u.Port())
	h := New(Options{Spaces: &fakeSpaces{running: map[string]spaces.Target{
		"default/ce": {Port: port, Token: "tok", Cookie: "code-server-session", Base: "/spaces/default/ce"}}}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	for _, c := range []struct{ path, want string }{
		{"/spaces/default/ce/", "/"},
		{"/spaces/default/ce/?folder=/home/x", "/?folder=/home/x"},
		{"/spaces/default/ce/stable-1/static/out/a%2Fb.js", "/stable-1/static/out/a%2Fb.js"},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
		req.Header.Set("Cookie", "code-server-session=forged; theme=dark")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got.path != c.want || got.cookie != "tok" || got.auth != "" || got.other != "dark" {
			t.Errorf("%s reached the app as path %q, session cookie %q, Authorization %q, theme %q; want %q, \"tok\", none, \"dark\"",
				c.path, got.path, got.cookie, got.auth, got.other, c.want)
		}
	}

	// The base without its slash redirects to it, query kept (curl
	// resolves code-server's "./?folder=…" redirect that way).
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(srv.URL + "/spaces/default/ce?folder=/home/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || loc != "/spaces/default/ce/?folder=/home/x" {
		t.Errorf("base without slash: %d to %q, want 301 to /spaces/default/ce/?folder=/home/x", resp.StatusCode, loc)
	}
}
