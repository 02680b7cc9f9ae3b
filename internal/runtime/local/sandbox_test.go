package local_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/sandbox"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// newSandbox is a working sandbox hiding hide (the test command installs
// bubblewrap).
func newSandbox(t *testing.T, hide ...string) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(sandbox.Options{Hide: hide})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Available(); err != nil {
		t.Fatalf("no sandbox (the test command installs bubblewrap): %v", err)
	}
	return sb
}

// TestReplicaSandboxed is a hostile space's attack from a replica's side: a
// hostile engine reads the server's config and data, a neighbour
// replica's files, and the server's process. In its sandbox it sees only
// its own directory, runs as a user of its own when the server is root,
// and still gets SIGTERM (not bubblewrap's SIGKILL) when stopped.
func TestReplicaSandboxed(t *testing.T) {
	secrets := t.TempDir()
	config := filepath.Join(secrets, "capstan.yaml")
	if err := os.WriteFile(config, []byte("adminTokens: [config-secret]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, logDir := newRuntime(t, func(o *local.Options) {
		o.Sandbox = newSandbox(t, config, o.LogDir)
	})
	neighbour := filepath.Join(logDir, "other.replica")
	if err := os.MkdirAll(neighbour, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(neighbour, "key"), []byte("neighbour-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := subscribe(t, rt)
	s := spec("ep.AllTraffic.gen1.0")
	s.Env = map[string]string{"HELPER_READ": strings.Join([]string{config, filepath.Join(neighbour, "key"),
		fmt.Sprintf("/proc/%d/environ", os.Getpid())}, string(filepath.ListSeparator))}
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h := ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
	resp, err := http.Get("http://" + h.Addr + "/view")
	if err != nil {
		t.Fatal(err)
	}
	view, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantUID := os.Getuid()
	if os.Geteuid() == 0 {
		wantUID = sandbox.UID("replica/" + s.ID)
	}
	if !bytes.Contains(view, []byte("uid="+strconv.Itoa(wantUID)+" ")) {
		t.Errorf("replica runs as the wrong user (want %d):\n%s", wantUID, view)
	}
	for _, leak := range []string{"config-secret", "neighbour-secret", "PATH="} {
		if bytes.Contains(view, []byte(leak)) {
			t.Errorf("the replica read %q:\n%s", leak, view)
		}
	}
	if n := procsSeen(view); n < 1 || n > 5 {
		t.Errorf("the replica sees %d processes, want only its sandbox's:\n%s", n, view)
	}
	if err := rt.Stop(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, s.ID, "Stopped", state(runtime.StateStopped))
	logText, _ := os.ReadFile(filepath.Join(logDir, s.ID+".log"))
	if !bytes.Contains(logText, []byte("helper engine: SIGTERM, exiting")) {
		t.Errorf("the engine did not get SIGTERM on stop; its log:\n%s", logText)
	}
}

func procsSeen(view []byte) int {
	_, rest, _ := bytes.Cut(view, []byte("procs="))
	n, _ := strconv.Atoi(string(bytes.Fields(rest)[0]))
	return n
}

// TestSandboxedReplicaDiesWithParent: kill -9 of capstan takes a sandboxed
// replica with it (bubblewrap runs with the parent-death signal, and the
// sandbox's processes die with it).
func TestSandboxedReplicaDiesWithParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf("orphan-%d-%d", os.Getpid(), time.Now().UnixNano())
	parent := exec.Command(exe, "runtime-parent-sandboxed", t.TempDir(), mark)
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the sandboxed replica to run", func() bool { return len(marked(mark)) > 0 })
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	testutil.EventuallyErr(t, 10*time.Second, "the replica to die with its parent", func() error {
		if left := marked(mark); len(left) > 0 {
			return fmt.Errorf("processes %v still run", left)
		}
		return nil
	})
}

// marked are the processes whose environment holds HELPER_MARK=mark.
func marked(mark string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	want := []byte("HELPER_MARK=" + mark + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && bytes.Contains(append(env, 0), want) {
			out = append(out, pid)
		}
	}
	return out
}
