package kube_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/gateway/kube"
	"github.com/capstan-dev/capstan/internal/operator"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// startAPIServer starts etcd and kube-apiserver with the operator's CRDs
// (no operator: the test writes the Services' EndpointSlices itself, as
// the endpointslice controller would, with the engines' addresses) and
// returns its config and the environment.
func startAPIServer(t *testing.T) (*rest.Config, *envtest.Environment) {
	t.Helper()
	bin := testutil.K8sBinDir(t)
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("control-plane binary missing (run test/k8s/binaries.sh): %v", err)
		}
	}
	te := &envtest.Environment{BinaryAssetsDirectory: bin, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{filepath.Join(testutil.RepoRoot(t), "deploy/operator/crds")}}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("start etcd and kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cfg, te
}

// gatewayKubeconfig is a kubeconfig of a user holding only the
// capstan-gateway ClusterRole of deploy/operator/gateway.yaml (what the
// gateway's ServiceAccount holds in a cluster), so the binary run with it
// proves the install's RBAC is enough.
func gatewayKubeconfig(t *testing.T, te *envtest.Environment, c client.Client) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "deploy/operator/gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "ClusterRole" {
			role = &r
		}
	}
	if role == nil {
		t.Fatal("deploy/operator/gateway.yaml has no ClusterRole")
	}
	ctx := context.Background()
	if err := c.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	const name = "capstan-gateway-test"
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}}}); err != nil {
		t.Fatal(err)
	}
	user, err := te.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// engine is one `capstan engine sim` process publishing KV events.
type engine struct {
	host         string
	port, kvPort int32
	proc         *testutil.Process
}

// podIP is an address of this machine the API server accepts in an
// EndpointSlice (it refuses loopback ones): the first non-loopback IPv4
// address of an interface that is up. The engines listen there, as pods
// listen on their pod IP.
func podIP(t *testing.T) string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String()
			}
		}
	}
	t.Fatal("no non-loopback IPv4 address on this machine: EndpointSlices refuse loopback addresses")
	return ""
}

func startEngines(t *testing.T, n int) []*engine {
	t.Helper()
	bin := testutil.CapstanBinary(t)
	ip := podIP(t)
	out := make([]*engine, n)
	for i := range out {
		kv := freePort(t, ip)
		out[i] = &engine{kvPort: int32(kv), proc: testutil.Start(t, context.Background(), bin, "engine", "sim",
			"--model", "qwen3-32b", "--gpu", "h100", "--tensor-parallel", "2", "--host", ip, "--port", "0", "--seed", "1",
			"--time-scale", "0", "--kv-events", "tcp://*:"+strconv.Itoa(kv))}
	}
	for _, e := range out {
		l := e.proc.WaitLine(t, "listening on http://", 30*time.Second)
		host, port, err := net.SplitHostPort(strings.TrimSpace(l[strings.Index(l, "http://")+len("http://"):]))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		e.host, e.port = host, int32(p)
	}
	return out
}

func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (e *engine) url() string { return "http://" + net.JoinHostPort(e.host, strconv.Itoa(int(e.port))) }

// served is how many requests the engine has finished.
func (e *engine) served(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get(e.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "vllm:request_success_total") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += v
		}
	}
	return n
}

// putSlice writes the one-endpoint EndpointSlice NAME of object obj's
// Service, as the endpointslice controller does (Service labels copied),
// pointing at engine e as pod pod.
func putSlice(t *testing.T, c client.Client, obj, name, pod string, e *engine, ready bool) {
	t.Helper()
	l := apiv1.SelectorLabels("InferenceEndpointConfig", obj)
	l[operator.LabelManagedBy] = operator.ManagedBy
	l[discoveryv1.LabelServiceName] = obj
	http, kv := "http", apiv1.KVEventsPortName
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: l},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &http, Port: &e.port}, {Name: &kv, Port: &e.kvPort}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{e.host}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod}}},
	}
	ctx := context.Background()
	cur := &discoveryv1.EndpointSlice{}
	err := c.Get(ctx, client.ObjectKeyFromObject(s), cur)
	switch {
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, s)
	case err == nil:
		s.ResourceVersion = cur.ResourceVersion
		err = c.Update(ctx, s)
	}
	if err != nil {
		t.Fatalf("endpointslice %s: %v", name, err)
	}
}

