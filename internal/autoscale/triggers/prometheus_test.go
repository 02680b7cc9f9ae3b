package triggers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/testutil"
)

func promTrigger(t *testing.T, server, query string, mut ...func(*manifest.PrometheusTrigger)) *prometheusTrigger {
	t.Helper()
	_, clk := newFakes()
	spec := manifest.PrometheusTrigger{Name: "p", ServerAddress: server, Query: query, TargetValue: ptr(1.0), UseCachedMetrics: ptr(false)}
	for _, m := range mut {
		m(&spec)
	}
	p, err := newPrometheusTrigger(&spec, time.Second, Env{Endpoint: "ep", Clock: clk}, "prometheusTrigger")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPrometheusResponses covers the response shapes with a scripted
// server; TestPrometheusReal below runs the same trigger against a real
// Prometheus.
func TestPrometheusResponses(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		body       string
		ignoreNull bool
		want       float64
		wantErr    string
	}{
		{"vector of one", 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.1,"4.5"]}]}}`, true, 4.5, ""},
		{"scalar", 200, `{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"7"]}}`, true, 7, ""},
		{"empty vector ignored", 200, `{"status":"success","data":{"resultType":"vector","result":[]}}`, true, 0, ""},
		{"empty vector not ignored", 200, `{"status":"success","data":{"resultType":"vector","result":[]}}`, false, 0, "no series"},
		{"NaN ignored", 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}`, true, 0, ""},
		{"+Inf not ignored", 200, `{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}`, false, 0, "+Inf"},
		{"two series", 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]}]}}`, true, 0, "2 series"},
		{"matrix", 200, `{"status":"success","data":{"resultType":"matrix","result":[]}}`, true, 0, "matrix"},
		{"query error", 400, `{"status":"error","errorType":"bad_data","error":"parse error"}`, true, 0, "bad_data: parse error"},
		{"not JSON", 502, `<html>bad gateway</html>`, true, 0, "HTTP 502"},
		{"bad value", 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}`, true, 0, "bad vector"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				fmt.Fprint(w, c.body)
			}))
			defer srv.Close()
			p := promTrigger(t, srv.URL, "q")
			p.ignoreNull = c.ignoreNull
			got, err := p.Value(context.Background())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Value = %v, %v; want error containing %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Value = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestPrometheusRequest(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`)
	}))
	defer srv.Close()
	p := promTrigger(t, srv.URL+"/prefix/", `sum(rate(x{a="b"}[1m]))`, func(p *manifest.PrometheusTrigger) {
		p.Namespace = "team-a"
		p.CustomHeaders = "X-Scope-OrgID=tenant1, Authorization = Bearer abc"
	})
	if _, err := p.Value(context.Background()); err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"path", got.URL.Path, "/prefix/api/v1/query"},
		{"query", got.URL.Query().Get("query"), `sum(rate(x{a="b"}[1m]))`},
		{"namespace parameter", got.URL.Query().Get("namespace"), "team-a"},
		{"org header", got.Header.Get("X-Scope-OrgID"), "tenant1"},
		{"auth header", got.Header.Get("Authorization"), "Bearer abc"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestParseCustomHeaders(t *testing.T) {
	cases := []struct {
		in      string
		want    http.Header
		wantErr bool
	}{
		{"", http.Header{}, false},
		{"a=1", http.Header{"A": {"1"}}, false},
		{" a = 1 ,b=2=3", http.Header{"A": {"1"}, "B": {"2=3"}}, false},
		{"a", nil, true},
		{"=1", nil, true},
		{"bad name=1", nil, true},
		{"a=1,", nil, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseCustomHeaders(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !c.wantErr && fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("= %v, want %v", got, c.want)
			}
		})
	}
}

// startPrometheus runs the Debian prometheus binary scraping target every
// second and returns its base URL once it serves queries.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if _, statErr := os.Stat("/usr/bin/prometheus"); statErr != nil {
			t.Skip("prometheus binary not installed (apt-get install prometheus); CI installs it")
		}
		bin = "/usr/bin/prometheus"
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: capstan-test
    static_configs: [{targets: [%q]}]
`, target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := testutil.Start(t, ctx, bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=info",
	)
	p.WaitLine(t, "Server is ready to receive web requests", 90*time.Second)
	return "http://" + addr
}

