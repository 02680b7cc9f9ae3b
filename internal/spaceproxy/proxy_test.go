package spaceproxy

import (
	"net/http"
	"testing"
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
