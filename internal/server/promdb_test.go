package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/dashboards"
	"github.com/capstan-dev/capstan/internal/promdb"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// capstan's own metric store scrapes the server and every ready replica
// (discovery's labels, up 0 for a replica whose page cannot be read) and
// answers PromQL at /prometheus/api/v1; with authentication configured it
// and the dashboards' index want an admin token, as /metrics does. Turned
// off, both answer 404.
func TestMetricsStore(t *testing.T) {
	fast := config.MetricsStore{ScrapeInterval: config.Duration{Duration: time.Second}}
	tests := []struct {
		name string
		cfg  config.Config
		auth string
	}{
		{"no auth", config.Config{MetricsStore: fast}, ""},
		{"admin token", config.Config{MetricsStore: fast, AdminTokens: []string{testAdmin},
			Credentials: []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: testSecret}}}, "Bearer " + testAdmin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, tc.cfg)
			query := func(q string) map[string]string {
				t.Helper()
				resp, body := h.call(t, "GET", promdb.Path+"api/v1/query?"+url.Values{"query": {q}}.Encode(), tc.auth, "")
				var out struct {
					Status string
					Data   struct {
						Result []struct {
							Metric map[string]string
							Value  []any
						}
					}
				}
				if err := json.Unmarshal([]byte(body), &out); err != nil || resp.StatusCode != http.StatusOK || out.Status != "success" {
					t.Fatalf("query %s: HTTP %d %s", q, resp.StatusCode, body)
				}
				got := map[string]string{}
				for _, r := range out.Data.Result {
					got[r.Metric["job"]] = r.Value[1].(string)
				}
				return got
			}
			if tc.auth != "" {
				for _, p := range []string{promdb.Path + "api/v1/query?query=up", dashboards.ServePath, dashboards.ServePath + "/" + dashboards.InferenceUID} {
					if resp, _ := h.call(t, "GET", p, "", ""); resp.StatusCode != http.StatusUnauthorized {
						t.Errorf("GET %s without a token: %d, want 401", p, resp.StatusCode)
					}
				}
			}
			testutil.Eventually(t, 10*time.Second, "the server's own scrape", func() bool { return query(`up{job="capstan"}`)["capstan"] == "1" })
			h.serving(t, "store-ep")
			testutil.Eventually(t, 10*time.Second, "the replica's target (its fake engine has no /metrics page: up 0)", func() bool {
				return query(`up{job="capstan-replicas", endpoint="store-ep", variant="AllTraffic"}`)["capstan-replicas"] == "0"
			})
			testutil.Eventually(t, 10*time.Second, "the endpoint's ready replica in the server's own metrics", func() bool {
				return query(`sum by (job) (capstan_endpoint_replicas{endpoint="store-ep", state="ready"})`)["capstan"] == "1"
			})

			resp, body := h.call(t, "GET", dashboards.ServePath, tc.auth, "")
			var idx dashboards.Index
			if err := json.Unmarshal([]byte(body), &idx); err != nil || resp.StatusCode != 200 || len(idx.Dashboards) != 3 || idx.ScrapeInterval != "1s" {
				t.Fatalf("dashboards index: HTTP %d %s", resp.StatusCode, body)
			}
			if resp, body := h.call(t, "GET", dashboards.ServePath+"/"+dashboards.ClusterUID, tc.auth, ""); resp.StatusCode != 200 || !json.Valid([]byte(body)) {
				t.Errorf("cluster dashboard: HTTP %d", resp.StatusCode)
			}
		})
	}
	t.Run("disabled", func(t *testing.T) {
		h := startHarness(t, config.Config{MetricsStore: config.MetricsStore{Disabled: true}})
		for _, p := range []string{promdb.Path + "api/v1/query?query=up", dashboards.ServePath} {
			if resp, body := h.call(t, "GET", p, "", ""); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s: HTTP %d %s, want 404", p, resp.StatusCode, body)
			}
		}
	})
}
