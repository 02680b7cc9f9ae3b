package local_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestLlamaCpp runs llama.cpp's llama-server under the runtime: the port
// capstan hands it (it announces none), readiness on its /health, the
// adapter's flags and the configured extra args on its command line, a
// kill -9 reported as Failed and followed by a restart on a fresh port,
// and a model it cannot load failing in a row with llama.cpp's own words.
func TestLlamaCpp(t *testing.T) {
	dir := testutil.LlamaCppDir(t)
	rt, logs := newRuntime(t, func(o *local.Options) {
		o.Engines = engines.Machine{engines.LlamaCpp: {Binary: filepath.Join(dir, "llama-server"), Args: []string{"--threads", "1"}}}
		o.HealthInterval = 20 * time.Millisecond
		o.HealthyInterval = 50 * time.Millisecond
	})
	ev := subscribe(t, rt)
	model := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dir, "tiny.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "tiny.gguf"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	s := runtime.ReplicaSpec{ID: "ll.AllTraffic.0", Endpoint: "ep", Engine: engines.LlamaCpp, ModelDir: model,
		ServedModelName: "tiny-ep", GPU: "ml.c5.xlarge"}
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h := ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
	complete := func(key string) (int, string) {
		return postJSON(t, "http://"+h.Addr+"/v1/completions", `{"model":"tiny-ep","prompt":"Hello","max_tokens":3}`, key)
	}
	// llama-server takes the replica's key from LLAMA_API_KEY: a local
	// caller without it is refused, on its metrics too.
	if code, body := complete(""); code != http.StatusUnauthorized {
		t.Fatalf("llama-server without its key answered %d %s", code, body)
	}
	if code, body := complete(h.APIKey); code != 200 || !strings.Contains(body, `"model":"tiny-ep"`) {
		t.Fatalf("llama-server answered %d %s", code, body)
	}
	if resp, err := http.Get("http://" + h.Addr + "/metrics"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("llama-server's metrics without its key: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	log, err := os.ReadFile(filepath.Join(logs, s.ID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "llama-server --model "+filepath.Join(model, "tiny.gguf")+" --host 127.0.0.1 --port "+h.Addr[strings.LastIndex(h.Addr, ":")+1:]+
		" --parallel 4 --metrics --no-webui --alias tiny-ep --threads 1") {
		t.Fatalf("command line not in the log:\n%.600s", log)
	}

	// kill -9: Failed, then a new process on a new port.
	pid := llamaPID(t, h.Addr)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, s.ID, "Failed", state(runtime.StateFailed))
	again := ev.waitFor(t, s.ID, "Healthy after restart", func(r runtime.Replica) bool {
		return r.State == runtime.StateHealthy && r.Restarts == 1
	})
	if again.Addr == "" || llamaPID(t, again.Addr) == pid {
		t.Fatalf("restart: addr %q", again.Addr)
	}

	// A GGUF cut short: llama.cpp refuses it at every start.
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "m.gguf"), data[:4096], 0o644); err != nil {
		t.Fatal(err)
	}
	b := runtime.ReplicaSpec{ID: "ll.broken.0", Engine: engines.LlamaCpp, ModelDir: broken, GPU: "ml.c5.xlarge"}
	if err := rt.Start(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	f := ev.waitFor(t, b.ID, "failing twice in a row", func(r runtime.Replica) bool { return r.Failures >= 2 })
	if !strings.Contains(f.LastFailure, "failed to load model") || !strings.Contains(f.LastFailure, "exit status 1") {
		t.Fatalf("last failure %q lacks llama.cpp's error", f.LastFailure)
	}
}

// llamaPID is the llama-server listening on addr's port.
func llamaPID(t *testing.T, addr string) int {
	t.Helper()
	port := addr[strings.LastIndex(addr, ":")+1:]
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "llama-server") && strings.Contains(string(b), "\x00--port\x00"+port+"\x00") {
			var pid int
			for _, c := range filepath.Base(filepath.Dir(p)) {
				pid = pid*10 + int(c-'0')
			}
			return pid
		}
	}
	t.Fatalf("no llama-server on port %s", port)
	return 0
}
