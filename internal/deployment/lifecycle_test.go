package deployment

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// TestEveryReplicaPublishesKVEvents checks that a manifest replica gets a KV
// events port and its backend the matching endpoint whatever the routing
// strategy, so a strategy that reads KV events works for every deployment.
func TestEveryReplicaPublishesKVEvents(t *testing.T) {
	tests := []struct {
		name, extra, strategy string
	}{
		{"least outstanding requests (default)", "", "LEAST_OUTSTANDING_REQUESTS"},
		{"round robin", "  loadBalancer: {routingAlgorithm: round_robin}\n", manifest.RoutingRoundRobin},
		{"prefixaware", "  intelligentRoutingSpec: {enabled: true, routingStrategy: prefixaware}\n", manifest.RoutingPrefixAware},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(iec("demo", 2, 1, tc.extra))
			h.reconcile(kIEC("demo"))
			r, ok := h.gw.Route("demo")
			if !ok || len(r.Variants) != 1 || r.Variants[0].RoutingStrategy != tc.strategy || len(r.Variants[0].Backends) != 2 {
				t.Fatalf("route %+v (found %v)", r, ok)
			}
			args := map[string][]string{}
			for _, s := range h.rt.Starts() {
				args[s.ID] = engineArgs(s)
			}
			for _, b := range r.Variants[0].Backends {
				if !strings.HasPrefix(b.KVEventsEndpoint, "tcp://127.0.0.1:") {
					t.Fatalf("backend %+v has no KV events endpoint", b)
				}
				// The replica binds the port (vLLM: "*" binds), the gateway connects.
				bind := "--kv-events=tcp://*:" + strings.TrimPrefix(b.KVEventsEndpoint, "tcp://127.0.0.1:")
				if !slices.Contains(args[b.ID], bind) {
					t.Fatalf("replica %s started with %q, not binding its backend's %s", b.ID, args[b.ID], b.KVEventsEndpoint)
				}
			}
			if a, b := r.Variants[0].Backends[0], r.Variants[0].Backends[1]; a.KVEventsEndpoint == b.KVEventsEndpoint {
				t.Fatalf("two replicas share KV events endpoint %s", a.KVEventsEndpoint)
			}
		})
	}
}

