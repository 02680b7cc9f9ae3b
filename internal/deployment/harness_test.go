package deployment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/metricstore"
	"github.com/capstan-dev/capstan/internal/modelsource"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// fakeModels is a hand-written ModelFetcher: it returns a folder named after
// the source, the catalog id of a JumpStart model, or the error set.
type fakeModels struct {
	mu    sync.Mutex
	err   error
	dir   string // the folder Fetch returns, when set
	calls int
}

var _ ModelFetcher = (*fakeModels)(nil)

func (f *fakeModels) Fetch(_ context.Context, src modelsource.Source) (modelsource.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return modelsource.Result{}, f.err
	}
	res := modelsource.Result{Dir: filepath.Join("/models", strings.ReplaceAll(src.String(), "://", "/")), Files: 2, Bytes: 100}
	if f.dir != "" {
		res.Dir = f.dir
	}
	if src.Type == modelsource.TypeJumpStart {
		res.Model = src.JumpStartModelID
	}
	return res, nil
}

func (f *fakeModels) Check(modelsource.Source) error { return nil }

func (f *fakeModels) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// registry is the real endpoint service on the harness's store, recording
// the registrations the controller asks for (to check what it wrote, and
// that a steady reconcile asks for none).
type registry struct {
	*endpoint.Service
	mu   sync.Mutex
	puts []endpoint.ManagedEndpoint
}

var _ EndpointRegistry = (*registry)(nil)

func (r *registry) PutManaged(ctx context.Context, m endpoint.ManagedEndpoint) error {
	r.mu.Lock()
	r.puts = append(r.puts, m)
	r.mu.Unlock()
	return r.Service.PutManaged(ctx, m)
}

func (r *registry) putCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.puts)
}

