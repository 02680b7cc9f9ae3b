package spaces

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capstan-dev/capstan/internal/sandbox"
)

// safePath is the PATH a space's program is looked up on and runs with.
const safePath = "/usr/local/bin:/usr/bin:/bin"

// Variables that mark a space's processes, inherited by everything they
// start (Jupyter's kernels included), so a sweep finds them all.
const (
	envSpacesDir = "CAPSTAN_SPACES_DIR"
	envSpace     = "CAPSTAN_SPACE"
)

// inherited are the server's variables a space gets, as replicas do.
var inherited = []string{"LANG", "LC_ALL", "TZ"}

// ErrProgramNotFound: the template's program is not on the node.
var ErrProgramNotFound = errors.New("program not found")

// proc is one running space process.
type proc struct {
	key     string
	id      string // its placement in the pool
	gen     int64  // the workspace generation it runs
	cmd     *sandbox.Cmd
	port    int
	token   string
	base    string
	appType string
	idle    time.Duration
	done    chan struct{} // closed when the process has exited
	exitErr *error        // how it exited, once done is closed
	log     string

	// Guarded by Service.mu.
	healthy      bool
	lastSeen     string    // the app's own last-activity value
	lastActivity time.Time // by capstan's clock
	since        time.Time
	share        float64 // of its node, for the cost meter
	pricePerHour float64
}

// lookPath finds prog on safePath (or checks an absolute path), never on
// the server's own PATH.
func lookPath(prog string) (string, error) {
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		return "", fmt.Errorf("%q: a program with a '/' must be an absolute path: %w", prog, ErrProgramNotFound)
	}
	p, ok := sandbox.LookPath(prog, safePath)
	switch {
	case ok:
		return p, nil
	case strings.Contains(prog, "/"):
		return "", fmt.Errorf("%q is not an executable file: %w", prog, ErrProgramNotFound)
	}
	return "", fmt.Errorf("%q is not installed on the node (looked in %s): %w", prog, safePath, ErrProgramNotFound)
}

// expand replaces $(NAME) with env's value, as Kubernetes does for a
// container's command and args: $$ is a literal $, and an unknown name is
// left as written.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte(s[i])
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the space binds it; the space then fails and is retried.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// environ builds a space's whole environment: an allow-list, never the
// server's environment, so no credential of the server reaches it.
func environ(extra map[string]string) ([]string, map[string]string) {
	m := map[string]string{}
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range extra {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out, m
}

// launch starts prog in sb (unconfined when sb is nil), logging to
// logPath, in the cgroup whose descriptor is cgroup (-1: none).
func launch(sb *sandbox.Sandbox, prog sandbox.Program, logPath string, cgroup int) (*sandbox.Cmd, chan struct{}, *error, error) {
	cmd, err := sb.Command(prog)
	if err != nil {
		return nil, nil, nil, err
	}
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = sysProcAttr()
	setCgroup(cmd.SysProcAttr, cgroup)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, nil, nil, err
	}
	done := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		lf.Close()
		close(done)
	}()
	return cmd, done, &exitErr, nil
}

// closeFD closes a descriptor, if there is one (>= 0).
func closeFD(fd int) error {
	if fd < 0 {
		return nil
	}
	return syscall.Close(fd)
}

// sweep SIGKILLs every process whose environment marks it as a space of
// spacesDir (only the space key when key is set), and returns how many it
// found. Jupyter starts kernels in sessions of their own, so the process
// group alone would miss them; their inherited environment does not.
func sweep(spacesDir, key string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	markDir := []byte(envSpacesDir + "=" + spacesDir + "\x00")
	markKey := []byte(envSpace + "=" + key + "\x00")
	self := os.Getpid()
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		env = append(env, 0)
		if !bytes.Contains(env, markDir) || key != "" && !bytes.Contains(env, markKey) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// sweepOrphans kills everything a previous run of capstan left in dir.
func sweepOrphans(dir string) int { return sweep(dir, "") }

// logTail is the last lines of a space's log, for a failure message.
func logTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, " | ")
}
