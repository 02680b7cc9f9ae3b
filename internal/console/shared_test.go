package console_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// The package's tests share one Chromium and one `capstan serve`, both
// started by the first test that asks for them and stopped by TestMain:
// starting Chromium takes seconds.
//
// Each test still browses alone: newBrowser opens it a tab with a browser
// context of its own (cookies, storage, cache and history no other test sees),
// closed when the test ends, and whatever watches the tab (UncaughtErrors)
// watches that test only.
//
// A test on the shared server (sharedServer) makes its objects under names no
// other test uses (name), checks what it made rather than whole lists, and
// deletes, when it ends, the endpoints and deployments it leaves running.
// A test that needs a server configured otherwise (credentials, a cluster),
// or asserts what a fresh server shows (an empty list, exact totals), starts
// its own with startServer.

func TestMain(m *testing.M) {
	code := m.Run()
	stopShared()
	os.Exit(code)
}

var shared struct {
	mu          sync.Mutex
	browser     context.Context // Chromium's first tab; tests' tabs are its children
	stopBrowser func()

	logMu sync.Mutex // not mu: Chromium logs while it starts and stops
	logT  testing.TB // the test whose tab is open: Chromium logs to it

	serverOnce sync.Once
	server     *server
	proc       *sharedProcess
	serverErr  error
}

// newBrowser opens a tab of width×height for t in the shared Chromium,
// starting Chromium if it has not started yet or has died.
func newBrowser(t testing.TB, width, height int) context.Context {
	t.Helper()
	shared.logMu.Lock()
	shared.logT = t
	shared.logMu.Unlock()
	t.Cleanup(func() {
		shared.logMu.Lock()
		if shared.logT == t {
			shared.logT = nil
		}
		shared.logMu.Unlock()
	})
	for attempt := 1; ; attempt++ {
		b := sharedBrowser(t)
		ctx, err := testutil.NewTab(t, b, width, height)
		if err == nil {
			return ctx
		}
		if attempt == 2 {
			t.Fatal(err)
		}
		t.Logf("%v: starting Chromium again", err)
		shared.mu.Lock()
		if shared.browser == b {
			shared.stopBrowser()
			shared.browser = nil
		}
		shared.mu.Unlock()
	}
}

// sharedBrowser is the shared Chromium, started on first use.
func sharedBrowser(t testing.TB) context.Context {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.browser == nil {
		b, stop, err := testutil.StartBrowser(1280, 800, browserLogf)
		if err != nil {
			t.Fatal(err)
		}
		shared.browser, shared.stopBrowser = b, stop
	}
	return shared.browser
}

// browserLogf logs Chromium's lines to the test whose tab is open.
func browserLogf(format string, args ...any) {
	shared.logMu.Lock()
	defer shared.logMu.Unlock()
	if shared.logT != nil {
		shared.logT.Logf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// sharedServer is the shared `capstan serve` (dev clock, no capstan.yaml),
// started on first use. When t fails, its log shows what the server printed
// while t ran.
func sharedServer(t testing.TB) *server {
	t.Helper()
	shared.serverOnce.Do(func() {
		shared.server, shared.proc, shared.serverErr = startSharedServer(testutil.CapstanBinary(t))
	})
	if shared.serverErr != nil {
		t.Fatalf("start the shared capstan serve: %v", shared.serverErr)
	}
	p := shared.proc
	select {
	case <-p.exited:
		t.Fatalf("the shared capstan serve has exited; its output:\n%s", p.output(0))
	default:
	}
	mark := p.size()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of the shared capstan serve during %s:\n%s", t.Name(), p.output(mark))
		}
	})
	return shared.server
}

// sharedProcess is the shared server's process and what it printed.
type sharedProcess struct {
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
	mu     sync.Mutex
	out    strings.Builder
}

func (p *sharedProcess) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Len()
}

func (p *sharedProcess) output(from int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()[from:]
}

