package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/observability"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// lockedBuffer is a strings.Builder safe for a command writing while the
// test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fakeCapstan answers /metrics and the discovery like capstan serve with
// adminTokens set: only with the token.
func fakeCapstan(t *testing.T, token string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprintln(w, "# TYPE capstan_endpoints gauge\ncapstan_endpoints{status=\"InService\"} 2")
		case observability.DiscoveryPath:
			fmt.Fprintln(w, "[]")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestObservabilityUpRefusesWithoutToken(t *testing.T) {
	srv := fakeCapstan(t, "tok-0123456789")
	t.Setenv("CAPSTAN_TOKEN", "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no token", nil, "wants an admin token for its metrics: pass --token or set CAPSTAN_TOKEN"},
		{"wrong token", []string{"--token", "nope"}, "refused the admin token"},
		{"bad server", []string{"--server", "localhost:8080"}, "want http://host:port"},
		{"sub-second interval", []string{"--scrape-interval", "100ms"}, "want at least 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut lockedBuffer
			args := append([]string{"--server", srv.URL, "observability", "up", "--data-dir", t.TempDir(), "--prometheus", "/no/such/prometheus"}, tc.args...)
			if code := Execute(context.Background(), args, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut.String(), tc.want)
			}
		})
	}
}

// `capstan observability up` runs a real Prometheus that scrapes the
// server with the admin token, prints where it is, and stops it cleanly
// when its context ends (what SIGINT does through main).
func TestObservabilityUpRunsPrometheus(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus not found (apt-get install prometheus); CI must run this test")
		}
		t.Skip("prometheus not installed (apt-get install prometheus); CI installs it")
	}
	const token = "tok-0123456789"
	srv := fakeCapstan(t, token)
	t.Setenv("CAPSTAN_TOKEN", token)
	listen := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- Execute(ctx, []string{"--server", srv.URL, "observability", "up", "--data-dir", t.TempDir(),
			"--listen", listen, "--scrape-interval", "1s"}, &out, &errOut)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "press Ctrl-C to stop") {
		select {
		case c := <-code:
			t.Fatalf("exited %d early: %s%s", c, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s%s", out.String(), errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	base := "http://" + listen
	for _, want := range []string{"prometheus serving on " + base + "\n", "capstan           " + srv.URL + "/metrics\n",
		"capstan-replicas  " + srv.URL + observability.DiscoveryPath + " (0 ready replicas now)\n", "alert rules: 12 alerts"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for {
		resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(`capstan_endpoints{job="capstan",status="InService"}`))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Data struct {
				Result []struct {
					Value []any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if len(r.Data.Result) == 1 && r.Data.Result[0].Value[1] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has not scraped the server: %+v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 || !strings.HasSuffix(out.String(), "prometheus stopped\n") {
			t.Fatalf("exit %d, output %q %q", c, out.String(), errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop")
	}
	if _, err := http.Get(base + "/-/ready"); err == nil {
		t.Fatal("Prometheus still answers after up returned")
	}
}
