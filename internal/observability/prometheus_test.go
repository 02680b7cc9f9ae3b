package observability

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// prometheusBin is Debian's prometheus; under CI its absence is a failure.
func prometheusBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus not found (apt-get install prometheus); CI must run this test")
		}
		t.Skip("prometheus not installed (apt-get install prometheus); CI installs it")
	}
	return bin
}

// query runs an instant query and returns its vector.
func query(t *testing.T, base, q string) []struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
} {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Status != "success" {
		t.Fatalf("query %s: %v %+v", q, err, out)
	}
	return out.Data.Result
}

// A real Prometheus started from the generated setup scrapes a server that
// wants an admin token (its /metrics and its discovery), finds the replica
// discovery lists and scrapes it with the discovery's labels, through the
// server's proxy (each replica answers only its own API key), and loads
// capstan's alert rules; Stop ends it.
func TestStartRealPrometheus(t *testing.T) {
	bin := prometheusBin(t)
	const token = "admin-token-0123456789"

	replicaReg := prometheus.NewRegistry()
	running := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "running"})
	running.Set(3)
	replicaReg.MustRegister(running)
	// keyed serves h only to requests that bear key, as an engine given
	// its API key does.
	keyed := func(key string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+key {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	replica := httptest.NewServer(keyed("sim-key", promhttp.HandlerFor(replicaReg, promhttp.HandlerOpts{})))
	defer replica.Close()

	serverReg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_gateway_requests_total", Help: "r"}, []string{"endpoint", "variant", "status"})
	reqs.WithLabelValues("ep", "AllTraffic", "200").Add(7)
	serverReg.MustRegister(reqs)
	// A llama.cpp replica: its running gauge is renamed to the catalog's.
	llamaReg := prometheus.NewRegistry()
	processing := prometheus.NewGauge(prometheus.GaugeOpts{Name: "llamacpp:requests_processing", Help: "processing"})
	processing.Set(2)
	llamaReg.MustRegister(processing)
	llama := httptest.NewServer(keyed("llama-key", promhttp.HandlerFor(llamaReg, promhttp.HandlerOpts{})))
	defer llama.Close()
	replicas := list{{Spec: runtime.ReplicaSpec{ID: "ep.AllTraffic.gen1.0", Labels: map[string]string{"endpoint": "ep", "variant": "AllTraffic"}},
		State: runtime.StateHealthy, Addr: strings.TrimPrefix(replica.URL, "http://"), APIKey: "sim-key"},
		{Spec: runtime.ReplicaSpec{ID: "ll.AllTraffic.gen1.0", Engine: "llamacpp", Labels: map[string]string{"endpoint": "ll", "variant": "AllTraffic"}},
			State: runtime.StateHealthy, Addr: strings.TrimPrefix(llama.URL, "http://"), APIKey: "llama-key"}}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(serverReg, promhttp.HandlerOpts{}))
	mux.Handle(DiscoveryPath, TargetsHandler(replicas))
	mux.Handle(ReplicaMetricsPath, ReplicaMetricsHandler(replicas))
	var unauthorized atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			unauthorized.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	defer server.Close()

	dir := t.TempDir()
	cfg, err := Setup{Dir: dir, Server: server.URL, Token: token, ScrapeInterval: time.Second}.Write()
	if err != nil {
		t.Fatal(err)
	}
	log := &syncWriter{b: &strings.Builder{}}
	p, err := Start(StartOptions{Binary: bin, ConfigFile: cfg, DataDir: dir, Listen: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		srv := query(t, p.URL, `capstan_gateway_requests_total{job="capstan",endpoint="ep"}`)
		rep := query(t, p.URL, `vllm:num_requests_running{job="capstan-replicas",endpoint="ep",variant="AllTraffic",replica="ep.AllTraffic.gen1.0",engine="sim"}`)
		ll := query(t, p.URL, `vllm:num_requests_running{job="capstan-replicas",endpoint="ll",engine="llamacpp"}`)
		own := query(t, p.URL, `{__name__="llamacpp:requests_processing"}`)
		if len(srv) == 1 && srv[0].Value[1] == "7" && len(rep) == 1 && rep[0].Value[1] == "3" && len(ll) == 1 && ll[0].Value[1] == "2" && len(own) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scraped series: server %+v, replica %+v, llama.cpp replica %+v (under its own name: %+v) (unauthorized requests: %d)",
				srv, rep, ll, own, unauthorized.Load())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Errorf("%d requests came without the admin token", n)
	}

	resp, err := http.Get(p.URL + "/api/v1/rules?type=alert")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&rules)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Name)
		}
	}
	if !strings.Contains(strings.Join(names, ","), "CapstanTTFTBudgetBurnPage") || len(names) < 10 {
		t.Fatalf("loaded alert rules: %v", names)
	}

	p.Stop()
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if !strings.Contains(log.String(), "See you next time") {
		t.Errorf("prometheus did not shut down cleanly:\n%s", log.String())
	}
}

// A binary that is not there is a clear error, not a hang.
func TestStartMissingBinary(t *testing.T) {
	_, err := Start(StartOptions{Binary: "/no/such/prometheus", ConfigFile: "x", DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--prometheus") {
		t.Fatalf("err = %v", err)
	}
}

// A Prometheus that exits at once (bad config) ends WaitReady with its exit.
func TestWaitReadyReportsExit(t *testing.T) {
	bin := prometheusBin(t)
	dir := t.TempDir()
	cfg := dir + "/bad.yml"
	if err := os.WriteFile(cfg, []byte("scrape_configs: [{job_name: x, nope: 1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start(StartOptions{Binary: bin, ConfigFile: cfg, DataDir: dir, Listen: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("err = %v, want the process's exit", err)
	}
}

// syncWriter guards a builder the child's output is copied into.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
