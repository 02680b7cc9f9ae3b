package spaces_test

import (
	"bytes"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
