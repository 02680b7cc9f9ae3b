package spaceproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/capstan-dev/capstan/internal/spaces"
)

// fakeSpaces serves every space in running from one app.
type fakeSpaces struct {
	mu      sync.Mutex
	running map[string]spaces.Target
}

var _ Spaces = (*fakeSpaces)(nil)

func (f *fakeSpaces) Target(ns, name string) (spaces.Target, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.running[ns+"/"+name]
	return t, ok
}

func (f *fakeSpaces) Phase(ns, name string) (string, bool) {
	_, ok := f.Target(ns, name)
	return "Running", ok
}

func (f *fakeSpaces) Touch(string, string) {}

const (
	testAdminToken = "admin-token-0123456789abcdef"
	testAppToken   = "app-token"
)

// app stands in for Jupyter: it answers HTTP with "ok" and echoes on a
// WebSocket, checking only the token capstan adds. Like Jupyter with a
// token-authenticated request, it does not check Origin itself, so the
// proxy is the only thing between a foreign page and the kernel.
func app(t *testing.T) (port int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token "+testAppToken {
			http.Error(w, "no app token", http.StatusForbidden)
			return
		}
		if r.Header.Get("Upgrade") == "" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, b, err := c.Read(r.Context())
		if err != nil {
			return
		}
		_ = c.Write(r.Context(), typ, b)
		_ = c.Close(websocket.StatusNormalClosure, "")
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ = strconv.Atoi(u.Port())
	return port
}

// proxy serves the spaces default/a and default/b through a Handler made
// with o (its Spaces filled in).
func proxy(t *testing.T, o Options) (*httptest.Server, *Handler) {
	t.Helper()
	port := app(t)
	o.Spaces = &fakeSpaces{running: map[string]spaces.Target{
		"default/a": {Port: port, Token: testAppToken}, "default/b": {Port: port, Token: testAppToken}}}
	h := New(o)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h
}

// dial opens the WebSocket of space path with hdr, sends one message and
// reads the echo. It returns the handshake's status (101 when it opened).
func dial(t *testing.T, srv *httptest.Server, path string, hdr http.Header) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+path, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		return resp.StatusCode
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, b, err := c.Read(ctx); err != nil || string(b) != "ping" {
		t.Fatalf("echo: %q, %v", b, err)
	}
	return resp.StatusCode
}

// TestWebSocketOrigin: a browser sends Origin on every WebSocket handshake,
// and a page of another origin could otherwise open a space's kernel channel
// with the user's cookie (or, without credentials configured, with none).
// Only capstan's own origin (the scheme and Host the request reached capstan
// with; X-Forwarded-* are the client's word and count for nothing) and
// clients that send no Origin get through.
func TestWebSocketOrigin(t *testing.T) {
	for _, mode := range []struct {
		name string
		o    Options
		auth http.Header
	}{
		{"admin token", Options{RequireToken: true, AdminTokens: []string{testAdminToken}},
			http.Header{"Authorization": {"Bearer " + testAdminToken}}},
		{"loopback only", Options{LoopbackOnly: true}, http.Header{}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			srv, _ := proxy(t, mode.o)
			own := srv.URL // http://127.0.0.1:port
			host := strings.TrimPrefix(own, "http://")
			for _, tc := range []struct {
				name string
				hdr  http.Header
				want int
			}{
				{"no Origin", nil, http.StatusSwitchingProtocols},
				{"own origin", http.Header{"Origin": {own}}, http.StatusSwitchingProtocols},
				{"own origin in capitals", http.Header{"Origin": {strings.ToUpper(own)}}, http.StatusSwitchingProtocols},
				{"another site", http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
				{"another port of this host", http.Header{"Origin": {"http://127.0.0.1:1"}}, http.StatusForbidden},
				{"localhost for 127.0.0.1", http.Header{"Origin": {strings.Replace(own, "127.0.0.1", "localhost", 1)}}, http.StatusForbidden},
				{"https for a plain connection", http.Header{"Origin": {"https://" + host}}, http.StatusForbidden},
				{"null", http.Header{"Origin": {"null"}}, http.StatusForbidden},
				{"empty", http.Header{"Origin": {""}}, http.StatusForbidden},
				{"with a path", http.Header{"Origin": {own + "/x"}}, http.StatusForbidden},
				{"two origins", http.Header{"Origin": {own, "http://evil.example"}}, http.StatusForbidden},
				{"X-Forwarded-Host names the page's host", http.Header{"Origin": {"http://evil.example"}, "X-Forwarded-Host": {"evil.example"}}, http.StatusForbidden},
				{"X-Forwarded-Proto claims https", http.Header{"Origin": {"https://" + host}, "X-Forwarded-Proto": {"https"}}, http.StatusForbidden},
			} {
				t.Run(tc.name, func(t *testing.T) {
					hdr := mode.auth.Clone()
					for k, v := range tc.hdr {
						hdr[k] = v
					}
					if got := dial(t, srv, "/spaces/default/a/api/kernels/k/channels", hdr); got != tc.want {
						t.Errorf("handshake %d, want %d", got, tc.want)
					}
				})
			}
			// Plain HTTP with a foreign Origin is not a WebSocket: it
			// passes (SameSite=Strict keeps the cookie off cross-site
			// requests, and Jupyter's own pages fetch same-origin).
			req, _ := http.NewRequest(http.MethodGet, own+"/spaces/default/a/api/status", nil)
			req.Header = mode.auth.Clone()
			req.Header.Set("Origin", "http://evil.example")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("plain GET with a foreign Origin: %d", resp.StatusCode)
			}
		})
	}
}

