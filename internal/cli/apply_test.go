package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// cliEnv is a manifests API server (the real handler over the real Store,
// deployment.Service, as capstan serve wires it: a bbolt store in a temp
// dir, the fake runtime, the default cluster) and a way to run CLI commands
// against it. Nothing runs the controller; tests that want the status it
// writes call reconcile, so every status they print is the controller's.
type cliEnv struct {
	svc *deployment.Service
	rt  *fake.Runtime
	gw  *gateway.Gateway
	clk *clock.Fake
	srv *httptest.Server
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	clk := clock.NewFake(t0)
	st, err := store.Open(filepath.Join(t.TempDir(), "capstan.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cl, err := cluster.New(catalog.Default(), cluster.DefaultInstanceGroups())
	if err != nil {
		t.Fatal(err)
	}
	// And one partitioned node each for the published MIG examples: an
	// A100 p4d cut 7g.40gb and an H200 p5en cut 3g.71gb + 4g.71gb.
	for _, m := range []struct{ name, typ, layout string }{
		{"p4d-mig-0", "ml.p4d.24xlarge", "all-7g.40gb"}, {"p5en-mig-0", "ml.p5en.48xlarge", "mixed-1-3g.71gb-1-4g.71gb"}} {
		it, err := catalog.Default().InstanceType(m.typ)
		if err != nil {
			t.Fatal(err)
		}
		g, err := catalog.Default().GPU(it.GPU)
		if err != nil {
			t.Fatal(err)
		}
		slices, err := g.Layout(m.layout)
		if err != nil {
			t.Fatal(err)
		}
		parts := make([][]string, it.GPUCount)
		for i := range parts {
			parts[i] = slices
		}
		if err := cl.AddNode(cluster.NodeSpec{Name: m.name, Cluster: cluster.DefaultName, InstanceGroup: "mig",
			InstanceType: m.typ, GPU: it.GPU, Capacity: cluster.CapacityOf(it), Partitions: parts}); err != nil {
			t.Fatal(err)
		}
	}
	rt := fake.New(fake.WithClock(clk))
	gw := gateway.New(gateway.Options{Clock: clk, Registerer: prometheus.NewRegistry()})
	svc, err := deployment.New(deployment.Options{
		Store: st, Clock: clk, Registerer: prometheus.NewRegistry(),
		Engine:  serving.New(serving.Options{Runtime: rt, Router: gw, EngineArgs: []string{"--time-scale=0"}}),
		Cluster: cl, Gateway: gw, GatewayURL: "http://127.0.0.1:8080", DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{svc: svc, rt: rt, gw: gw, clk: clk}
	e.serve(t)
	return e
}

// reconcile runs the controller for one object until it settles (status
// writes, placement and starts take a few passes).
func (e *cliEnv) reconcile(t *testing.T, kind, ns, name string) {
	t.Helper()
	for range 4 {
		if err := e.svc.Controller().Reconcile(context.Background(), deployment.Key(kind, ns, name)); err != nil {
			t.Fatalf("reconcile %s %s/%s: %v", kind, ns, name, err)
		}
	}
	e.gw.ScrapeOnce(context.Background()) // the gateway reads the routed replicas' /metrics, as its Run does
}

// stored lists "Kind/namespace/name" of every object the service holds,
// IECs first, each kind in namespace then name order.
func (e *cliEnv) stored(t *testing.T) []string {
	t.Helper()
	out := []string{}
	for _, r := range manifestapi.Resources {
		objs, err := e.svc.List(context.Background(), r.Kind, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			out = append(out, o.GetKind()+"/"+o.GetMeta().Namespace+"/"+o.GetMeta().Name)
		}
	}
	return out
}

// state is the stored object's status.state, or "" when it is not stored.
func (e *cliEnv) state(t *testing.T, kind, ns, name string) manifest.State {
	t.Helper()
	o, err := e.svc.Get(context.Background(), kind, ns, name)
	if errors.Is(err, manifest.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.GetStatus().State
}

func (e *cliEnv) serve(t *testing.T) {
	t.Helper()
	h, err := manifestapi.New(manifestapi.Options{Store: e.svc})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	// As capstan serve does: answers dated by the server's clock.
	mux.Handle("/apis/", manifestapi.WithServerDate(h, e.clk))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
}

// testRoot is NewRootCommand with only the manifests commands, sharing the
// environment's fake clock so AGE columns are exact.
func (e *cliEnv) testRoot() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{Use: "capstan", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVar(&g.server, "server", "", "")
	for _, mk := range []func(*manifestsOptions) *cobra.Command{applyCommand, getCommand, describeCommand, deleteCommand} {
		root.AddCommand(mk(newManifestsOptions(g, e.clk)))
	}
	return root
}

// run executes one command line; stdin feeds "-f -".
func (e *cliEnv) run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := e.testRoot()
	var out, errb bytes.Buffer
	root.SetArgs(append([]string{"--server", e.srv.URL}, args...))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func (e *cliEnv) mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := e.run(t, stdin, args...)
	if err != nil {
		t.Fatalf("capstan %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func exampleManifest(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "manifest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const smallIEC = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: small}
spec:
  modelName: Llama-3.1-8B-Instruct
  instanceType: ml.g5.24xlarge
  replicas: 2
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: llama}
  worker:
    image: vllm/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: model-weights}
    resources: {requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
`

const deepseekJSM = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: deepseek, namespace: team-a}
spec:
  sageMakerEndpoint: {name: deepseek}
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
`

// TestApplyExamples applies every example manifest unchanged through the
// real root command (as `capstan apply -f` runs) and each one deploys,
// the MIG ones on the slices of the env's partitioned nodes.
func TestApplyExamples(t *testing.T) {
	tests := []struct {
		file   string
		object string // printed on success
	}{
		{"examples-iec-kv-routing.yaml", "inferenceendpointconfig.inference.sagemaker.aws.amazon.com/demo"},
		{"reference-iec-l1-l2-routing.yaml", "inferenceendpointconfig.inference.sagemaker.aws.amazon.com/demo"},
		{"examples-iec-mig.yaml", "inferenceendpointconfig.inference.sagemaker.aws.amazon.com/qwen-mig"},
		{"examples-jsm-mig.yaml", "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek"},
		{"reference-jsm-mig-scale-to-zero.yaml", "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			e := newCLIEnv(t)
			p := writeFile(t, t.TempDir(), tt.file, exampleManifest(t, tt.file))
			var out, errOut bytes.Buffer
			code := Execute(context.Background(), []string{"apply", "-f", p, "--server", e.srv.URL}, &out, &errOut)
			if code != 0 || out.String() != tt.object+" created\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
			}
			e.mustDeploy(t)
		})
	}
}

// mustDeploy runs the controller for the one stored object and wants it
// deployed on the default cluster.
func (e *cliEnv) mustDeploy(t *testing.T) {
	t.Helper()
	keys := e.stored(t)
	if len(keys) != 1 {
		t.Fatalf("stored %v, want one object", keys)
	}
	kind, rest, _ := strings.Cut(keys[0], "/")
	ns, name, _ := strings.Cut(rest, "/")
	e.reconcile(t, kind, ns, name)
	if st := e.state(t, kind, ns, name); st != manifest.StateDeploymentComplete {
		out, _, _ := e.run(t, "", "describe", kind, name, "-n", ns)
		t.Errorf("%s: state %s, want %s\n%s", keys[0], st, manifest.StateDeploymentComplete, out)
	}
}

func TestApply(t *testing.T) {
	t.Run("idempotent and declarative", func(t *testing.T) {
		e := newCLIEnv(t)
		p := writeFile(t, t.TempDir(), "small.yaml", smallIEC)
		const obj = "inferenceendpointconfig.inference.sagemaker.aws.amazon.com/small"
		for i, want := range []string{"created", "unchanged", "unchanged"} {
			if out := e.mustRun(t, "", "apply", "-f", p); out != obj+" "+want+"\n" {
				t.Fatalf("apply #%d: %q, want %s", i+1, out, want)
			}
		}
		writeFile(t, filepath.Dir(p), "small.yaml", strings.Replace(smallIEC, "vllm-openai:latest", "vllm-openai:v2", 1))
		if out := e.mustRun(t, "", "apply", "-f", p); out != obj+" configured\n" {
			t.Fatalf("changed: %q", out)
		}
	})
	t.Run("directory in name order, other files ignored", func(t *testing.T) {
		e := newCLIEnv(t)
		dir := t.TempDir()
		writeFile(t, dir, "b.yml", deepseekJSM)
		writeFile(t, dir, "a.yaml", smallIEC)
		writeFile(t, dir, "c.json", `{"apiVersion":"inference.sagemaker.aws.amazon.com/v1","kind":"JumpStartModel","metadata":{"name":"js"},"spec":{"model":{"modelId":"deepseek-llm-r1-distill-qwen-1-5b"},"server":{"instanceType":"ml.g5.8xlarge"}}}`)
		writeFile(t, dir, "README.md", "not a manifest")
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		out := e.mustRun(t, "", "apply", "-f", dir, "-n", "prod")
		want := "inferenceendpointconfig.inference.sagemaker.aws.amazon.com/small created\n" +
			"jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek created\n" +
			"jumpstartmodel.inference.sagemaker.aws.amazon.com/js created\n"
		if out != want {
			t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
		}
		// The order of application is the order of stdout, checked above.
		wantStored := []string{"InferenceEndpointConfig/prod/small", "JumpStartModel/prod/js", "JumpStartModel/team-a/deepseek"}
		if got := e.stored(t); !slices.Equal(got, wantStored) {
			t.Errorf("stored %v, want %v", got, wantStored)
		}
	})
	t.Run("every field error with its path, nothing stored", func(t *testing.T) {
		e := newCLIEnv(t)
		bad := strings.Replace(smallIEC, "  instanceType: ml.g5.24xlarge\n", "  instanceType: ml.g5.24xlarge\n  replicaz: 2\n  maxDeployTimeInSecond: 5\n", 1)
		_, _, err := e.run(t, deepseekJSM+"---\n"+bad, "apply", "-f", "-")
		if err == nil {
			t.Fatal("invalid manifest accepted")
		}
		msg := err.Error()
		for _, want := range []string{
			"<stdin>: InferenceEndpointConfig/small (document 1, line 9) is invalid:",
			"  * spec.maxDeployTimeInSecond: unknown field",
			"  * spec.replicaz: unknown field",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("error lacks %q:\n%s", want, msg)
			}
		}
		if got := e.stored(t); len(got) != 0 {
			t.Errorf("stored %v", got)
		}
	})
	t.Run("one bad file does not stop the others", func(t *testing.T) {
		e := newCLIEnv(t)
		dir := t.TempDir()
		a := writeFile(t, dir, "a.yaml", strings.Replace(exampleManifest(t, "examples-jsm-mig.yaml"), "mig-7g.40gb", "mig-4g.71gb", 1))
		b := writeFile(t, dir, "b.yaml", smallIEC)
		out, _, err := e.run(t, "", "apply", "-f", a, "-f", b)
		if err == nil || !strings.Contains(err.Error(), a+": JumpStartModel/deepseek") {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(out, "/small created") {
			t.Errorf("stdout = %q", out)
		}
		if got := e.stored(t); !slices.Equal(got, []string{"InferenceEndpointConfig/default/small"}) {
			t.Errorf("stored %v", got)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		e := newCLIEnv(t)
		for _, args := range [][]string{
			{"apply"},
			{"apply", "-f", filepath.Join(t.TempDir(), "missing.yaml")},
			{"apply", "-f", t.TempDir()}, // empty directory
			{"apply", "-f", "-", "-f", "-"},
		} {
			if _, _, err := e.run(t, smallIEC, args...); err == nil {
				t.Errorf("%v: no error", args)
			}
		}
	})
}

func TestServerUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), []string{"get", "iec", "--server", url}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "cannot reach the capstan server at "+url) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// TestToken checks --token and CAPSTAN_TOKEN against a server that wants
// a bearer token, as capstan serve does when adminTokens are configured.
func TestToken(t *testing.T) {
	e := newCLIEnv(t)
	h, err := manifestapi.New(manifestapi.Options{Store: e.svc})
	if err != nil {
		t.Fatal(err)
	}
	authed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer admin-token-0123456789" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(authed.Close)
	e.srv = authed
	if _, _, err := e.run(t, "", "get", "iec"); err == nil || !strings.Contains(err.Error(), "requires an admin token") {
		t.Errorf("without a token: %v", err)
	}
	if _, _, err := e.run(t, "", "get", "iec", "--token", "admin-token-0123456789"); err != nil {
		t.Errorf("--token: %v", err)
	}
	t.Setenv("CAPSTAN_TOKEN", "admin-token-0123456789")
	if _, _, err := e.run(t, smallIEC, "apply", "-f", "-"); err != nil {
		t.Errorf("CAPSTAN_TOKEN: %v", err)
	}
	if got := e.stored(t); !slices.Equal(got, []string{"InferenceEndpointConfig/default/small"}) {
		t.Errorf("stored %v", got)
	}
}