// get is the endpoint record name has in the store, if any.
func (r *registry) get(t testing.TB, name string) (endpoint.Endpoint, bool) {
	t.Helper()
	ep, err := r.GetEndpoint(context.Background(), name)
	if endpoint.IsNotFound(err) {
		return endpoint.Endpoint{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return ep, true
}

// testWriter sends log lines to t.Log, so they show only for failing tests.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func testLogger(t testing.TB) *slog.Logger {
	if _, ok := t.(*testing.B); ok {
		return slog.New(slog.DiscardHandler) // benchmarks print every log line
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type harness struct {
	t      testing.TB
	clk    *clock.Fake
	store  *store.Store
	rt     *fake.Runtime
	cl     *cluster.Cluster
	gw     *gateway.Gateway
	models *fakeModels
	reg    *registry
	prom   *prometheus.Registry
	svc    *Service
}

type harnessOpt func(*Options, *harnessConfig)

type harnessConfig struct {
	groups []cluster.InstanceGroup
	manual bool
}

func withGroups(g ...cluster.InstanceGroup) harnessOpt {
	return func(_ *Options, hc *harnessConfig) { hc.groups = g }
}

// withTriggers makes every deployment's scaler read trigs instead of the
// triggers its spec names; the scaler's config still comes from the spec
// (triggers.Build). seen, when not nil, receives the Env the controller
// passed.
func withTriggers(seen *triggers.Env, trigs ...autoscale.Trigger) harnessOpt {
	return func(o *Options, _ *harnessConfig) {
		o.Triggers = func(spec *manifest.AutoScalingSpec, env triggers.Env) (autoscale.Config, []autoscale.Trigger, error) {
			if seen != nil {
				*seen = env
			}
			cfg, _, err := triggers.Build(spec, env)
			return cfg, trigs, err
		}
	}
}

func manualRuntime() harnessOpt { return func(_ *Options, hc *harnessConfig) { hc.manual = true } }

func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	st, err := store.Open(filepath.Join(t.TempDir(), "capstan.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hc := harnessConfig{groups: cluster.DefaultInstanceGroups()}
	o := Options{Store: st, Clock: clk, GatewayURL: "http://127.0.0.1:8080", Logger: testLogger(t)}
	for _, f := range opts {
		f(&o, &hc)
	}
	var rtOpts []fake.Option
	rtOpts = append(rtOpts, fake.WithClock(clk))
	if hc.manual {
		rtOpts = append(rtOpts, fake.Manual())
	}
	rt := fake.New(rtOpts...)
	cl, err := cluster.New(catalog.Default(), hc.groups)
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheus.NewRegistry()
	gw := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry(), MetricStore: metricstore.New(clk, metricstore.Options{})})
	models := &fakeModels{}
	reg := &registry{Service: endpoint.NewService(st, nil, nil, clk, testLogger(t))}
	o.Cluster, o.Gateway, o.Registerer = cl, gw, prom
	o.Engine = serving.New(serving.Options{Runtime: rt, Router: gw, Logger: o.Logger, EngineArgs: []string{"--time-scale=0"}})
	if o.Models == nil {
		o.Models = models
	}
	if o.Endpoints == nil {
		o.Endpoints = reg
	}
	svc, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, clk: clk, store: st, rt: rt, cl: cl, gw: gw, models: models, reg: reg, prom: prom, svc: svc}
}

func (h *harness) apply(doc string) manifest.ApplyResult {
	h.t.Helper()
	objs, err := manifest.Load([]byte(doc))
	if err != nil {
		h.t.Fatalf("load manifest: %v", err)
	}
	if len(objs) != 1 {
		h.t.Fatalf("%d objects, want 1", len(objs))
	}
	res, err := h.svc.Apply(context.Background(), objs[0])
	if err != nil {
		h.t.Fatalf("apply: %v", err)
	}
	return res
}

// reconcile runs the controller for k until nothing changes any more (a
// few passes: status writes, retirements and starts settle in steps).
func (h *harness) reconcile(k string) {
	h.t.Helper()
	for i := 0; i < 4; i++ {
		if err := h.svc.Controller().Reconcile(context.Background(), k); err != nil {
			h.t.Fatalf("reconcile %s: %v", k, err)
		}
	}
}

func (h *harness) get(kind, name string) manifest.Object {
	h.t.Helper()
	o, err := h.svc.Get(context.Background(), kind, "default", name)
	if err != nil {
		h.t.Fatalf("get %s %s: %v", kind, name, err)
	}
	return o
}

func (h *harness) running(prefix string) []string {
	var out []string
	for _, id := range h.rt.Running() {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	return out
}

func (h *harness) backends(route string) []string {
	r, ok := h.gw.Route(route)
	if !ok {
		return nil
	}
	var ids []string
	for _, v := range r.Variants {
		for _, b := range v.Backends {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

func condition(o manifest.Object, typ string) manifest.Condition {
	for _, c := range o.GetStatus().Conditions {
		if c.Type == typ {
			return c
		}
	}
	return manifest.Condition{}
}

func (h *harness) eventReasons(kind, name string) []string {
	evs, err := h.svc.Events(context.Background(), kind, "default", name)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return out
}

// chatBackend is a stand-in model server answering every request with a
// small OpenAI chat completion.
func chatBackend(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

var errNotThere = errors.New("bucket models has no prefix llama")

func iec(name string, replicas int, gpus int, extra string) string {
	return fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: %s, namespace: default}
spec:
  modelName: Llama-3.1-8B-Instruct
  instanceType: ml.g5.24xlarge
  replicas: %d
  invocationEndpoint: v1/chat/completions
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: llama-3.1-8b-instruct}
  worker:
    image: lmcache/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "6", memory: 30Gi, nvidia.com/gpu: "%d"}, limits: {nvidia.com/gpu: "%d"}}
%s`, name, replicas, gpus, gpus, extra)
}

func jsm(name, endpointName, extra string) string {
	return fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: %s}
spec:
  sageMakerEndpoint: {name: %q}
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.12xlarge}
%s`, name, endpointName, extra)
}
