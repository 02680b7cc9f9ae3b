package operator_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/operator"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// env is one real control plane (etcd + kube-apiserver from
// test/k8s/binaries.sh) with the CRDs and the webhook installed and the
// operator running in-process.
type env struct {
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
	kubectlBin string
	bin        string
	webhook    envtest.WebhookInstallOptions
	// stopOperator stops the in-process operator (idempotent).
	stopOperator func()
}

func startEnv(t testing.TB) *env { return startEnvWith(t, envOptions{inProcess: true}) }

// envOptions vary the environment.
type envOptions struct {
	// inProcess runs the operator in the test process.
	inProcess bool
	// extraCRDs are directories of more CRDs to install.
	extraCRDs []string
	// bare installs neither the CRDs nor the webhook (and runs no
	// operator): for tests that install them the way users do.
	bare bool
}

// startEnvWith starts the control plane, with the operator in-process or
// not (a benchmark runs the real binary to measure its CPU).
func startEnvWith(t testing.TB, o envOptions) *env {
	t.Helper()
	bin := testutil.K8sBinDir(t)
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("control-plane binary missing (run test/k8s/binaries.sh): %v", err)
		}
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: bin,
	}
	if !o.bare {
		te.CRDDirectoryPaths = append([]string{"../../deploy/operator/crds"}, o.extraCRDs...)
		te.ErrorIfCRDPathMissing = true
		te.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{"../../deploy/operator/webhook"}}
	}
	// Room for the benchmark's 500 Services (envtest's default is a /24).
	te.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("start etcd and kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	user, err := te.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	stop := func() {}
	if o.inProcess && !o.bare {
		stop = startOperator(t, cfg, te.WebhookInstallOptions)
	}
	scheme, err := apiv1.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// kubectl of the control plane's release when binaries.sh built it,
	// else the one on PATH.
	kubectlBin := filepath.Join(bin, "kubectl")
	if _, err := os.Stat(kubectlBin); err != nil {
		kubectlBin = "kubectl"
	}
	return &env{cfg: cfg, client: c, kubeconfig: kubeconfig, kubectlBin: kubectlBin, bin: bin, webhook: te.WebhookInstallOptions, stopOperator: stop}
}

// startOperator runs the operator's manager until the test ends or stop is
// called.
func startOperator(t testing.TB, cfg *rest.Config, w envtest.WebhookInstallOptions) (stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mgr, err := operator.NewManager(cfg, operator.Options{
		MetricsAddr: "0", ProbeAddr: "0",
		WebhookHost: w.LocalServingHost, WebhookPort: w.LocalServingPort, CertDir: w.LocalServingCertDir,
		Build:              operator.BuildOptions{ModelImage: "capstan:test"},
		SkipNameValidation: true,
	}, log, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("operator: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// kubectl runs kubectl against the environment; it returns stdout, stderr
// and the error.
func (e *env) kubectl(args ...string) (string, string, error) {
	cmd := exec.Command(e.kubectlBin, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func (e *env) mustKubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, stderr, err := e.kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// eventually waits up to 30s for cond; the operator reacts to watch
// events, so this is wall-clock waiting on real processes, not time logic
// under test.
func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	testutil.EventuallyErr(t, 30*time.Second, what, cond)
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