const iecTemplate = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: NAME, namespace: default}
spec:
  modelName: qwen3-32b
  endpointName: ENDPOINT
  instanceType: ml.g5.24xlarge
  invocationEndpoint: v1/completions
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: qwen}
  intelligentRoutingSpec: {enabled: true, routingStrategy: STRATEGY}
  worker:
    image: vllm/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "6", memory: 30Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
`

// createIEC creates the template's InferenceEndpointConfig, changed by set.
func createIEC(t *testing.T, c client.Client, name, endpoint, strategy string, set ...func(*apiv1.InferenceEndpointConfig)) *apiv1.InferenceEndpointConfig {
	t.Helper()
	o := &apiv1.InferenceEndpointConfig{}
	y := strings.NewReplacer("NAME", name, "ENDPOINT", endpoint, "STRATEGY", strategy).Replace(iecTemplate)
	if err := yaml.UnmarshalStrict([]byte(y), o); err != nil {
		t.Fatal(err)
	}
	for _, f := range set {
		f(o)
	}
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return o
}

// gw is one gateway under test: in-process (srv set) or the real binary.
type gw struct {
	name string
	url  string
	srv  *kube.Server
}

func startInProcess(t *testing.T, cfg *rest.Config, name string) *gw {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := kube.NewServer(cfg, kube.ServerOptions{Namespace: "default", ScrapeInterval: 200 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway %s: %v", name, err)
		}
	})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	select {
	case <-s.Synced():
	case <-time.After(30 * time.Second):
		t.Fatalf("gateway %s never synced", name)
	}
	return &gw{name: name, url: hs.URL, srv: s}
}

// startBinary runs `capstan gateway --kubeconfig kubeconfig` with extra
// flags, watching every namespace as the installed one does, and waits
// until it is ready.
func startBinary(t *testing.T, kubeconfig string, extra ...string) *gw {
	t.Helper()
	args := append([]string{"gateway", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0", "--scrape-interval", "200ms"}, extra...)
	p := testutil.Start(t, context.Background(), testutil.CapstanBinary(t), args...)
	l := p.WaitLine(t, "listening on http://", 30*time.Second)
	g := &gw{name: "binary", url: strings.TrimSpace(l[strings.Index(l, "http://"):])}
	eventually(t, "capstan gateway ready", func() error {
		resp, err := http.Get(g.url + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	return g
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func post(t *testing.T, url, body string) (status int, backend string, out string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Capstan-Backend"), string(b)
}

func chat(model string) string {
	return `{"model":"` + model + `","max_tokens":2,"messages":[{"role":"user","content":"hello"}]}`
}

// eventually waits up to 30s for cond: the watches are real processes'
// wall-clock work, not time logic under test.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testutil.EventuallyErr(t, 30*time.Second, what, cond)
}

// waitBackends waits until every in-process gateway routes endpoint over
// exactly want (backend ids, sorted).
func waitBackends(t *testing.T, gws []*gw, endpoint string, want ...string) {
	t.Helper()
	for _, g := range gws {
		eventually(t, fmt.Sprintf("gateway %s routes %s over %v", g.name, endpoint, want), func() error {
			r, ok := g.srv.Gateway().Route(endpoint)
			if !ok {
				return fmt.Errorf("no route")
			}
			var got []string
			for _, b := range r.Variants[0].Backends {
				got = append(got, b.ID)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("backends %v", got)
			}
			return nil
		})
	}
}

// TestGatewayInCluster runs two in-process gateways and the real `capstan
// gateway --kubeconfig` (with only the install's RBAC) against a real kube-apiserver and three real
// engines, and changes the cluster under them step by step.
func TestGatewayInCluster(t *testing.T) {
	cfg, te := startAPIServer(t)
	scheme, err := apiv1.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	engines := startEngines(t, 3)
	chatObj := createIEC(t, c, "chat-iec", "chat", "roundrobin")
	putSlice(t, c, "chat-iec", "chat-iec-0", "chat-0", engines[0], true)
	putSlice(t, c, "chat-iec", "chat-iec-1", "chat-1", engines[1], true)

	a, b := startInProcess(t, cfg, "a"), startInProcess(t, cfg, "b")
	gws := []*gw{a, b}
	waitBackends(t, gws, "chat", "default/chat-0", "default/chat-1")

	// The binary watches every namespace, as the installed one does, with
	// only the install's RBAC.
	binGW := startBinary(t, gatewayKubeconfig(t, te, c))

	t.Run("two gateways route alike with no shared state", func(t *testing.T) {
		var seqs [2][]string
		for i := 0; i < 4; i++ {
			for j, g := range gws {
				st, be, body := post(t, g.url+"/v1/chat/completions", chat("chat"))
				if st != 200 {
					t.Fatalf("gateway %s: %d %s", g.name, st, body)
				}
				seqs[j] = append(seqs[j], be)
			}
		}
		want := "default/chat-0,default/chat-1,default/chat-0,default/chat-1"
		for j, s := range seqs {
			if strings.Join(s, ",") != want {
				t.Fatalf("gateway %s sent round robin to %v, want %s", gws[j].name, s, want)
			}
		}
	})

	t.Run("OpenAI and SageMaker runtime APIs answered by the engines", func(t *testing.T) {
		for _, g := range []*gw{a, b, binGW} {
			st, be, body := post(t, g.url+"/v1/chat/completions", chat("chat"))
			if st != 200 || !strings.HasPrefix(be, "default/chat-") || !strings.Contains(body, `"choices"`) {
				t.Fatalf("gateway %s chat: %d backend %q %s", g.name, st, be, body)
			}
			resp, err := http.Post(g.url+"/endpoints/chat/invocations", "application/json", strings.NewReader(`{"prompt":"hello","max_tokens":2}`))
			if err != nil {
				t.Fatal(err)
			}
			sm, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Amzn-Invoked-Production-Variant") != kube.VariantName || !strings.Contains(string(sm), `"choices"`) {
				t.Fatalf("gateway %s invocations: %d %v %s", g.name, resp.StatusCode, resp.Header, sm)
			}
		}
	})

	t.Run("a not-ready endpoint leaves rotation", func(t *testing.T) {
		putSlice(t, c, "chat-iec", "chat-iec-1", "chat-1", engines[1], false)
		waitBackends(t, gws, "chat", "default/chat-0")
		before := engines[1].served(t)
		for i := 0; i < 6; i++ {
			for _, g := range gws {
				if st, be, body := post(t, g.url+"/v1/chat/completions", chat("chat")); st != 200 || be != "default/chat-0" {
					t.Fatalf("gateway %s: %d backend %q %s", g.name, st, be, body)
				}
			}
		}
		if after := engines[1].served(t); after != before {
			t.Fatalf("the not-ready engine served %v requests", after-before)
		}
	})

	t.Run("a new endpoint joins", func(t *testing.T) {
		putSlice(t, c, "chat-iec", "chat-iec-2", "chat-2", engines[2], true)
		waitBackends(t, gws, "chat", "default/chat-0", "default/chat-2")
		for _, g := range gws {
			seen := map[string]bool{}
			for i := 0; i < 4; i++ {
				st, be, body := post(t, g.url+"/v1/chat/completions", chat("chat"))
				if st != 200 {
					t.Fatalf("gateway %s: %d %s", g.name, st, body)
				}
				seen[be] = true
			}
			if !seen["default/chat-2"] || !seen["default/chat-0"] || len(seen) != 2 {
				t.Fatalf("gateway %s used %v", g.name, seen)
			}
		}
	})

	t.Run("kvaware follows the engines' KV events", func(t *testing.T) {
		createIEC(t, c, "kv-iec", "kv", "kvaware")
		for i, e := range engines {
			putSlice(t, c, "kv-iec", fmt.Sprintf("kv-iec-%d", i), fmt.Sprintf("kv-%d", i), e, true)
		}
		waitBackends(t, gws, "kv", "default/kv-0", "default/kv-1", "default/kv-2")
		for _, g := range gws {
			if r, _ := g.srv.Gateway().Route("kv"); r.Variants[0].Backends[2].KVEventsEndpoint != fmt.Sprintf("tcp://%s:%d", engines[2].host, engines[2].kvPort) {
				t.Fatalf("gateway %s: kv events endpoint %+v", g.name, r.Variants[0].Backends[2])
			}
		}
		// Both gateways' subscriptions to engine 2 must be live before the
		// warm-up: a ZeroMQ subscriber misses what was published before it
		// joined (slow joiner), and these pods offer no replay socket.
		kv2 := func(g *gw) int { return g.srv.Gateway().KVBlocks("default/kv-2") }
		for i := 0; kv2(a) == 0 || kv2(b) == 0; i++ {
			if i > 150 {
				t.Fatalf("no KV events of kv-2 reached the gateways: a holds %d blocks, b %d", kv2(a), kv2(b))
			}
			post(t, engines[2].url()+"/v1/completions", fmt.Sprintf(`{"prompt":"ping %d %s","max_tokens":1}`, i, strings.Repeat("z ", 40)))
			time.Sleep(100 * time.Millisecond)
		}
		before := map[*gw]int{a: kv2(a), b: kv2(b)}
		// Prime engine 2 directly, not through a gateway: only its KV
		// events can tell the gateways where the prefix lives (about 60
		// blocks of 16 tokens).
		if st, _, body := post(t, engines[2].url()+"/v1/chat/completions", sharedPrompt("", "warm-up")); st != 200 {
			t.Fatalf("warm-up: %d %s", st, body)
		}
		for _, g := range gws {
			eventually(t, "gateway "+g.name+" indexes the warm-up's blocks", func() error {
				if n := kv2(g); n < before[g]+50 {
					return fmt.Errorf("%d blocks of kv-2, %d before the warm-up", n, before[g])
				}
				return nil
			})
			if g.srv.Gateway().KVBlocks("default/kv-0") != 0 {
				t.Fatalf("gateway %s: kv-0 holds blocks before any request reached it", g.name)
			}
		}
		for i := 0; i < 3; i++ {
			for _, g := range gws {
				st, be, body := post(t, g.url+"/v1/chat/completions", sharedPrompt("kv", fmt.Sprintf("question %s %d", g.name, i)))
				if st != 200 || be != "default/kv-2" {
					t.Fatalf("gateway %s request %d: %d went to %q, the prefix lives on default/kv-2: %s", g.name, i, st, be, body)
				}
				if n := cachedTokens(t, body); n < 400 {
					t.Fatalf("gateway %s request %d: cached tokens %d", g.name, i, n)
				}
			}
		}
	})

	t.Run("deleting the object removes the route", func(t *testing.T) {
		if err := c.Delete(context.Background(), chatObj); err != nil {
			t.Fatal(err)
		}
		all := []*gw{a, b, binGW}
		for _, g := range all {
			eventually(t, "gateway "+g.name+" drops route chat", func() error {
				st, _, body := post(t, g.url+"/v1/chat/completions", chat("chat"))
				if st != 404 {
					return fmt.Errorf("status %d %s", st, body)
				}
				var e struct {
					Error struct{ Message, Type, Code string }
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != "model_not_found" || e.Error.Message == "" {
					t.Fatalf("gateway %s: 404 body %s is not OpenAI's error shape", g.name, body)
				}
				return nil
			})
		}
		resp, err := http.Post(a.url+"/endpoints/chat/invocations", "application/json", strings.NewReader(`{"prompt":"hello"}`))
		if err != nil {
			t.Fatal(err)
		}
		sm, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(sm), "Endpoint chat of account") {
			t.Fatalf("SageMaker invocations of the deleted endpoint: %d %s", resp.StatusCode, sm)
		}
		// The other route stays.
		if st, _, body := post(t, binGW.url+"/v1/chat/completions", sharedPrompt("kv", "after")); st != 200 {
			t.Fatalf("kv after deleting chat: %d %s", st, body)
		}
	})
}

// sharedPrompt is a long system prompt (many KV blocks) plus a question;
// model "" leaves the model out (a request straight to an engine).
func sharedPrompt(model, question string) string {
	m := ""
	if model != "" {
		m = `"model":"` + model + `",`
	}
	return fmt.Sprintf(`{%s"max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":%q}]}`,
		m, strings.Repeat("You are a careful assistant for the lighthouse company. ", 60), question)
}

func cachedTokens(t *testing.T, body string) int {
	t.Helper()
	i := strings.Index(body, `"cached_tokens":`)
	if i < 0 {
		t.Fatalf("no cached_tokens in %s", body)
	}
	n, _ := strconv.Atoi(strings.TrimRight(strings.Fields(strings.NewReplacer(",", " ", "}", " ").Replace(body[i+len(`"cached_tokens":`):]))[0], " "))
	return n
}
