package spaces_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestKill9LeavesNoOrphans: capstan dies with SIGKILL while a space runs
// Jupyter with a kernel; after the restart no process of the old space is
// left, and the space runs again (a new process) with its files.
func TestKill9LeavesNoOrphans(t *testing.T) {
	s := startServer(t, migCluster)
	s.apply(workspaceYAML("nb", "Running", ""))
	s.waitPhase("nb", "Running", 90*time.Second)
	// The cell also leaves a process in a session of its own, which
	// neither the kernel's death nor the process group reaches: only the
	// restart's sweep can.
	got := s.execute("nb", `import subprocess; open("kept.txt", "w").write("still here"); p = subprocess.Popen(["sleep", "600"], start_new_session=True); print("ok", p.pid)`)
	if !strings.Contains(got, "ok") {
		t.Fatalf("cell printed %q", got)
	}
	before := spaceProcesses(t, s.dataDir, "default/nb")
	if len(before) < 3 {
		t.Fatalf("want the Jupyter server, a kernel and the detached sleep running, found pids %v", before)
	}
	addr := strings.TrimPrefix(s.URL, "http://")
	if err := s.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.proc.Cmd.Wait()
	s.start(addr)
	s.waitPhase("nb", "Running", 90*time.Second)
	for _, pid := range before {
		if alive(pid) {
			t.Errorf("process %d of the killed server's space is still running", pid)
		}
	}
	code, b := s.do(http.MethodGet, "/spaces/default/nb/api/contents/kept.txt", nil, nil)
	if code != http.StatusOK || !strings.Contains(string(b), "still here") {
		t.Fatalf("the file written before the kill: %d %s", code, b)
	}
}

// TestEscapedChildrenDieWithTheSpace: a space's program starts a child in
// a session of its own with an empty environment (`setsid env -i`), out of
// its process group and without the variables the sweep looks for. It
// dies when its space is deleted, and when capstan is killed with SIGKILL
// and restarted: each space runs in a cgroup of its own.
func TestEscapedChildrenDieWithTheSpace(t *testing.T) {
	s := startServer(t, migCluster)
	s.apply(`apiVersion: workspace.jupyter.org/v1alpha1
kind: WorkspaceTemplate
metadata: {name: escaper}
spec:
  displayName: Leaves a child behind
  defaultImage: python:3
  appType: web
  defaultResources: {requests: {cpu: 250m, memory: 512Mi}}
  defaultContainerConfig:
    command: [sh, -c]
    args:
      - setsid env -i /bin/sleep "6$CAPSTAN_SPACE_PORT" & echo "6$CAPSTAN_SPACE_PORT" > "$HOME/escaped.arg"; mkdir -p "$HOME$CAPSTAN_SPACE_BASE_URL" && exec python3 -m http.server "$(CAPSTAN_SPACE_PORT)" --bind 127.0.0.1 --directory "$HOME"
---
apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: deleted}
spec: {displayName: deleted, templateRef: {name: escaper}}
---
apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: survivor}
spec: {displayName: survivor, templateRef: {name: escaper}}
`)
	// escaped waits for name's program to start a child other than old.
	// The space names it by its sleep's argument (its pid inside the
	// sandbox means nothing out here).
	escaped := func(name string, old int) int {
		t.Helper()
		s.waitPhase(name, "Running", 60*time.Second)
		var pid int
		testutil.EventuallyErr(t, 10*time.Second, name+"'s escaped child", func() error {
			b, err := os.ReadFile(filepath.Join(s.dataDir, "spaces", "default", name, "home", "escaped.arg"))
			if err != nil {
				return err
			}
			if pid = pidOf("/bin/sleep", strings.TrimSpace(string(b))); pid == 0 {
				return fmt.Errorf("no process runs /bin/sleep %s", b)
			}
			if pid == old {
				return fmt.Errorf("still the previous run's pid %d", pid)
			}
			return nil
		})
		if !alive(pid) {
			t.Fatalf("%s's escaped child %d is not running", name, pid)
		}
		if slices.Contains(spaceProcesses(t, s.dataDir, "default/"+name), pid) {
			t.Fatalf("%s's escaped child %d still carries the space's variables; the test needs it without", name, pid)
		}
		return pid
	}
	deleted, survivor := escaped("deleted", 0), escaped("survivor", 0)

	s.mustCapstan("delete", "ws", "deleted")
	testutil.Eventually(t, 30*time.Second, "the deleted space's escaped child gone", func() bool { return !alive(deleted) })

	addr := strings.TrimPrefix(s.URL, "http://")
	if err := s.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.proc.Cmd.Wait()
	s.start(addr)
	testutil.Eventually(t, 30*time.Second, "the escaped child of the killed server's space gone", func() bool { return !alive(survivor) })
	// The space runs again, and leaves a new child; deleting it takes that.
	again := escaped("survivor", survivor)
	s.mustCapstan("delete", "ws", "survivor")
	testutil.Eventually(t, 30*time.Second, "the restarted space's escaped child gone with it", func() bool { return !alive(again) })
}

// TestIdleShutdown: with idleShutdown on, a space without activity for
// its timeout (by the server's clock) is stopped, its desiredStatus set
// to Stopped and an event says why; its files stay.
func TestIdleShutdown(t *testing.T) {
	s := startServer(t, migCluster)
	s.apply(workspaceYAML("idle", "Running", "  idleShutdown: {enabled: true, idleTimeoutInMinutes: 5}\n"))
	s.waitPhase("idle", "Running", 90*time.Second)
	s.execute("idle", `print("busy")`)
	// Less than the timeout: still running after the next activity reads.
	s.mustCapstan("clock", "advance", "3m")
	time.Sleep(6 * time.Second)
	if w, _ := s.workspaceOf("idle"); w.Status.Phase != "Running" {
		t.Fatalf("stopped after 3 idle minutes of 5: phase %s", w.Status.Phase)
	}
	s.mustCapstan("clock", "advance", "6m")
	w := s.waitPhase("idle", "Stopped", 60*time.Second)
	if w.Spec.DesiredStatus != "Stopped" {
		t.Errorf("desiredStatus %q after idle shutdown, want Stopped", w.Spec.DesiredStatus)
	}
	if out := s.mustCapstan("describe", "ws", "idle"); !strings.Contains(out, "IdleShutdown") {
		t.Errorf("no IdleShutdown event:\n%s", out)
	}
	if ps := spaceProcesses(t, s.dataDir, "default/idle"); len(ps) != 0 {
		t.Errorf("processes left after idle shutdown: %v", ps)
	}
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// pidOf is the process running exactly argv, or 0.
func pidOf(argv ...string) int {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Equal(b, want) && alive(pid) {
			return pid
		}
	}
	return 0
}
