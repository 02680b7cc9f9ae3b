package openai_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/engine"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/gateway/openai"
)

var update = flag.Bool("update", false, "rewrite golden files")

// front is an in-process gateway with the OpenAI handler on a real listener.
type front struct {
	gw  *gateway.Gateway
	reg *prometheus.Registry
	srv *httptest.Server
}

func newFront(t *testing.T, routes ...gateway.Route) *front {
	t.Helper()
	reg := prometheus.NewRegistry()
	gw := gateway.New(gateway.Options{Seed: 1, Registerer: reg, RetryAfter: 2 * time.Second})
	for _, r := range routes {
		gw.SetRoute(r)
	}
	srv := httptest.NewServer(openai.NewHandler(gw, openai.Options{MaxBodyBytes: 1 << 16}))
	t.Cleanup(srv.Close)
	return &front{gw: gw, reg: reg, srv: srv}
}

func route(name string, addrs ...string) gateway.Route {
	v := gateway.VariantRoute{Name: "AllTraffic", Weight: 1, RoutingStrategy: "roundrobin"}
	for i, a := range addrs {
		v.Backends = append(v.Backends, gateway.Backend{ID: fmt.Sprintf("%s-%d", name, i), Addr: a})
	}
	return gateway.Route{Endpoint: name, Variants: []gateway.VariantRoute{v}}
}

func fake(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func post(t *testing.T, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Fatalf("body differs from %s:\ngot:  %s\nwant: %s", path, got, want)
	}
}

func TestErrorsGolden(t *testing.T) {
	ok := fake(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{}`) })
	f := newFront(t, route("llama", ok), gateway.Route{Endpoint: "expired", Unavailable: "capacity reservation expired",
		Variants: []gateway.VariantRoute{{Name: "A", Weight: 1, Backends: []gateway.Backend{{ID: "x", Addr: ok}}}}},
		gateway.Route{Endpoint: "empty", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1}}},
		gateway.Route{Endpoint: "cold", Activator: nopActivator{}, HoldTimeout: time.Millisecond, Variants: []gateway.VariantRoute{{Name: "A", Weight: 1}}})
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
	}{
		{name: "unknown_model", path: "/v1/chat/completions", body: `{"model":"nope","messages":[]}`, status: 404},
		{name: "missing_model", path: "/v1/completions", body: `{"prompt":"x"}`, status: 400},
		{name: "bad_json", path: "/v1/completions", body: `{"model":`, status: 400},
		{name: "too_large", path: "/v1/completions", body: `{"model":"llama","prompt":"` + strings.Repeat("x", 1<<16) + `"}`, status: 413},
		{name: "unavailable", path: "/v1/completions", body: `{"model":"expired","prompt":"x"}`, status: 503},
		{name: "no_backend", path: "/v1/completions", body: `{"model":"empty","prompt":"x"}`, status: 503},
		{name: "activation_timeout", path: "/v1/completions", body: `{"model":"cold","prompt":"x"}`, status: 503},
		{name: "unknown_path", path: "/v1/embeddings", body: `{}`, status: 404},
		{name: "string_temperature", path: "/v1/chat/completions", body: `{"model":"llama","messages":[],"temperature":"0.7"}`, status: 400},
		{name: "max_tokens_range", path: "/v1/completions", body: `{"model":"llama","prompt":"x","max_tokens":0}`, status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, f.srv.URL+tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			if resp.Header.Get(openai.RequestIDHeader) == "" {
				t.Fatal("no request id on an error")
			}
			golden(t, "error_"+tt.name, body)
		})
	}
}

func TestForwardingRewritesModelAndEchoesRequestID(t *testing.T) {
	var gotBody, gotID, gotAuth, gotSession atomic.Value
	be := fake(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
		gotID.Store(r.Header.Get("X-Request-Id"))
		gotAuth.Store(r.Header.Get("Authorization"))
		if s := r.Header.Get("X-Session-Id"); s != "" {
			gotSession.Store(s)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`)
	})
	f := newFront(t, route("my-endpoint", be))
	tests := []struct {
		name   string
		hdr    []string
		wantID func(string) bool
	}{
		{name: "given id is kept", hdr: []string{"X-Request-Id", "req-42", "Authorization", "Bearer s3cret", "X-Session-Id", "s1"}, wantID: func(s string) bool { return s == "req-42" }},
		{name: "missing id is generated", wantID: func(s string) bool { return len(s) >= 16 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, f.srv.URL+"/v1/chat/completions", `{"model":"my-endpoint","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`, tt.hdr...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			echoed := resp.Header.Get("X-Request-Id")
			if !tt.wantID(echoed) || gotID.Load() != echoed {
				t.Fatalf("request id echoed %q, upstream saw %q", echoed, gotID.Load())
			}
			if got := gotBody.Load().(string); got != `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}` {
				t.Fatalf("forwarded body %s", got)
			}
			if gotAuth.Load() != "" {
				t.Fatal("caller credentials forwarded to the engine")
			}
		})
	}
	if gotSession.Load() != "s1" {
		t.Fatalf("session header not forwarded")
	}
	want := `
# HELP capstan_gateway_tokens_total Tokens by direction (in: prompt, out: completion) from the responses' usage.
# TYPE capstan_gateway_tokens_total counter
capstan_gateway_tokens_total{direction="in",endpoint="my-endpoint",variant="AllTraffic"} 14
capstan_gateway_tokens_total{direction="out",endpoint="my-endpoint",variant="AllTraffic"} 6
`
	if err := promtest.GatherAndCompare(f.reg, strings.NewReader(want), "capstan_gateway_tokens_total"); err != nil {
		t.Fatal(err)
	}
	if n := promtest.CollectAndCount(f.reg, "capstan_gateway_time_to_first_byte_seconds"); n != 1 {
		t.Fatalf("ttfb series %d", n)
	}
}

