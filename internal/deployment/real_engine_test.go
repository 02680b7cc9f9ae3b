package deployment

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/metricstore"
	"github.com/capstan-dev/capstan/internal/modelsource"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// exampleJSM is the JumpStartModel of examples.md without its MIG
// partition: the default pool's GPUs are whole.
const exampleJSM = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata:
  name: deepseek
spec:
  sageMakerEndpoint:
    name: deepseek
  model:
    modelHubName: SageMakerPublicHub
    modelId: deepseek-llm-r1-distill-qwen-1-5b
  server:
    instanceType: ml.p4d.24xlarge
`

// TestRealEngine applies the example manifest with the real local runtime,
// the real model source (JumpStart → generated config.json) and real engine
// processes, invokes it through the gateway, and deletes it.
func TestRealEngine(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	log := testLogger(t)
	rt, err := local.New(local.Options{Binary: bin, LogDir: t.TempDir(), Logger: log,
		HealthInterval: 20 * time.Millisecond, HealthyInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	st, err := store.Open(filepath.Join(t.TempDir(), "capstan.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cl, err := cluster.New(catalog.Default(), cluster.DefaultInstanceGroups())
	if err != nil {
		t.Fatal(err)
	}
	models, err := modelsource.New(modelsource.Options{CacheDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Options{Registerer: prometheus.NewRegistry(), Logger: log, MetricStore: metricstore.New(clock.Real{}, metricstore.Options{})})
	eng := serving.New(serving.Options{Runtime: rt, Router: gw, Logger: log, EngineArgs: []string{"--time-scale=0"}, DrainTimeout: 5 * time.Second})
	svc, err := New(Options{Store: st, Clock: clock.Real{}, Logger: log, Registerer: prometheus.NewRegistry(),
		Engine: eng, Cluster: cl, Gateway: gw, Models: models,
		Resync: 100 * time.Millisecond, GatewayURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	objs, err := manifest.Load([]byte(exampleJSM))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Apply(ctx, objs[0]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		o, err := svc.Get(ctx, manifest.KindJumpStartModel, "default", "deepseek")
		if err != nil {
			t.Fatal(err)
		}
		if o.GetStatus().State == manifest.StateDeploymentComplete {
			break
		}
		if o.GetStatus().State == manifest.StateDeploymentFailed || time.Now().After(deadline) {
			t.Fatalf("deployment did not complete: %+v", o.GetStatus())
		}
		time.Sleep(20 * time.Millisecond)
	}
	reps := rt.List()
	if len(reps) != 1 || reps[0].Spec.TensorParallel != 8 || reps[0].Spec.GPU != "a100-40gb" {
		t.Fatalf("replicas %+v", reps)
	}
	if reps[0].Spec.ModelDir == "" {
		t.Fatalf("replica spec %+v lacks the fetched model folder", reps[0].Spec)
	}

	res, err := gw.Invoke(ctx, gateway.Invocation{Endpoint: "deepseek", Path: "/v1/chat/completions",
		Body: []byte(`{"model":"deepseek","messages":[{"role":"user","content":"Say hello"}],"max_tokens":4}`)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Response.Body)
	res.Response.Body.Close()
	if res.Response.StatusCode != 200 || !strings.Contains(string(body), `"chat.completion"`) {
		t.Fatalf("invoke: %d %s", res.Response.StatusCode, body)
	}

	if err := svc.Delete(ctx, manifest.KindJumpStartModel, "default", "deepseek"); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := svc.Get(ctx, manifest.KindJumpStartModel, "default", "deepseek")
		if errors.Is(err, manifest.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not deleted: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range rt.List() {
		if r.State != "Stopped" {
			t.Fatalf("replica %s still %s after delete", r.Spec.ID, r.State)
		}
	}
}