// startSharedServer runs bin serve as startServer does, but owned by no test.
func startSharedServer(bin string) (*server, *sharedProcess, error) {
	dir, err := os.MkdirTemp("", "capstan-console-")
	if err != nil {
		return nil, nil, err
	}
	args, err := serveArgs(dir, "")
	if err != nil {
		return nil, nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	p := &sharedProcess{cmd: exec.Command(bin, args...), dir: dir, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		return nil, nil, err
	}
	pw.Close()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			l := sc.Text()
			p.mu.Lock()
			p.out.WriteString(l + "\n")
			p.mu.Unlock()
			if i := strings.Index(l, "http://"); i >= 0 && strings.Contains(l, "capstan serving on ") {
				select {
				case urls <- strings.TrimSpace(l[i:]):
				default:
				}
			}
		}
		pr.Close()
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	select {
	case url := <-urls:
		s := newServer(url, dir, bin, "")
		s.shared = true
		return s, p, nil
	case <-p.exited:
		err = fmt.Errorf("capstan serve exited before it served")
	case <-time.After(60 * time.Second):
		err = fmt.Errorf("capstan serve did not serve within 60s")
	}
	p.stop()
	return nil, nil, fmt.Errorf("%v; output:\n%s", err, p.output(0))
}

func (p *sharedProcess) stop() {
	_ = p.cmd.Process.Kill()
	<-p.exited
	_ = os.RemoveAll(p.dir)
}

// stopShared ends the shared Chromium and server.
func stopShared() {
	shared.mu.Lock()
	if shared.browser != nil {
		shared.stopBrowser()
		shared.browser = nil
	}
	shared.mu.Unlock()
	if shared.proc != nil {
		shared.proc.stop()
	}
}

// names is who uses which name on the shared server, and which run of each
// test is on (go test -count).
var names struct {
	sync.Mutex
	owner  map[string]string     // base name → the test that uses it
	runs   map[string]int        // test name → its runs so far
	suffix map[testing.TB]string // the test running → its names' suffix
}

// name is what t calls an object it makes on the shared server: base, which
// no other test may use (it fails the test that tries), and on a test's
// second and later runs in one process base-2, base-3, ….
func name(t testing.TB, base string) string {
	t.Helper()
	names.Lock()
	defer names.Unlock()
	if names.owner == nil {
		names.owner, names.runs, names.suffix = map[string]string{}, map[string]int{}, map[testing.TB]string{}
	}
	if o, ok := names.owner[base]; ok && o != t.Name() {
		t.Fatalf("%s uses the name %q on the shared server: pick another", o, base)
	}
	names.owner[base] = t.Name()
	sfx, ok := names.suffix[t]
	if !ok {
		names.runs[t.Name()]++
		if n := names.runs[t.Name()]; n > 1 {
			sfx = fmt.Sprintf("-%d", n)
		}
		names.suffix[t] = sfx
		t.Cleanup(func() {
			names.Lock()
			delete(names.suffix, t)
			names.Unlock()
		})
	}
	return base + sfx
}

// deleteWhenDone deletes, when t ends, the object at path (the manifests or
// spaces API) on the shared server, so that what it runs stops. On a
// server of t's own it does nothing: the server stops with t.
func (s *server) deleteWhenDone(t testing.TB, path string) {
	t.Helper()
	if !s.shared {
		return
	}
	t.Cleanup(func() {
		req, err := http.NewRequest(http.MethodDelete, s.URL+path, nil)
		if err != nil {
			t.Error(err)
			return
		}
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	})
}

// deleteEndpointWhenDone deletes, when t ends, endpoint name, its
// configuration and its model on the shared server (what is already gone is
// no error). On a server of t's own it does nothing.
func (s *server) deleteEndpointWhenDone(t testing.TB, name string) {
	t.Helper()
	if !s.shared {
		return
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = s.SM.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String(name)})
		_, _ = s.SM.DeleteEndpointConfig(ctx, &sm.DeleteEndpointConfigInput{EndpointConfigName: aws.String(name + "-cfg")})
		_, _ = s.SM.DeleteModel(ctx, &sm.DeleteModelInput{ModelName: aws.String(name + "-model")})
	})
}

// newNames lists the names in after that are not in before.
func newNames(before, after []string) []string {
	had := map[string]bool{}
	for _, n := range before {
		had[n] = true
	}
	var added []string
	for _, n := range after {
		if !had[n] {
			added = append(added, n)
		}
	}
	return added
}
