package spaceproxy

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

func TestOwnOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, host, origin string
		tls, want          bool
	}{
		{"same", "capstan.example:8080", "http://capstan.example:8080", false, true},
		{"default http port on the Origin", "capstan.example", "http://capstan.example:80", false, true},
		{"default http port on Host", "capstan.example:80", "http://capstan.example", false, true},
		{"https over TLS", "capstan.example", "https://capstan.example", true, true},
		{"default https port", "capstan.example:443", "https://capstan.example", true, true},
		{"http page, TLS connection", "capstan.example", "http://capstan.example", true, false},
		{"https page, plain connection", "capstan.example", "https://capstan.example", false, false},
		{"IPv6", "[::1]:8080", "http://[::1]:8080", false, true},
		{"IPv6 default port", "[::1]:80", "http://[::1]", false, true},
		{"other host", "capstan.example", "http://capstan.example.evil", false, false},
		{"user info", "capstan.example", "http://x@capstan.example", false, false},
		{"query", "capstan.example", "http://capstan.example?x", false, false},
		{"no Host", "", "http://capstan.example", false, false},
		{"ws scheme", "capstan.example", "ws://capstan.example", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/spaces/default/a/", nil)
			r.Host = tc.host
			if !tc.tls {
				r.TLS = nil
			} else if r.TLS == nil {
				r.TLS = &tls.ConnectionState{}
			}
			if got := ownOrigin(r, tc.origin); got != tc.want {
				t.Errorf("ownOrigin(Host %q, Origin %q) = %v, want %v", tc.host, tc.origin, got, tc.want)
			}
		})
	}
}

// TestSpaceCookieExpires: a login cookie opens its space for SessionTTL by
// the proxy's clock, not longer.
func TestSpaceCookieExpires(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	srv, _ := proxy(t, Options{RequireToken: true, AdminTokens: []string{testAdminToken}, Clock: clk})
	a := login(t, srv, "a")
	clk.Step(SessionTTL - time.Second)
	if got := get(t, srv, "/spaces/default/a/api/status", cookie(a.Value)).StatusCode; got != http.StatusOK {
		t.Errorf("a second before it expires: %d, want 200", got)
	}
	clk.Step(time.Second)
	if got := get(t, srv, "/spaces/default/a/api/status", cookie(a.Value)).StatusCode; got != http.StatusUnauthorized {
		t.Errorf("once expired: %d, want 401", got)
	}
	// A fresh login opens it again.
	if got := get(t, srv, "/spaces/default/a/api/status", cookie(login(t, srv, "a").Value)).StatusCode; got != http.StatusOK {
		t.Errorf("after a new login: %d, want 200", got)
	}
}