// TestPrimeSetsRoutesFromRecords restarts capstan over a store holding
// deployments and checks that Prime gives each deployment that holds its
// name its route before any reconcile, and none to the others.
func TestPrimeSetsRoutesFromRecords(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.apply(iec("chat", 1, 1, "  endpointName: chat-ep\n"))
	h.reconcile(kIEC("chat"))
	// Refused the name chat-ep (and listed before its holder).
	h.apply(iec("a-rival", 1, 1, "  endpointName: chat-ep\n"))
	h.reconcile(kIEC("a-rival"))
	if got := condition(h.get(manifest.KindInferenceEndpointConfig, "a-rival"), manifest.ConditionReady).Reason; got != manifest.ReasonEndpointNameInUse {
		t.Fatalf("a-rival: Ready reason %q, want %s", got, manifest.ReasonEndpointNameInUse)
	}
	// Scale to zero, with routing strategy prefixaware.
	doc, err := os.ReadFile("../manifest/testdata/examples-iec-kv-routing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h.apply(string(doc))
	h.reconcile(kIEC("demo"))
	// Being deleted when capstan stopped.
	h.apply(jsm("gone", "", ""))
	h.reconcile(kJSM("gone"))
	if err := h.svc.Delete(ctx, manifest.KindJumpStartModel, "default", "gone"); err != nil {
		t.Fatal(err)
	}

	// A new server over the same store: fresh runtime, gateway and engine.
	h2 := newHarness(t)
	reg := &registry{Service: endpoint.NewService(h.store, nil, nil, h2.clk, testLogger(t))}
	svc, err := New(Options{Store: h.store, Clock: h2.clk, Engine: serving.New(serving.Options{Runtime: h2.rt, Router: h2.gw}),
		Cluster: h2.cl, Gateway: h2.gw, Models: h2.models, Endpoints: reg, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h2.svc, h2.store, h2.reg = svc, h.store, reg
	if err := svc.Controller().Prime(); err != nil {
		t.Fatal(err)
	}

	r, ok := h2.gw.Route("chat-ep")
	if !ok || len(r.Variants) != 1 || r.Variants[0].RoutingStrategy != "LEAST_OUTSTANDING_REQUESTS" || len(r.Variants[0].Backends) != 0 || r.Activator == nil {
		t.Fatalf("primed route chat-ep %+v (found %v), want no backend yet and an activator", r, ok)
	}
	// Known at once: a request waits for a replica rather than failing as
	// an unknown endpoint (or for want of a backend).
	hctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = h2.gw.Invoke(hctx, gateway.Invocation{Endpoint: "chat-ep", Path: "/invocations", Body: []byte(`{}`)})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("invoke chat-ep after Prime: %v, want it held until its deadline", err)
	}
	if r, ok := h2.gw.Route("demo"); !ok || r.Activator == nil || r.Variants[0].RoutingStrategy != manifest.RoutingPrefixAware {
		t.Fatalf("primed scale-to-zero route demo %+v (found %v), want one with an activator", r, ok)
	}
	if _, ok := h2.gw.Route("gone"); ok {
		t.Fatal("a deployment being deleted got a route")
	}
	if len(h2.rt.Starts()) != 0 {
		t.Fatalf("Prime started replicas %v", h2.rt.Starts())
	}

	// The holder of the name keeps it: the rival still fails, and the
	// holder's first reconcile puts its replica behind the primed route.
	h2.reconcile(kIEC("a-rival"))
	if got := condition(h2.get(manifest.KindInferenceEndpointConfig, "a-rival"), manifest.ConditionReady).Reason; got != manifest.ReasonEndpointNameInUse {
		t.Fatalf("a-rival after restart: Ready reason %q, want %s", got, manifest.ReasonEndpointNameInUse)
	}
	h2.reconcile(kIEC("chat"))
	if b := h2.backends("chat-ep"); len(b) != 1 || !strings.HasPrefix(b[0], "iec.default.chat.") {
		t.Fatalf("chat-ep backends after the first reconcile: %v", b)
	}
}

// TestResyncStopsOrphans checks the resync's orphan sweep: a replica no
// record lists (a crash between a record change and its Stop) is stopped
// on the second resync that finds it unlisted, and its node capacity is
// freed; a victim taken out of its record but not retired yet survives.
func TestResyncStopsOrphans(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	k := kIEC("demo")
	h.apply(iec("demo", 3, 1, ""))
	h.reconcile(k)
	ids := h.running("iec.default.demo.")
	if len(ids) != 3 {
		t.Fatalf("running %v", ids)
	}
	// The record forgets ids[1] and ids[2]; ids[2] is a victim on its way out.
	if err := h.store.Update(func(tx *store.Tx) error {
		var rec record
		if _, err := tx.Get(bucket, k, &rec); err != nil {
			return err
		}
		rec.Replicas = slices.DeleteFunc(rec.Replicas, func(r replicaRec) bool { return r.ID != ids[0] })
		return tx.Put(bucket, k, &rec)
	}); err != nil {
		t.Fatal(err)
	}
	c := h.svc.Controller()
	c.mu.Lock()
	c.retiring[ids[2]] = true
	c.mu.Unlock()

	c.resync(ctx)
	if got := h.running("iec.default.demo."); !slices.Equal(got, ids) {
		t.Fatalf("first resync: running %v, want all of %v (an orphan must be seen twice)", got, ids)
	}
	c.resync(ctx)
	if got, want := h.running("iec.default.demo."), []string{ids[0], ids[2]}; !slices.Equal(got, want) {
		t.Fatalf("second resync: running %v, want %v", got, want)
	}
	if _, ok := h.cl.NodeOf(ids[1]); ok {
		t.Fatalf("the orphan %s still holds node capacity", ids[1])
	}
	if _, ok := h.cl.NodeOf(ids[2]); !ok {
		t.Fatalf("the retiring victim %s lost its node capacity", ids[2])
	}
}