// TestSpaceCookie: the cookie a ?capstan_token= login sets is not the admin
// token but a value signed for that one space with an expiry, refused on
// every other space, as a bearer token, once expired, and after a restart.
func TestSpaceCookie(t *testing.T) {
	srv, _ := proxy(t, Options{RequireToken: true, AdminTokens: []string{"other-admin-token-0123", testAdminToken}})
	a := login(t, srv, "a")
	if a.Value == testAdminToken || strings.Contains(a.Value, testAdminToken) {
		t.Errorf("the cookie holds the admin token: %q", a.Value)
	}
	if !a.HttpOnly || a.Path != "/spaces/default/a/" || a.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, path /spaces/default/a/", a)
	}
	if b := login(t, srv, "b"); b.Value == a.Value {
		t.Errorf("spaces a and b got the same cookie %q", a.Value)
	}
	other, _ := proxy(t, Options{RequireToken: true, AdminTokens: []string{testAdminToken}})
	for _, tc := range []struct {
		name string
		srv  *httptest.Server
		path string
		hdr  http.Header
		want int
	}{
		{"a's cookie opens a", srv, "/spaces/default/a/api/status", cookie(a.Value), http.StatusOK},
		{"a's cookie on a's WebSocket path", srv, "/spaces/default/a/api/kernels", cookie(a.Value), http.StatusOK},
		{"a's cookie does not open b", srv, "/spaces/default/b/api/status", cookie(a.Value), http.StatusUnauthorized},
		{"a's cookie does not open a space of another namespace", srv, "/spaces/other/a/api/status", cookie(a.Value), http.StatusUnauthorized},
		{"a's cookie is not a bearer token", srv, "/spaces/default/a/api/status", bearer(a.Value), http.StatusUnauthorized},
		{"the admin token is not a cookie", srv, "/spaces/default/a/api/status", cookie(testAdminToken), http.StatusUnauthorized},
		{"a's cookie, edited expiry", srv, "/spaces/default/a/api/status", cookie(editExpiry(a.Value)), http.StatusUnauthorized},
		{"a's cookie after a restart (a new key)", other, "/spaces/default/a/api/status", cookie(a.Value), http.StatusUnauthorized},
		{"garbage", srv, "/spaces/default/a/api/status", cookie("v1.x.y"), http.StatusUnauthorized},
		{"the admin token as a bearer still works", srv, "/spaces/default/b/api/status", bearer(testAdminToken), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := get(t, tc.srv, tc.path, tc.hdr).StatusCode; got != tc.want {
				t.Errorf("%d, want %d", got, tc.want)
			}
		})
	}
}

// get sends a GET without following redirects.
func get(t *testing.T, srv *httptest.Server, path string, hdr http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if hdr != nil {
		req.Header = hdr
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// login opens space's URL with the admin token, as a browser does once, and
// returns the cookie it sets.
func login(t *testing.T, srv *httptest.Server, space string) *http.Cookie {
	t.Helper()
	resp := get(t, srv, "/spaces/default/"+space+"/tree?"+QueryToken+"="+testAdminToken, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/spaces/default/"+space+"/tree" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("login set no %s cookie: %v", CookieName, resp.Header["Set-Cookie"])
	return nil
}

func cookie(v string) http.Header { return http.Header{"Cookie": {CookieName + "=" + v}} }

func bearer(v string) http.Header { return http.Header{"Authorization": {"Bearer " + v}} }

// editExpiry moves a cookie's expiry a year on, keeping its signature.
func editExpiry(v string) string {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return v + "x"
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return v + "x"
	}
	parts[1] = strconv.FormatInt(n+365*24*3600, 10)
	return strings.Join(parts, ".")
}
