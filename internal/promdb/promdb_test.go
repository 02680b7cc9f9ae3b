package promdb

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/runtime"
)

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

// replicas is a fixed replica list (the runtime's seam).
type replicas []runtime.Replica

func (r replicas) List() []runtime.Replica { return r }

// apiResponse is the API's JSON, decoded.
type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func get(t *testing.T, srv *httptest.Server, path string, params url.Values) (int, apiResponse) {
	t.Helper()
	resp, err := http.Get(srv.URL + Path + "api/v1/" + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: decode: %v", path, err)
	}
	return resp.StatusCode, out
}

// instant runs query at the clock's now and returns each series' value by
// the given label's value.
func instant(t *testing.T, srv *httptest.Server, query, by string) map[string]string {
	t.Helper()
	code, out := get(t, srv, "query", url.Values{"query": {query}})
	if code != 200 || out.Status != "success" {
		t.Fatalf("%s: HTTP %d %s %s", query, code, out.ErrorType, out.Error)
	}
	got := map[string]string{}
	for _, r := range out.Data.Result {
		got[r.Metric[by]] = r.Value[1].(string)
	}
	return got
}

func TestScrapeAndQuery(t *testing.T) {
	clk := clock.NewFake(t0)
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capstan_gateway_requests_total"}, []string{"endpoint"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "capstan_gateway_request_duration_seconds", Buckets: []float64{0.1, 1}}, []string{"endpoint"})
	reg.MustRegister(reqs, lat)
	// A llama.cpp replica's page: its series get the catalog's (vLLM's)
	// names and discovery's labels.
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer key-1" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 3\n")
	}))
	defer engine.Close()
	reps := replicas{{Spec: runtime.ReplicaSpec{ID: "r1", Engine: "llamacpp", Labels: map[string]string{"endpoint": "ep", "variant": "AllTraffic"}},
		Addr: strings.TrimPrefix(engine.URL, "http://"), APIKey: "key-1", State: runtime.StateHealthy}}

	// The gateway reads the replica's page (as in capstan serve, where it
	// is the one reader of engine metrics); the store takes its reads.
	gw := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry()})
	gw.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1,
		Backends: []gateway.Backend{{ID: "r1", Addr: reps[0].Addr, Engine: "llamacpp", APIKey: "key-1"}}}}})
	reads := func(id string) (ReplicaRead, bool) {
		rd, ok := gw.LastEngineRead(id)
		return ReplicaRead{Families: rd.Stats.Families, Took: rd.Took, Err: rd.Err}, ok
	}

	db := NewDB(time.Hour, 100)
	s := &Scraper{DB: db, Clock: clk, Interval: time.Second, Server: reg, Instance: "127.0.0.1:8080", Replicas: reps, Reads: reads}
	srv := httptest.NewServer(NewAPI(db, clk).Handler())
	defer srv.Close()

	// 10 requests a second for a minute, each taking 0.5 s.
	for i := 0; i < 60; i++ {
		reqs.WithLabelValues("ep").Add(10)
		for k := 0; k < 10; k++ {
			lat.WithLabelValues("ep").Observe(0.5)
		}
		gw.ScrapeOnce(context.Background())
		s.ScrapeOnce(context.Background())
		clk.Step(time.Second)
	}
	if got := instant(t, srv, `sum by (endpoint) (rate(capstan_gateway_requests_total[10s]))`, "endpoint"); got["ep"] != "10" {
		t.Errorf("rate = %v, want ep: 10", got)
	}
	if got := instant(t, srv, `histogram_quantile(0.5, sum by (le, endpoint) (rate(capstan_gateway_request_duration_seconds_bucket[10s])))`, "endpoint"); got["ep"] != "0.55" {
		t.Errorf("p50 = %v, want ep: 0.55 (the middle of the 0.1–1 bucket)", got)
	}
	if got := instant(t, srv, `vllm:num_requests_running{job="capstan-replicas",endpoint="ep",variant="AllTraffic",replica="r1",engine="llamacpp"}`, "endpoint"); got["ep"] != "3" {
		t.Errorf("renamed replica gauge = %v, want ep: 3", got)
	}
	if got := instant(t, srv, `up`, "job"); got["capstan"] != "1" || got["capstan-replicas"] != "1" {
		t.Errorf("up = %v, want 1 for both jobs", got)
	}
	// The replica's page has one sample; the server's a counter and a
	// histogram: 2 buckets, +Inf (added), _sum and _count.
	if got := instant(t, srv, `scrape_samples_scraped`, "job"); got["capstan"] != "6" || got["capstan-replicas"] != "1" {
		t.Errorf("scrape_samples_scraped = %v, want capstan 6, capstan-replicas 1", got)
	}

	// A range query: one point per 10 s over the last minute.
	now := clk.Now()
	code, out := get(t, srv, "query_range", url.Values{"query": {`sum(rate(capstan_gateway_requests_total[5s]))`},
		"start": {fmt.Sprint(now.Add(-50 * time.Second).Unix())}, "end": {now.Format(time.RFC3339)}, "step": {"10s"}})
	if code != 200 || out.Data.ResultType != "matrix" || len(out.Data.Result) != 1 || len(out.Data.Result[0].Values) != 6 {
		t.Fatalf("query_range: HTTP %d %+v", code, out)
	}
	for _, p := range out.Data.Result[0].Values {
		if v, err := strconv.ParseFloat(p[1].(string), 64); err != nil || math.Abs(v-10) > 1e-9 {
			t.Errorf("query_range point %v, want 10", p)
		}
	}

	// The gateway's read fails (the engine is gone): the target is down
	// and its series end.
	engine.Close()
	gw.ScrapeOnce(context.Background())
	s.ScrapeOnce(context.Background())
	clk.Step(time.Second)
	if got := instant(t, srv, `up`, "job"); got["capstan-replicas"] != "0" {
		t.Errorf("up = %v after a failed read, want capstan-replicas 0", got)
	}
	if got := instant(t, srv, `vllm:num_requests_running`, "endpoint"); len(got) != 0 {
		t.Errorf("a down replica's series = %v, want none", got)
	}

	// The replica goes away: its series end at the next scrape (staleness
	// marker), instead of lingering for five minutes.
	s.Replicas = replicas{}
	s.ScrapeOnce(context.Background())
	clk.Step(time.Second)
	if got := instant(t, srv, `vllm:num_requests_running`, "endpoint"); len(got) != 0 {
		t.Errorf("a gone replica's series = %v, want none", got)
	}
	// A label set the registry no longer exports ends the same way.
	reqs.DeleteLabelValues("ep")
	s.ScrapeOnce(context.Background())
	clk.Step(time.Second)
	if got := instant(t, srv, `capstan_gateway_requests_total`, "endpoint"); len(got) != 0 {
		t.Errorf("a deleted series = %v, want none", got)
	}

	// Label values, as Grafana's label_values() variables read them.
	code, out2 := getStrings(t, srv, "label/endpoint/values", url.Values{"match[]": {"capstan_gateway_request_duration_seconds_count"}})
	if code != 200 || strings.Join(out2, ",") != "ep" {
		t.Errorf("label values: HTTP %d %v", code, out2)
	}

	// Retention: after an hour and a bit, everything is gone but the
	// series still exported.
	clk.Step(2 * time.Hour)
	db.Prune(clk.Now())
	if n := db.Series(); n != 0 {
		t.Errorf("after retention %d series, want 0", n)
	}
}

