package spaces_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAccessNeedsAdminToken: with adminTokens configured, a space answers
// only callers with one as a bearer header, or with the cookie its
// ?capstan_token login sets. That cookie is not the token: it opens only its
// own space and is refused as a bearer token on capstan's APIs. The kernel
// WebSocket works with the header or the cookie, but not from a page of
// another origin.
func TestAccessNeedsAdminToken(t *testing.T) {
	const token = "admin-token-0123456789abcdef"
	s := startServer(t, migCluster+"adminTokens: ["+token+"]\n")
	s.token = token
	s.apply(workspaceYAML("nb", "Running", ""))
	s.waitPhase("nb", "Running", 90*time.Second)
	if got := s.execute("nb", `print("authorized")`); !strings.Contains(got, "authorized") {
		t.Fatalf("cell printed %q", got)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"a wrong token", map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized},
		{"the Jupyter scheme", map[string]string{"Authorization": "token " + token}, http.StatusUnauthorized},
		{"the admin token", map[string]string{"Authorization": "Bearer " + token}, http.StatusOK},
		{"the admin token as the cookie", map[string]string{"Cookie": "capstan_space_token=" + token}, http.StatusUnauthorized},
		{"a wrong cookie", map[string]string{"Cookie": "capstan_space_token=wrong"}, http.StatusUnauthorized},
	} {
		if got := get("/spaces/default/nb/api/status", tc.hdr).StatusCode; got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// The browser login: the token in the URL once sets the cookie, scoped
	// to the space, and redirects to the URL without it.
	resp := get("/spaces/default/nb/tree?capstan_token="+token, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/spaces/default/nb/tree" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var c *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "capstan_space_token" {
			c = ck
		}
	}
	if c == nil || !c.HttpOnly || c.Path != "/spaces/default/nb/" || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login cookie %+v: want HttpOnly, SameSite=Strict, path /spaces/default/nb/", c)
	}
	if got := get("/spaces/default/nb/tree?capstan_token=wrong", nil).StatusCode; got != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d", got)
	}
	// The cookie is a value signed for this space, not the admin token: it
	// opens nb, no other space, and no API as a bearer token.
	if c.Value == token || strings.Contains(c.Value, token) {
		t.Errorf("the login cookie holds the admin token: %q", c.Value)
	}
	const manifests = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs"
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		want       int
	}{
		{"nb's cookie opens nb", "/spaces/default/nb/api/status", map[string]string{"Cookie": "capstan_space_token=" + c.Value}, http.StatusOK},
		{"nb's cookie does not open another space", "/spaces/default/other/api/status", map[string]string{"Cookie": "capstan_space_token=" + c.Value}, http.StatusUnauthorized},
		{"the admin token does (it is not running)", "/spaces/default/other/api/status", map[string]string{"Authorization": "Bearer " + token}, http.StatusNotFound},
		{"nb's cookie is not a bearer token for nb", "/spaces/default/nb/api/status", map[string]string{"Authorization": "Bearer " + c.Value}, http.StatusUnauthorized},
		{"nb's cookie is not a bearer token for the manifests API", manifests, map[string]string{"Authorization": "Bearer " + c.Value}, http.StatusUnauthorized},
		{"nor for the workspaces API", wsPath, map[string]string{"Authorization": "Bearer " + c.Value}, http.StatusUnauthorized},
		{"nor for /metrics", "/metrics", map[string]string{"Authorization": "Bearer " + c.Value}, http.StatusUnauthorized},
		{"the admin token opens the manifests API", manifests, map[string]string{"Authorization": "Bearer " + token}, http.StatusOK},
	} {
		if got := get(tc.path, tc.hdr).StatusCode; got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// The kernel WebSocket, with Jupyter behind the proxy: capstan's own
	// origin, or none, opens it; a page of another origin does not, even
	// with the cookie (Jupyter skips its own Origin check for the
	// token-authenticated requests capstan sends).
	kernel := s.startKernel("nb")
	for _, tc := range []struct {
		name string
		hdr  http.Header
		want int
	}{
		{"the header, no Origin", http.Header{"Authorization": {"Bearer " + token}}, http.StatusSwitchingProtocols},
		{"the cookie, capstan's origin", http.Header{"Cookie": {"capstan_space_token=" + c.Value}, "Origin": {s.URL}}, http.StatusSwitchingProtocols},
		{"the cookie, another origin", http.Header{"Cookie": {"capstan_space_token=" + c.Value}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"the header, another origin", http.Header{"Authorization": {"Bearer " + token}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
	} {
		if got := s.dialKernel("nb", kernel, tc.hdr); got != tc.want {
			t.Errorf("kernel WebSocket, %s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// The API needs it too.
	s.token = ""
	if code, _ := s.do(http.MethodGet, "/apis/workspace.jupyter.org/v1alpha1/workspaces", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("the workspaces API without a token: %d", code)
	}
}

// TestLoopbackOnlyWithoutCredentials: told to listen on every interface
// without credentials (insecureListenAny), capstan still serves spaces
// only to this host.
func TestLoopbackOnlyWithoutCredentials(t *testing.T) {
	ip := nonLoopbackIP(t)
	s := startServer(t, migCluster+"insecureListenAny: true\n")
	s.proc.Cmd.Process.Kill()
	_ = s.proc.Cmd.Wait()
	// A fresh port: the old one may be taken by now (another process's
	// outgoing connection gets any free port).
	s.start("0.0.0.0:0")
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]
	s.apply(workspaceYAML("nb", "Running", ""))
	s.waitPhase("nb", "Running", 90*time.Second)
	if code, _ := s.do(http.MethodGet, "/spaces/default/nb/api/status", nil, nil); code != http.StatusOK {
		t.Fatalf("from loopback: %d", code)
	}
	resp, err := http.Get("http://" + net.JoinHostPort(ip, port) + "/spaces/default/nb/api/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("from %s: %d, want 403", ip, resp.StatusCode)
	}
}

func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatalf("this machine has no non-loopback IPv4 address to test from")
	return ""
}

// TestClosedWithoutAdminTokens: with authentication configured but no
// adminTokens, spaces are closed to everyone, as the other admin surfaces.
func TestClosedWithoutAdminTokens(t *testing.T) {
	s := startServer(t, migCluster+"apiKeys: [inference-key-0123456789]\n")
	code, b := s.do(http.MethodGet, "/spaces/default/nb/", nil, map[string]string{"Authorization": "Bearer inference-key-0123456789"})
	if code != http.StatusUnauthorized || !strings.Contains(string(b), "adminTokens is empty") {
		t.Fatalf("%d %s", code, b)
	}
}
