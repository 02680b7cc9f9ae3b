package testutil

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// RepoRoot returns the module root (the directory holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// CapstanBinary builds ./cmd/capstan once per test process and returns its path.
func CapstanBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capstan-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "capstan")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/capstan")
		cmd.Dir = RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/capstan: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartRedis starts a private, non-persistent redis-server on a free loopback
// port for the test and returns its redis:// URL. The test fails (it is not
// skipped) when redis-server is missing: the README's test command installs it.
func StartRedis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found on PATH; run the README's test command (test/run.sh), which installs it")
	}
	port := FreePort(t)
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	WaitTCP(t, addr, 10*time.Second)
	return "redis://" + addr + "/0"
}

// WaitTCP waits until something accepts connections on addr.
func WaitTCP(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listening on %s after %v: %v", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Process is a started child process whose output is kept for failure reports.
type Process struct {
	Cmd    *exec.Cmd
	mu     sync.Mutex
	output strings.Builder
	lines  chan string
}

// Output returns everything the process printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// WaitLine waits for a printed line containing substr and returns it.
func (p *Process) WaitLine(t testing.TB, substr string, timeout time.Duration) string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("process exited before printing %q; output:\n%s", substr, p.Output())
			}
			if strings.Contains(l, substr) {
				return l
			}
		case <-timer.C:
			t.Fatalf("no line containing %q after %v; output:\n%s", substr, timeout, p.Output())
		}
	}
}

// Start runs bin with args until the test ends (then SIGKILL), capturing
// stdout and stderr together.
func Start(t testing.TB, ctx context.Context, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &Process{Cmd: cmd, lines: make(chan string, 1024)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			l := sc.Text()
			p.mu.Lock()
			p.output.WriteString(l + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- l:
			default:
			}
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("output of %s %v:\n%s", filepath.Base(bin), args, p.Output())
		}
	})
	return p
}