func getStrings(t *testing.T, srv *httptest.Server, path string, params url.Values) (int, []string) {
	t.Helper()
	resp, err := http.Get(srv.URL + Path + "api/v1/" + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out.Data
}

func TestSeriesLimit(t *testing.T) {
	db := NewDB(time.Hour, 2)
	for i, name := range []string{"a", "b", "c"} {
		ok, err := db.Append(seriesLabels(name, nil, nil), int64(i), 1)
		if i < 2 && (!ok || err != nil) {
			t.Fatalf("%s: ok=%v err=%v", name, ok, err)
		}
		if i == 2 && err != ErrTooManySeries {
			t.Fatalf("third series: err=%v, want ErrTooManySeries", err)
		}
	}
	// Out of order: dropped, not stored.
	if ok, _ := db.Append(seriesLabels("a", nil, nil), -5, 1); ok {
		t.Error("an out-of-order sample was appended")
	}
}

func TestBadInput(t *testing.T) {
	clk := clock.NewFake(t0)
	srv := httptest.NewServer(NewAPI(NewDB(0, 0), clk).Handler())
	defer srv.Close()
	now := fmt.Sprint(t0.Unix())
	for _, tc := range []struct {
		name, path string
		params     url.Values
		code       int
		typ, msg   string
	}{
		{"no query", "query", nil, 400, "bad_data", `"query": missing`},
		{"parse error", "query", url.Values{"query": {"sum(("}}, 400, "bad_data", "parse error"},
		{"bad time", "query", url.Values{"query": {"up"}, "time": {"yesterday"}}, 400, "bad_data", `cannot parse "yesterday"`},
		{"time out of range", "query", url.Values{"query": {"up"}, "time": {"1e300"}}, 400, "bad_data", "out of range"},
		{"no step", "query_range", url.Values{"query": {"up"}, "start": {now}, "end": {now}}, 400, "bad_data", `"step": missing`},
		{"zero step", "query_range", url.Values{"query": {"up"}, "start": {now}, "end": {now}, "step": {"0"}}, 400, "bad_data", "positive"},
		{"end before start", "query_range", url.Values{"query": {"up"}, "start": {now}, "end": {"0"}, "step": {"1"}}, 400, "bad_data", "before start"},
		{"too many points", "query_range", url.Values{"query": {"up"}, "start": {"0"}, "end": {now}, "step": {"1s"}}, 400, "bad_data", "11000 points"},
		{"huge query", "query", url.Values{"query": {strings.Repeat("a", maxQueryBytes+1)}}, 400, "bad_data", "at most 65536"},
		{"series without match", "series", nil, 400, "bad_data", "no match[]"},
		{"bad selector", "series", url.Values{"match[]": {"{"}}, 400, "bad_data", "match[]"},
		{"bad label name", "label/%FF/values", nil, 400, "bad_data", "invalid label name"},
		{"runtime error", "query", url.Values{"query": {`label_replace(up, "x", "$1", "y", "(")`}}, 422, "execution", "invalid regular expression"},
		{"unknown endpoint", "rules", nil, 404, "not_found", "read API"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := get(t, srv, tc.path, tc.params)
			if code != tc.code || out.Status != "error" || out.ErrorType != tc.typ || !strings.Contains(out.Error, tc.msg) {
				t.Errorf("HTTP %d %s %q; want %d %s containing %q", code, out.ErrorType, out.Error, tc.code, tc.typ, tc.msg)
			}
		})
	}
}

