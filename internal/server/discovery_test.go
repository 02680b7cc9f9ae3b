package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/observability"
)

// GET /_capstan/prometheus/targets answers Prometheus' HTTP service
// discovery with every ready replica's metrics address, labelled with its
// endpoint, variant, instance type and replica id; once authentication is
// configured it wants an admin token, as /metrics does.
func TestPrometheusDiscoveryListsReadyReplicas(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Config
		auth string
	}{
		{"no auth", config.Config{}, ""},
		{"admin token", config.Config{AdminTokens: []string{testAdmin}, Credentials: []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: testSecret}}}, "Bearer " + testAdmin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, tc.cfg)
			if tc.auth != "" {
				if resp, _ := h.call(t, "GET", observability.DiscoveryPath, "", ""); resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("without a token: %d, want 401", resp.StatusCode)
				}
				if resp, _ := h.call(t, "GET", observability.DiscoveryPath, "Bearer wrong", ""); resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("with a wrong token: %d, want 401", resp.StatusCode)
				}
			}
			resp, body := h.call(t, "GET", observability.DiscoveryPath, tc.auth, "")
			if resp.StatusCode != http.StatusOK || body != "[]\n" {
				t.Fatalf("before any endpoint: %d %q, want 200 []", resp.StatusCode, body)
			}
			h.serving(t, "disc-ep")
			resp, body = h.call(t, "GET", observability.DiscoveryPath, tc.auth, "")
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("GET targets: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var groups []observability.TargetGroup
			if err := json.Unmarshal([]byte(body), &groups); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if len(groups) != 1 || len(groups[0].Targets) != 1 {
				t.Fatalf("want one group with one target, got %s", body)
			}
			l := groups[0].Labels
			want := map[string]string{"endpoint": "disc-ep", "variant": "AllTraffic", "instance_type": "ml.g5.xlarge"}
			for k, v := range want {
				if l[k] != v {
					t.Errorf("label %s = %q, want %q (all: %v)", k, l[k], v, l)
				}
			}
			if l["replica"] == "" {
				t.Errorf("no replica label: %v", l)
			}
			// The target is the replica's metrics address.
			mresp, err := http.Get("http://" + groups[0].Targets[0] + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			mresp.Body.Close()
			if mresp.StatusCode != http.StatusOK {
				t.Fatalf("GET target /metrics: %d", mresp.StatusCode)
			}
			if resp, _ := h.call(t, "POST", observability.DiscoveryPath, tc.auth, "{}"); resp.StatusCode != http.StatusMethodNotAllowed {
				t.Fatalf("POST: %d, want 405", resp.StatusCode)
			}
		})
	}
}
