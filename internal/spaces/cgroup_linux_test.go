//go:build linux

package spaces

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/sandbox"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestCgroupsCatchEscapees: a space's program starts a child in a session
// of its own with an empty environment — out of its process group and
// invisible to the environment sweep. Stopping the space kills it through
// the space's cgroup; a new set over the same spaces directory (a restart
// after kill -9) sweeps what an old cgroup holds.
func TestCgroupsCatchEscapees(t *testing.T) {
	dir := t.TempDir()
	cg, err := openCgroups(dir)
	if err != nil {
		t.Skipf("no writable cgroup v2 hierarchy here: %v", err)
	}
	t.Cleanup(cg.release)

	start := func(key string) (escaped int) {
		t.Helper()
		pidFile := filepath.Join(dir, strings.ReplaceAll(key, "/", "_")+".pid")
		fd, err := cg.enter(key)
		if err != nil {
			t.Fatal(err)
		}
		cmd, _, _, err := launch(nil, sandbox.Program{Argv: []string{"/bin/sh", "-c", `setsid env -i /bin/sleep 600 & echo $! > "$0"; exec /bin/sleep 600`, pidFile},
			Dir: dir, Env: []string{"PATH=" + safePath}}, filepath.Join(dir, "log"), fd)
		_ = closeFD(fd)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		testutil.EventuallyErr(t, 10*time.Second, "the escaped child's pid", func() error {
			b, err := os.ReadFile(pidFile)
			if err == nil {
				escaped, err = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			return err
		})
		if sweep(dir, "") != 0 {
			t.Fatalf("the environment sweep found the space's processes; the test needs them hidden from it")
		}
		return escaped
	}

	a := start("default/a")
	if !running(a) {
		t.Fatalf("escaped child %d is not running", a)
	}
	if n := cg.kill("default/a"); n != 2 {
		t.Errorf("kill found %d processes in the space's cgroup, want 2 (the program and its escaped child)", n)
	}
	testutil.Eventually(t, 10*time.Second, "the escaped child killed with its space", func() bool { return !running(a) })
	if _, err := os.Stat(cg.dir("default/a")); !os.IsNotExist(err) {
		t.Errorf("the stopped space's cgroup is still there (%v)", err)
	}

	b := start("default/b")
	restarted, err := openCgroups(dir)
	if err != nil {
		t.Fatal(err)
	}
	if restarted.parent != cg.parent {
		t.Fatalf("a restart over the same spaces directory uses %s, the first run %s", restarted.parent, cg.parent)
	}
	if n := restarted.sweep(); n != 2 {
		t.Errorf("the restart's sweep found %d processes, want 2", n)
	}
	testutil.Eventually(t, 10*time.Second, "the escaped child killed by the restart's sweep", func() bool { return !running(b) })
	restarted.release()
	if _, err := os.Stat(cg.parent); !os.IsNotExist(err) {
		t.Errorf("the spaces' parent cgroup is still there after release (%v)", err)
	}
}

// running: pid exists and is not a zombie waiting for its parent.
func running(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