// A scrape past the series limit keeps the series it has, drops the new
// ones and says so once, not on every scrape.
func TestScrapePastSeriesLimit(t *testing.T) {
	clk := clock.NewFake(t0)
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g"}, []string{"i"})
	reg.MustRegister(g)
	for i := 0; i < 5; i++ {
		g.WithLabelValues(fmt.Sprint(i)).Set(1)
	}
	var logs strings.Builder
	db := NewDB(time.Hour, 3)
	s := &Scraper{DB: db, Clock: clk, Server: reg, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	for i := 0; i < 3; i++ {
		s.ScrapeOnce(context.Background())
		clk.Step(time.Second)
	}
	if n := db.Series(); n != 3 {
		t.Errorf("%d series, want the limit, 3", n)
	}
	if n := strings.Count(logs.String(), "series limit reached"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}

// A cluster whose observability add-on is off keeps none of its series;
// turned off later, its series end at the next scrape.
func TestSkipClusters(t *testing.T) {
	clk := clock.NewFake(t0)
	reg := prometheus.NewRegistry()
	nodes := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capstan_cluster_nodes"}, []string{"cluster"})
	reg.MustRegister(nodes)
	nodes.WithLabelValues("a").Set(2)
	nodes.WithLabelValues("b").Set(3)
	off := map[string]bool{}
	db := NewDB(time.Hour, 100)
	s := &Scraper{DB: db, Clock: clk, Server: reg, SkipClusters: func() map[string]bool { return off }}
	srv := httptest.NewServer(NewAPI(db, clk).Handler())
	defer srv.Close()
	s.ScrapeOnce(context.Background())
	clk.Step(time.Second)
	if got := instant(t, srv, `capstan_cluster_nodes`, "cluster"); len(got) != 2 {
		t.Fatalf("both clusters on: %v", got)
	}
	off["b"] = true
	s.ScrapeOnce(context.Background())
	clk.Step(time.Second)
	if got := instant(t, srv, `capstan_cluster_nodes`, "cluster"); len(got) != 1 || got["a"] != "2" {
		t.Errorf("b off: %v, want only a", got)
	}
}
