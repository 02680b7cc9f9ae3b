package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// newSandbox is a working sandbox hiding hide; bubblewrap is installed by
// the test command, so its absence fails the test.
func newSandbox(t *testing.T, hide ...string) *Sandbox {
	t.Helper()
	s, err := New(Options{Hide: hide})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Available(); err != nil {
		t.Fatalf("no sandbox (the test command installs bubblewrap): %v", err)
	}
	return s
}

// run starts p in s and returns its combined output.
func run(t *testing.T, s *Sandbox, p Program) string {
	t.Helper()
	cmd, err := s.Command(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return string(out)
}

// TestProgramCannotReachServer runs what a hostile space would: read the
// server's environment through /proc, its config file, a neighbour's home.
func TestProgramCannotReachServer(t *testing.T) {
	t.Setenv("CAPSTAN_TEST_SERVER_SECRET", "server-secret-4711")
	root := t.TempDir()
	data := filepath.Join(root, "data")
	own := filepath.Join(data, "spaces", "default", "mine", "home")
	other := filepath.Join(data, "spaces", "default", "theirs", "home")
	for _, d := range []string{own, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "token"), []byte("neighbour-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "capstan.yaml")
	if err := os.WriteFile(config, []byte("adminTokens: [config-secret]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, data, config)
	script := `
echo "uid=$(id -u)"
echo "procs=$(ls /proc | grep -c '^[0-9]')"
echo "config=[$(cat ` + config + ` 2>&1)]"
echo "spaces=[$(ls ` + filepath.Join(data, "spaces", "default") + `)]"
echo "neighbour=[$(cat ` + filepath.Join(other, "token") + ` 2>&1)]"
cat /proc/` + strconv.Itoa(os.Getpid()) + `/environ >/dev/null 2>&1 && echo "server environ readable"
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -q server-secret && echo "server secret seen"
echo mine > "$HOME/written" && echo "home writable"
touch /etc/capstan-sandbox-test 2>/dev/null && echo "root writable"
touch ` + filepath.Join(root, "escaped") + ` 2>/dev/null
pwd
`
	out := run(t, s, Program{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + own},
		Dir: own, Writable: []string{own}, Name: "space/default/mine"})
	wantUID := os.Getuid()
	if os.Geteuid() == 0 {
		wantUID = UID("space/default/mine")
	}
	for _, want := range []string{"uid=" + strconv.Itoa(wantUID), "spaces=[mine]", "home writable", own} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"config-secret", "neighbour-token", "server environ readable", "server secret seen", "root writable"} {
		if strings.Contains(out, bad) {
			t.Errorf("the program reached %q:\n%s", bad, out)
		}
	}
	if strings.Contains(out, "procs=") {
		n, _ := strconv.Atoi(strings.Fields(strings.SplitN(out, "procs=", 2)[1])[0])
		if n > 5 {
			t.Errorf("the program sees %d processes in /proc, want only its sandbox's:\n%s", n, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(own, "written")); err != nil || string(b) != "mine\n" {
		t.Errorf("the file written to the home is not on the host: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "escaped")); err == nil {
		t.Error("the program wrote outside its home")
	}
	if fi, err := os.Stat(own); err == nil {
		if got := int(fi.Sys().(*syscall.Stat_t).Uid); got != wantUID {
			t.Errorf("home belongs to uid %d, want the program's %d", got, wantUID)
		}
	}
}

// TestOwnUsers: as root, two programs get different users, neither root.
func TestOwnUsers(t *testing.T) {
	if a, b := UID("space/default/a"), UID("space/default/b"); a == b || a < uidBase || b < uidBase {
		t.Fatalf("UIDs %d and %d: want two distinct ones from %d", a, b, uidBase)
	}
	s := newSandbox(t)
	out := run(t, s, Program{Argv: []string{"/bin/sh", "-c", "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status"},
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Name: "replica/x"})
	if os.Geteuid() != 0 {
		if !strings.HasPrefix(out, strconv.Itoa(os.Getuid())+"\n") {
			t.Errorf("not root: want the server's uid, got %s", out)
		}
		return
	}
	for _, want := range []string{strconv.Itoa(UID("replica/x")) + "\n", "CapEff:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestGracefulSignal: SIGTERM to the group reaches the program, which
// finishes its handler; bubblewrap alone would have ended it at once.
func TestGracefulSignal(t *testing.T) {
	home := t.TempDir()
	s := newSandbox(t)
	script := `trap 'sleep 0.3; echo graceful > "$HOME/stopped"; exit 0' TERM; echo ready > "$HOME/ready"; while :; do sleep 0.05; done`
	cmd, err := s.Command(Program{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home},
		Dir: home, Writable: []string{home}, Name: "replica/graceful"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	testutil.Eventually(t, 10*time.Second, "the program to start", func() bool {
		_, err := os.Stat(filepath.Join(home, "ready"))
		return err == nil
	})
	cmd.SignalGroup(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sandbox exited with %v, want the program's own 0", err)
		}
	case <-time.After(10 * time.Second):
		cmd.SignalGroup(syscall.SIGKILL)
		t.Fatal("the sandbox did not end after SIGTERM")
	}
	if b, err := os.ReadFile(filepath.Join(home, "stopped")); err != nil || string(b) != "graceful\n" {
		t.Errorf("the program's TERM handler did not finish: %q, %v", b, err)
	}
}

// TestWithoutSandbox: with no sandbox a program starts only if the admin
// opted in; a bubblewrap path that is set but wrong is a config error.
func TestWithoutSandbox(t *testing.T) {
	if _, err := New(Options{Bubblewrap: "/nonexistent/bwrap"}); err == nil || !strings.Contains(err.Error(), "sandbox.bubblewrap") {
		t.Errorf("New with a missing bubblewrap: %v, want an error naming sandbox.bubblewrap", err)
	}
	p := Program{Argv: []string{"/bin/true"}, Dir: "/", Name: "space/x"}
	refused := &Sandbox{why: errors.New("bwrap is not installed")}
	if _, err := refused.Command(p); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "allowProcessesToReadServerSecrets") {
		t.Errorf("no sandbox, no opt-in: %v, want ErrUnavailable naming the setting", err)
	}
	allowed := &Sandbox{why: errors.New("bwrap is not installed"), allow: true}
	cmd, err := allowed.Command(p)
	if err != nil || cmd.Sandboxed || cmd.Path != "/bin/true" {
		t.Fatalf("opted in: %+v, %v; want /bin/true run as is", cmd, err)
	}
	if err := cmd.Run(); err != nil {
		t.Error(err)
	}
	if cmd, err := refused.Command(Program{Argv: []string{"/bin/true"}, Trusted: true}); err != nil || cmd.Sandboxed {
		t.Errorf("a trusted program with no sandbox: %+v, %v; want it run as is", cmd, err)
	}
	if _, err := newSandbox(t).Command(Program{Argv: []string{"true"}}); err == nil {
		t.Error("a relative program path was accepted")
	}
}

func TestUnsearchable(t *testing.T) {
	root := t.TempDir()
	// t.TempDir makes its directories 0700: open them, so only ours count.
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(root, "open")
	closed := filepath.Join(open, "closed")
	inner := filepath.Join(closed, "inner")
	if err := os.MkdirAll(filepath.Join(inner, "home"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(inner, 0o710); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mounts []mount
		want   []string
	}{
		{"the outermost closed directory", nil, []string{closed}},
		{"one a tmpfs covers", []mount{{kind: "--tmpfs", dst: open}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unsearchable([]string{filepath.Join(inner, "home")}, tc.mounts)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("unsearchable = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSymlinkedProgram: a program named by a symbolic link runs, whether
// the link is on the read-only root (as /usr/local/bin/code-server is) or
// in a folder the sandbox hides (then the link is made inside it).
func TestSymlinkedProgram(t *testing.T) {
	s := newSandbox(t)
	dir := t.TempDir() // under /tmp, which the sandbox replaces
	hidden := filepath.Join(dir, "say")
	if err := os.Symlink("/bin/echo", hidden); err != nil {
		t.Fatal(err)
	}
	onRoot := "/usr/bin/awk" // Debian's alternatives link
	if fi, err := os.Lstat(onRoot); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is not a symbolic link here (%v); the test needs one on the root", onRoot, err)
	}
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{onRoot, `BEGIN { print "from awk" }`}, "from awk"},
		{[]string{hidden, "from a hidden link"}, "from a hidden link"},
	} {
		p := Program{Argv: c.argv, Dir: "/", Name: "replica/link", ReadOnly: Installation(c.argv[0])}
		if out := run(t, s, p); strings.TrimSpace(out) != c.want {
			t.Errorf("%s printed %q, want %q", c.argv[0], out, c.want)
		}
	}
}
