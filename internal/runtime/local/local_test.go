package local_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
)

func newRuntime(t *testing.T, mod func(*local.Options)) (*local.Runtime, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := local.Options{
		Binary:          exe,
		LogDir:          dir,
		HealthInterval:  10 * time.Millisecond,
		HealthyInterval: 20 * time.Millisecond,
		StartTimeout:    20 * time.Second,
		MaxBackoff:      200 * time.Millisecond,
		StopGrace:       5 * time.Second,
		EngineArgs:      []string{"--time-scale=0.01"},
	}
	if mod != nil {
		mod(&opts)
	}
	rt, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return rt, dir
}

func spec(id string, args ...string) runtime.ReplicaSpec {
	return runtime.ReplicaSpec{ID: id, Endpoint: "ep", Variant: "AllTraffic", Engine: "sim",
		Model: "llama-3.1-8b", GPU: "h100", TensorParallel: 1, Args: args}
}

// events records every notification for later waiting.
type events struct {
	mu   sync.Mutex
	seen []runtime.Replica
	ch   chan struct{}
}

func subscribe(t *testing.T, rt *local.Runtime) *events {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &events{ch: make(chan struct{}, 1)}
	rt.Subscribe(ctx, func(r runtime.Replica) {
		e.mu.Lock()
		e.seen = append(e.seen, r)
		e.mu.Unlock()
		select {
		case e.ch <- struct{}{}:
		default:
		}
	})
	return e
}

// waitFor waits for a notification of id matching pred and returns it.
func (e *events) waitFor(t *testing.T, id string, what string, pred func(runtime.Replica) bool) runtime.Replica {
	t.Helper()
	deadline := time.After(30 * time.Second)
	next := 0
	for {
		e.mu.Lock()
		for ; next < len(e.seen); next++ {
			if r := e.seen[next]; r.Spec.ID == id && pred(r) {
				e.mu.Unlock()
				return r
			}
		}
		e.mu.Unlock()
		select {
		case <-e.ch:
		case <-deadline:
			t.Fatalf("no %s notification for %s; saw %+v", what, id, e.states(id))
		}
	}
}

func (e *events) states(id string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, r := range e.seen {
		if r.Spec.ID == id {
			out = append(out, string(r.State)+":"+r.Message)
		}
	}
	return out
}

func state(s runtime.State) func(runtime.Replica) bool {
	return func(r runtime.Replica) bool { return r.State == s }
}

