package local_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestRealEngine runs the real `capstan engine sim` under the runtime: the
// announce line, /health, a crash (--crash-after-requests) reported as
// Failed with the exit status, and the restart that follows.
func TestRealEngine(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	rt, _ := newRuntime(t, func(o *local.Options) {
		o.Binary = bin
		o.HealthInterval = 20 * time.Millisecond
		o.HealthyInterval = 100 * time.Millisecond
	})
	ev := subscribe(t, rt)
	s := spec("real.AllTraffic.0", "--crash-after-requests=1", "--startup-delay=200ms")
	s.ServedModelName = "served-name"
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h := ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
	invoke := func(key string) (int, string) {
		return postJSON(t, "http://"+h.Addr+"/invocations", `{"inputs":"hello","parameters":{"max_new_tokens":2}}`, key)
	}
	// A local caller who finds the port, without the replica's key (or
	// with another), is refused: only capstan's gateway gets through.
	for _, key := range []string{"", "not-the-key"} {
		if code, body := invoke(key); code != http.StatusUnauthorized || !strings.Contains(body, "invalid_api_key") {
			t.Fatalf("without the replica's key (%q): %d %s", key, code, body)
		}
	}
	if code, body := invoke(h.APIKey); code != 200 || !strings.Contains(body, "generated_text") {
		t.Fatalf("engine answered %d %s", code, body)
	}
	f := ev.waitFor(t, s.ID, "Failed", state(runtime.StateFailed))
	if !strings.Contains(f.Message, "exit status") || !strings.Contains(f.Message, s.ID+".log") {
		t.Fatalf("failure message %q", f.Message)
	}
	again := ev.waitFor(t, s.ID, "Healthy after restart", func(r runtime.Replica) bool {
		return r.State == runtime.StateHealthy && r.Restarts == 1
	})
	if again.Addr == "" {
		t.Fatal("restarted replica has no address")
	}
	if again.APIKey != h.APIKey {
		t.Fatal("the replica's API key changed with its restart")
	}
}