// waitValue polls an uncached trigger (real time, generous timeout) until
// it reads want: Prometheus needs a scrape or two to see a change.
func waitValue(t *testing.T, p *prometheusTrigger, want float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var got float64
	var err error
	for time.Now().Before(deadline) {
		if got, err = p.Value(context.Background()); err == nil && got == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("query %q: last value %v, %v; want %v", p.query, got, err, want)
}

func TestPrometheusReal(t *testing.T) {
	reg := prometheus.NewRegistry()
	depth := prometheus.NewGauge(prometheus.GaugeOpts{Name: "trg_queue_depth", Help: "test queue depth"})
	multi := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trg_multi", Help: "two series"}, []string{"shard"})
	reg.MustRegister(depth, multi)
	depth.Set(6)
	multi.WithLabelValues("a").Set(1)
	multi.WithLabelValues("b").Set(2)
	exporter := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer exporter.Close()
	server := startPrometheus(t, strings.TrimPrefix(exporter.URL, "http://"))

	live := promTrigger(t, server, "sum(trg_queue_depth)")
	waitValue(t, live, 6)

	t.Run("scalar query", func(t *testing.T) {
		v, err := promTrigger(t, server, "scalar(trg_queue_depth) * 2").Value(context.Background())
		if err != nil || v != 12 {
			t.Fatalf("= %v, %v; want 12", v, err)
		}
	})
	t.Run("more than one series is an error", func(t *testing.T) {
		waitValue(t, promTrigger(t, server, `trg_multi{shard="b"}`), 2)
		_, err := promTrigger(t, server, "trg_multi").Value(context.Background())
		if err == nil || !strings.Contains(err.Error(), "2 series") {
			t.Fatalf("err = %v, want a 2-series error", err)
		}
	})
	t.Run("empty result reads 0 (ignoreNullValues)", func(t *testing.T) {
		v, err := promTrigger(t, server, "trg_no_such_metric").Value(context.Background())
		if err != nil || v != 0 {
			t.Fatalf("= %v, %v; want 0, nil", v, err)
		}
		p := promTrigger(t, server, "trg_no_such_metric")
		p.ignoreNull = false
		if _, err := p.Value(context.Background()); err == nil || !strings.Contains(err.Error(), "no series") {
			t.Fatalf("without ignoreNull: err = %v", err)
		}
	})
	t.Run("bad PromQL is the server's error", func(t *testing.T) {
		_, err := promTrigger(t, server, "sum(").Value(context.Background())
		if err == nil || !strings.Contains(err.Error(), "bad_data") {
			t.Fatalf("err = %v, want bad_data", err)
		}
	})

	t.Run("a scaler fed by it scales", func(t *testing.T) {
		src, clk := newFakes()
		spec := &manifest.AutoScalingSpec{
			MinReplicaCount: ptr[int32](1), MaxReplicaCount: ptr[int32](10), PollingInterval: ptr[int32](30),
			PrometheusTrigger: &manifest.PrometheusTrigger{ServerAddress: server, Query: "sum(trg_queue_depth)", TargetValue: ptr(2.0)},
		}
		cfg, trs, err := Build(spec, Env{Endpoint: "ep", Source: src, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		s, err := autoscale.New(cfg, clk, trs...)
		if err != nil {
			t.Fatal(err)
		}
		reconcile := func(current int) autoscale.Decision {
			t.Helper()
			clk.Step(cfg.PollingInterval)
			d, err := s.Reconcile(context.Background(), current)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			return d
		}
		if d := reconcile(1); d.Desired != 3 || d.Inputs[0].Value != 6 {
			t.Fatalf("queue 6, target 2: %+v; want 3", d)
		}
		depth.Set(20)
		waitValue(t, live, 20)
		// ceil(20/2) = 10, but the default scale-up policy allows +4 pods
		// (or +100%) per 15 s: 3 → 7, then 7 → 10.
		if d := reconcile(3); d.Desired != 7 || d.Reason != autoscale.ReasonScaleUpLimit {
			t.Fatalf("queue 20 from 3: %d (%s), want 7 (ScaleUpLimit)", d.Desired, d.Reason)
		}
		if d := reconcile(7); d.Desired != 10 {
			t.Fatalf("queue 20 from 7: %d (%s), want 10", d.Desired, d.Reason)
		}
		depth.Set(0)
		waitValue(t, live, 0)
		// Scale-down waits out the 300 s stabilisation window, then goes to min.
		var d autoscale.Decision
		for range 9 { // 270 s
			if d = reconcile(10); d.Desired != 10 {
				t.Fatalf("scaled down inside the stabilisation window: %+v", d)
			}
		}
		for range 2 {
			d = reconcile(10)
		}
		if d.Desired != 1 {
			t.Fatalf("after the window: %d (%s), want 1", d.Desired, d.Reason)
		}
	})
}