// postJSON posts body to url, with key as a bearer token when set (the
// replica's own API key), and returns the status and the answer.
func postJSON(t *testing.T, url, body, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pidAlive(pid) {
		// A zombie still answers kill(0) until reaped; the runtime reaps its
		// children, so this loop ends once Wait returned.
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartHealthyServeStop(t *testing.T) {
	rt, dir := newRuntime(t, nil)
	ev := subscribe(t, rt)
	pidfile := filepath.Join(t.TempDir(), "pid")
	s := spec("ep.AllTraffic.gen1.0", "--startup-delay=100ms")
	s.ServedModelName = "my-model"
	s.Env = map[string]string{"HELPER_PIDFILE": pidfile, "HELPER_ENV": "from-spec"}
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, s.ID, "Starting", state(runtime.StateStarting))
	h := ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
	if h.Addr == "" || !strings.HasPrefix(h.Addr, "127.0.0.1:") {
		t.Fatalf("healthy replica addr %q", h.Addr)
	}
	resp, err := http.Post("http://"+h.Addr+"/invocations", "application/json", strings.NewReader(`{"inputs":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "env from-spec") {
		t.Fatalf("engine answer %s: spec env not passed", body)
	}
	pid := readPid(t, pidfile)
	if got, err := rt.Get(s.ID); err != nil || got.State != runtime.StateHealthy {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if err := rt.Stop(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	ev.waitFor(t, s.ID, "Stopped", state(runtime.StateStopped))
	if err := rt.Stop(context.Background(), s.ID); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	// A stopped id can be started again.
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatalf("restart of a stopped id: %v", err)
	}
	again := ev.waitFor(t, s.ID, "Healthy again", func(r runtime.Replica) bool { return r.State == runtime.StateHealthy && r.Addr != h.Addr })
	if again.Restarts != 0 {
		t.Fatalf("fresh start counts restarts: %+v", again)
	}
	logText, err := os.ReadFile(filepath.Join(dir, s.ID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listening on http://", "--served-model-name my-model", "--time-scale=0.01", "--port 0", "--model llama-3.1-8b", "--gpu h100"} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("log lacks %q:\n%s", want, logText)
		}
	}
}

func TestCrashRestartsWithBackoff(t *testing.T) {
	rt, dir := newRuntime(t, nil)
	ev := subscribe(t, rt)
	s := spec("crashy", "--exit-after=150ms", "--exit-code=7")
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	f := ev.waitFor(t, s.ID, "Failed", state(runtime.StateFailed))
	if !strings.Contains(f.Message, "exit status 7") || !strings.Contains(f.Message, filepath.Join(dir, "crashy.log")) {
		t.Fatalf("failure message %q lacks exit status or log path", f.Message)
	}
	ev.waitFor(t, s.ID, "restart", func(r runtime.Replica) bool { return r.Restarts >= 2 })
	if err := rt.Stop(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := rt.Get(s.ID); got.State != runtime.StateStopped {
		t.Fatalf("after Stop: %+v", got)
	}
}

func TestUnhealthyAndStartTimeout(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		opts    func(*local.Options)
		wantMsg string
	}{
		{name: "unhealthy after healthy", args: []string{"--unhealthy-after=200ms"}, wantMsg: "consecutive failed health checks"},
		{name: "never healthy", args: []string{"--startup-delay=1h"}, opts: func(o *local.Options) { o.StartTimeout = 300 * time.Millisecond }, wantMsg: "not healthy within 300ms"},
		{name: "never announces", args: []string{"--no-announce"}, opts: func(o *local.Options) { o.StartTimeout = 300 * time.Millisecond }, wantMsg: "not healthy within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, _ := newRuntime(t, tt.opts)
			ev := subscribe(t, rt)
			if err := rt.Start(context.Background(), spec("r", tt.args...)); err != nil {
				t.Fatal(err)
			}
			f := ev.waitFor(t, "r", "Failed", state(runtime.StateFailed))
			if !strings.Contains(f.Message, tt.wantMsg) {
				t.Fatalf("message %q, want it to contain %q", f.Message, tt.wantMsg)
			}
			ev.waitFor(t, "r", "restart", func(r runtime.Replica) bool { return r.Restarts >= 1 && r.State == runtime.StateStarting })
		})
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	rt, _ := newRuntime(t, func(o *local.Options) { o.StopGrace = 200 * time.Millisecond })
	ev := subscribe(t, rt)
	pidfile := filepath.Join(t.TempDir(), "pid")
	s := spec("stubborn", "--ignore-sigterm")
	s.Env = map[string]string{"HELPER_PIDFILE": pidfile}
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
	pid := readPid(t, pidfile)
	if err := rt.Stop(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

func TestStartValidation(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	tests := []struct {
		name string
		mod  func(*runtime.ReplicaSpec)
	}{
		{name: "empty id", mod: func(s *runtime.ReplicaSpec) { s.ID = "" }},
		{name: "path in id", mod: func(s *runtime.ReplicaSpec) { s.ID = "../etc" }},
		{name: "unknown model", mod: func(s *runtime.ReplicaSpec) { s.Model = "no-such-model" }},
		{name: "unknown gpu", mod: func(s *runtime.ReplicaSpec) { s.GPU = "tpu" }},
		{name: "bad mig profile", mod: func(s *runtime.ReplicaSpec) { s.MIGProfile = "9g.999gb" }},
		{name: "unknown engine", mod: func(s *runtime.ReplicaSpec) { s.Engine = "vllm" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec("ok-id")
			tt.mod(&s)
			if err := rt.Start(context.Background(), s); err == nil {
				t.Fatal("want error")
			}
		})
	}
	if _, err := rt.Get("ok-id"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Get after failed starts: %v", err)
	}
	if _, err := local.New(local.Options{Binary: "/nonexistent/capstan"}); err == nil {
		t.Fatal("New with a missing binary: want error")
	}
}

func TestDoubleStartAndClose(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	ev := subscribe(t, rt)
	for _, id := range []string{"a", "b"} {
		if err := rt.Start(context.Background(), spec(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Start(context.Background(), spec("a")); err == nil {
		t.Fatal("second Start of a running id: want error")
	}
	ev.waitFor(t, "a", "Healthy", state(runtime.StateHealthy))
	ev.waitFor(t, "b", "Healthy", state(runtime.StateHealthy))
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range rt.List() {
		if r.State != runtime.StateStopped {
			t.Fatalf("after Close: %+v", r)
		}
	}
	if err := rt.Start(context.Background(), spec("c")); err == nil {
		t.Fatal("Start after Close: want error")
	}
}

// TestReplicaDiesWithParent kills a process that runs the local runtime with
// SIGKILL (no cleanup runs) and checks the kernel takes its replica down too.
func TestReplicaDiesWithParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "pid")
	parent := exec.Command(exe, "runtime-parent", pidfile)
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	child := readPid(t, pidfile)
	if !pidAlive(child) {
		t.Fatal("replica not running")
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	// The orphan is reparented and reaped by init (or a subreaper), so
	// kill(0) fails once it is gone.
	waitGone(t, child)
}

// TestDevClockJumpDoesNotKillStartingReplica jumps a dev clock a week ahead
// while a replica loads: the start timeout must not fire for it.
func TestDevClockJumpDoesNotKillStartingReplica(t *testing.T) {
	dev := clock.NewDev()
	rt, _ := newRuntime(t, func(o *local.Options) {
		o.Clock = dev
		o.StartTimeout = 10 * time.Second
	})
	ev := subscribe(t, rt)
	if err := rt.Start(context.Background(), spec("loading", "--startup-delay=400ms")); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, "loading", "address", func(r runtime.Replica) bool { return r.Addr != "" })
	dev.Advance(7 * 24 * time.Hour)
	h := ev.waitFor(t, "loading", "Healthy", func(r runtime.Replica) bool {
		return r.State == runtime.StateHealthy || r.State == runtime.StateFailed
	})
	if h.State != runtime.StateHealthy || h.Restarts != 0 {
		t.Fatalf("after the jump: %+v (states %v)", h, ev.states("loading"))
	}
}

// TestRelativeBinaryPath: a relative engine binary (engine.binary:
// ./bin/capstan) names a file relative to the server's working directory,
// not the replica's own directory it runs in.
func TestRelativeBinaryPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(exe))
	rt, _ := newRuntime(t, func(o *local.Options) { o.Binary = "./" + filepath.Base(exe) })
	ev := subscribe(t, rt)
	s := spec("ep.AllTraffic.gen1.0")
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
}
