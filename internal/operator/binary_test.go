package operator_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/operator"
)

// TestBinary runs the `capstan operator` command itself against the control
// plane: it takes the leader Lease, reports ready, reconciles, and serves
// controller-runtime's metrics.
func TestBinary(t *testing.T) {
	e := startEnvWith(t, envOptions{})
	metrics, probes := freePort(t), freePort(t)
	e.run(t, capstanBinary(t), "operator", "--kubeconfig", e.kubeconfig,
		"--leader-elect", "--leader-election-namespace=default",
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probes,
		"--webhook-host", e.webhook.LocalServingHost, "--webhook-port", strconv.Itoa(e.webhook.LocalServingPort),
		"--webhook-cert-dir", e.webhook.LocalServingCertDir, "--model-image=capstan:test")
	get := func(url string) (int, string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	eventually(t, "/readyz", func() error {
		code, body, err := get("http://" + probes + "/readyz")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %s %v", code, body, err)
		}
		return nil
	})
	ctx := context.Background()
	eventually(t, "the leader Lease", func() error {
		var l coordinationv1.Lease
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: operator.LeaderElectionID}, &l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		return nil
	})
	e.mustKubectl(t, "apply", "-f", jsmExample)
	e.deployment(t, "default", "deepseek")
	eventually(t, "reconcile metrics", func() error {
		code, body, err := get("http://" + metrics + "/metrics")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %v", code, err)
		}
		if !strings.Contains(body, `controller_runtime_reconcile_total{controller="JumpStartModel",result="success"}`) {
			return fmt.Errorf("no JumpStartModel reconcile count")
		}
		return nil
	})
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
