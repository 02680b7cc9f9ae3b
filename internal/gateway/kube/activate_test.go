package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

func replicas(n int32) func(*apiv1.InferenceEndpointConfig) {
	return func(o *apiv1.InferenceEndpointConfig) { o.Spec.Replicas = &n }
}

// specReplicas reads the object's spec.replicas from the API server.
func specReplicas(t *testing.T, c client.Client, name string) int32 {
	t.Helper()
	var o apiv1.InferenceEndpointConfig
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &o); err != nil {
		t.Fatal(err)
	}
	if o.Spec.Replicas == nil {
		t.Fatalf("%s has no spec.replicas", name)
	}
	return *o.Spec.Replicas
}

type answer struct {
	gateway, backend, body string
	status                 int
}

// postAsync is post for another goroutine: errors land in the answer.
func postAsync(g *gw, body string) answer {
	resp, err := http.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return answer{gateway: g.name, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{g.name, resp.Header.Get("X-Capstan-Backend"), string(b), resp.StatusCode}
}

// TestGatewayScaleFromZero: requests to deployments with no ready replica
// are held while the gateways raise the objects' replicas through the scale
// subresource, and go on when an EndpointSlice brings a ready engine; two
// in-process gateways activate the same object at once, and the real
// binary (only the install's ClusterRole, --hold-timeout 1s) activates
// another and answers 503 in OpenAI's shape when no replica comes.
func TestGatewayScaleFromZero(t *testing.T) {
	cfg, te := startAPIServer(t)
	scheme, err := apiv1.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	engines := startEngines(t, 1)
	createIEC(t, c, "cold-iec", "cold", "roundrobin", replicas(0))
	createIEC(t, c, "never-iec", "never", "roundrobin", replicas(0))
	createIEC(t, c, "busy-iec", "busy", "roundrobin", replicas(3))

	a, b := startInProcess(t, cfg, "a"), startInProcess(t, cfg, "b")
	waitBackends(t, []*gw{a, b}, "cold")
	binGW := startBinary(t, gatewayKubeconfig(t, te, c), "--hold-timeout", "1s")

	t.Run("held requests activate the deployment once and are answered by the replica that comes", func(t *testing.T) {
		before := engines[0].served(t)
		answers := make(chan answer, 3)
		for _, g := range []*gw{a, a, b} {
			go func() { answers <- postAsync(g, chat("cold")) }()
		}
		eventually(t, "cold-iec activated", func() error {
			if n := specReplicas(t, c, "cold-iec"); n != 1 {
				return fmt.Errorf("spec.replicas %d", n)
			}
			return nil
		})
		// All three wait in the gateways, activation done by one or both.
		eventually(t, "three requests held", func() error {
			if ha, hb := a.srv.Gateway().Snapshot("cold").Held, b.srv.Gateway().Snapshot("cold").Held; ha != 2 || hb != 1 {
				return fmt.Errorf("held: a %d, b %d", ha, hb)
			}
			return nil
		})
		select {
		case r := <-answers:
			t.Fatalf("a request was answered before any replica was ready: %+v", r)
		default:
		}
		if n := specReplicas(t, c, "cold-iec"); n != 1 {
			t.Fatalf("three requests through two gateways took spec.replicas to %d, want 1", n)
		}
		putSlice(t, c, "cold-iec", "cold-iec-0", "cold-0", engines[0], true)
		for range 3 {
			select {
			case r := <-answers:
				if r.status != 200 || r.backend != "default/cold-0" || !strings.Contains(r.body, `"choices"`) {
					t.Fatalf("gateway %s: %d backend %q %s", r.gateway, r.status, r.backend, r.body)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("held requests not released 30s after the endpoint turned ready")
			}
		}
		if got := engines[0].served(t) - before; got != 3 {
			t.Fatalf("the engine served %v requests, want 3", got)
		}
		if n := specReplicas(t, c, "cold-iec"); n != 1 {
			t.Fatalf("spec.replicas %d after the activation, want 1", n)
		}
	})

	t.Run("no replica within --hold-timeout: 503 in OpenAI's shape", func(t *testing.T) {
		start := time.Now()
		st, _, body := post(t, binGW.url+"/v1/chat/completions", chat("never"))
		waited := time.Since(start)
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || st != 503 || e.Error.Code != "model_activating" || e.Error.Type != "server_error" ||
			!strings.Contains(e.Error.Message, "no replica became ready within 1s") {
			t.Fatalf("status %d body %s, want 503 model_activating after 1s", st, body)
		}
		if waited < time.Second || waited > 20*time.Second {
			t.Fatalf("answered after %s, want the 1s hold timeout", waited)
		}
		// The binary, with only the install's ClusterRole, activated it.
		eventually(t, "never-iec activated", func() error {
			if n := specReplicas(t, c, "never-iec"); n != 1 {
				return fmt.Errorf("spec.replicas %d", n)
			}
			return nil
		})
	})

	t.Run("replicas above zero are left alone", func(t *testing.T) {
		if st, _, body := post(t, binGW.url+"/v1/chat/completions", chat("busy")); st != 503 || !strings.Contains(body, "model_activating") {
			t.Fatalf("busy: %d %s, want 503 after the hold", st, body)
		}
		if n := specReplicas(t, c, "busy-iec"); n != 3 {
			t.Fatalf("busy-iec spec.replicas %d, want 3 untouched", n)
		}
	})
}
