//go:build linux

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// capstanBinary returns $CAPSTAN_BIN when set (test/run.sh builds
// bin/capstan first), else builds ./cmd/capstan once into a temp dir.
func capstanBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CAPSTAN_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("CAPSTAN_BIN: %v", err)
		}
		return abs
	}
	out := filepath.Join(t.TempDir(), "capstan")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/capstan")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/capstan: %v\n%s", err, b)
	}
	return out
}

// server runs `capstan serve` on one data dir across restarts; its address
// changes with every start (--listen 127.0.0.1:0), so clients read url()
// per request.
type server struct {
	bin, dataDir, logPath string
	// args are extra `capstan serve` flags (e.g. --config) for every start.
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	addr string // http://HOST:PORT of the live process, "" while down
	exit chan struct{}
}

func newServer(t *testing.T, bin, dir string) *server {
	s := &server{bin: bin, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "server.log")}
	// Registered after the temp dir, so it runs before the dir is removed:
	// the server, then any engine left in our data dir, are killed by pid.
	t.Cleanup(func() {
		s.kill()
		for _, e := range engines(s.dataDir) {
			_ = syscall.Kill(e.pid, syscall.SIGKILL)
		}
		if *flagLog != "" {
			if b, err := os.ReadFile(s.logPath); err == nil {
				_ = os.WriteFile(*flagLog, b, 0o644)
			}
		}
		if t.Failed() {
			if b, err := os.ReadFile(s.logPath); err == nil {
				tail := string(b)
				if len(tail) > 16<<10 {
					tail = tail[len(tail)-16<<10:]
				}
				t.Logf("server log (tail):\n%s", tail)
			}
		}
	})
	return s
}

func (s *server) url() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.addr == "" {
		return 0
	}
	return s.cmd.Process.Pid
}

// start launches the server and waits for its "capstan serving on" line.
func (s *server) start() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== chaos: start at %s\n", time.Now().Format(time.RFC3339Nano))
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", s.dataDir,
		"--engine-time-scale", "0.01", "--dev-clock"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exit := make(chan struct{})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if a, ok := strings.CutPrefix(line, "capstan serving on "); ok {
				select {
				case found <- strings.TrimSpace(a):
				default:
				}
			}
		}
		_, _ = io.Copy(logf, stdout)
		_ = cmd.Wait()
		logf.Close()
		close(exit)
	}()
	select {
	case a := <-found:
		s.mu.Lock()
		s.cmd, s.addr, s.exit = cmd, a, exit
		s.mu.Unlock()
		return nil
	case <-exit:
		return fmt.Errorf("capstan serve exited before serving (log: %s)", s.logPath)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-exit
		return fmt.Errorf("capstan serve did not print its address within 60s (log: %s)", s.logPath)
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (s *server) kill() { s.signal(syscall.SIGKILL, 0) }

// stop sends SIGTERM and waits (bounded) for a graceful exit; false when it
// had to be killed.
func (s *server) stop(bound time.Duration) bool { return s.signal(syscall.SIGTERM, bound) }

func (s *server) signal(sig syscall.Signal, bound time.Duration) bool {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd, s.addr = nil, ""
	s.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		<-exit
		return true
	}
	select {
	case <-exit:
		return true
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		<-exit
		return false
	}
}

// engine is a `capstan engine sim` process whose replica log (its stderr)
// lies in our data dir: that is how it is told apart from other tests'.
type engine struct {
	pid, ppid int
}

// engines lists the live (not zombie) engine processes of dataDir from
// /proc, one per replica: a sandboxed replica is bubblewrap, its reaper and
// the engine, and only the outermost, whose parent is no engine, counts (a
// reaper whose bubblewrap died counts on its own, as an orphan).
func engines(dataDir string) []engine {
	all := engineProcs(dataDir)
	inner := map[int]bool{}
	for _, e := range all {
		inner[e.pid] = true
	}
	var out []engine
	for _, e := range all {
		if !inner[e.ppid] {
			out = append(out, e)
		}
	}
	return out
}

// engineProcs are all processes whose command line runs `engine sim` and
// whose stderr is a log in dataDir.
func engineProcs(dataDir string) []engine {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	var out []engine
	for _, p := range procs {
		argv, err := p.CmdLine()
		if err != nil || !strings.Contains(strings.Join(argv, "\x00")+"\x00", "engine\x00sim\x00") {
			continue
		}
		logPath, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/2", p.PID))
		if err != nil || !strings.HasPrefix(logPath, dataDir+string(os.PathSeparator)) {
			continue
		}
		st, err := p.Stat()
		if err != nil || st.State == "Z" || st.State == "X" {
			continue
		}
		out = append(out, engine{pid: p.PID, ppid: st.PPID})
	}
	return out
}

// orphans waits up to bound for every engine of dataDir not parented by
// livePID (0: none may remain) to be gone, and returns those that remain.
func orphans(ctx context.Context, dataDir string, livePID int, bound time.Duration) []engine {
	deadline := time.Now().Add(bound)
	for {
		var left []engine
		for _, e := range engines(dataDir) {
			if livePID == 0 || e.ppid != livePID {
				left = append(left, e)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