func TestModelsLists(t *testing.T) {
	be := fake(t, func(w http.ResponseWriter, r *http.Request) {})
	f := newFront(t, route("b-model", be), route("a-model", be))
	resp, err := http.Get(f.srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "list" || len(out.Data) != 2 || out.Data[0].ID != "a-model" || out.Data[1].ID != "b-model" || out.Data[0].Object != "model" {
		t.Fatalf("models %+v", out)
	}
}

func TestQueueFullGets429(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	be := fake(t, func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		<-release
		_, _ = io.WriteString(w, `{}`)
	})
	r := route("q", be)
	r.MaxConcurrency, r.MaxQueue = 1, 1
	f := newFront(t, r)
	defer close(release)
	done := make(chan int, 2)
	for i := 0; i < 2; i++ { // one in flight, one queued
		go func() {
			resp, _ := post(t, f.srv.URL+"/v1/completions", `{"model":"q","prompt":"x"}`)
			done <- resp.StatusCode
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for promtest.ToFloat64(gaugeVec(t, f.reg, "capstan_gateway_queued_requests")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("second request never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, body := post(t, f.srv.URL+"/v1/completions", `{"model":"q","prompt":"x"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("status %d retry-after %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	golden(t, "error_queue_full", body)
	release <- struct{}{}
	release <- struct{}{}
	for i := 0; i < 2; i++ {
		if s := <-done; s != 200 {
			t.Fatalf("admitted request got %d", s)
		}
	}
	if started.Load() != 2 {
		t.Fatalf("backend saw %d requests", started.Load())
	}
}

// gaugeVec sums a gauge family from the registry, for polling.
func gaugeVec(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, _ := reg.Gather()
		v := 0.0
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "sum", nil, nil), prometheus.GaugeValue, v)
	})
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	cancelled := make(chan struct{})
	be := fake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	f := newFront(t, route("s", be))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/v1/completions", strings.NewReader(`{"model":"s","prompt":"x","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil { // the first chunk arrived unbuffered
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream request not cancelled after the client left")
	}
}

type nopActivator struct{}

func (nopActivator) Activate(string) {}

func TestActivationOverflowGets503(t *testing.T) {
	be := fake(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{}`) })
	cold := gateway.Route{Endpoint: "cold", Activator: nopActivator{}, MaxHeld: 1,
		Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1}}}
	f := newFront(t, cold)
	done := make(chan int, 1)
	go func() {
		resp, _ := post(t, f.srv.URL+"/v1/completions", `{"model":"cold","prompt":"x"}`)
		done <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for promtest.ToFloat64(gaugeVec(t, f.reg, "capstan_gateway_held_requests")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("first request never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, body := post(t, f.srv.URL+"/v1/completions", `{"model":"cold","prompt":"x"}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d retry-after %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	golden(t, "error_activation_overflow", body)
	f.gw.SetRoute(route("cold", be))
	if s := <-done; s != 200 {
		t.Fatalf("held request got %d after the backend arrived", s)
	}
}

// The door's default body limit is the engine's: a body the engine would
// refuse is a 413 in OpenAI's shape here, not routed (it used to allow 16
// MiB against the engine's 8).
func TestDefaultBodyLimitIsTheEngines(t *testing.T) {
	srv := httptest.NewServer(openai.NewHandler(gateway.New(gateway.Options{}), openai.Options{}))
	t.Cleanup(srv.Close)
	prefix := `{"model":"nope","prompt":"`
	for _, tc := range []struct {
		size   int
		status int
	}{{engine.MaxRequestBytes, http.StatusNotFound}, {engine.MaxRequestBytes + 1, http.StatusRequestEntityTooLarge}} {
		body := prefix + strings.Repeat("x", tc.size-len(prefix)-2) + `"}`
		resp, out := post(t, srv.URL+"/v1/completions", body)
		var e struct {
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != tc.status || json.Unmarshal([]byte(out), &e) != nil || e.Error.Type != "invalid_request_error" {
			t.Fatalf("%d-byte body: %d %.200s", tc.size, resp.StatusCode, out)
		}
	}
}
