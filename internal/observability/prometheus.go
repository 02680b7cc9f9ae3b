package observability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// DefaultListen is where Prometheus listens unless told otherwise.
const DefaultListen = "127.0.0.1:9090"

// inheritedEnv is all of the caller's environment a Prometheus child gets:
// where programs and the home and temp dirs are, and locale and time zone.
// Credentials in the caller's environment (AWS keys, CAPSTAN_TOKEN) stay
// out of it.
var inheritedEnv = []string{"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL", "LC_CTYPE"}

// Env is the allow-listed environment for a Prometheus child, from
// lookup (os.LookupEnv in production).
func Env(lookup func(string) (string, bool)) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// StartOptions say how to run Prometheus.
type StartOptions struct {
	// Binary is the prometheus executable (a path, or a name looked up on
	// PATH; default "prometheus").
	Binary string
	// ConfigFile is the prometheus.yml to load; DataDir holds its TSDB.
	ConfigFile, DataDir string
	// Listen is host:port for its web UI and API (default DefaultListen).
	Listen string
	// Log receives Prometheus' own output (default: discarded).
	Log io.Writer
	// Clock paces the readiness polls (default the real clock).
	Clock clock.Clock
}

// Prometheus is a running Prometheus child process.
type Prometheus struct {
	// URL is its base URL, e.g. http://127.0.0.1:9090.
	URL string

	cmd  *exec.Cmd
	clk  clock.Clock
	done chan struct{}
	err  error // the process's exit, once done is closed
}

// Start launches Prometheus with o's config, data dir and listen address
// and returns at once; WaitReady waits until it serves.
func Start(o StartOptions) (*Prometheus, error) {
	if o.Binary == "" {
		o.Binary = "prometheus"
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.ConfigFile == "" || o.DataDir == "" {
		return nil, errors.New("prometheus: a config file and a data dir are required")
	}
	listen, err := resolveListen(o.Listen)
	if err != nil {
		return nil, err
	}
	o.Listen = listen
	bin, err := exec.LookPath(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("prometheus binary %q not found (install Debian's prometheus package or pass --prometheus PATH): %w", o.Binary, err)
	}
	cmd := exec.Command(bin,
		"--config.file="+o.ConfigFile,
		"--storage.tsdb.path="+filepath.Join(o.DataDir, "tsdb"),
		"--web.listen-address="+o.Listen,
		"--log.level=info",
	)
	cmd.Env = Env(os.LookupEnv)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	// Its own process group: a terminal's Ctrl-C reaches capstan, which
	// stops Prometheus in order instead of both racing.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Prometheus{URL: "http://" + o.Listen, cmd: cmd, clk: o.Clock, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// resolveListen checks host:port and turns port 0 into a port that is free
// now: Prometheus would take any port for 0 without saying which.
func resolveListen(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen address %q: want host:port: %w", listen, err)
	}
	if port != "0" {
		return listen, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("listen address %q: %w", listen, err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Done is closed when the process has exited; Err then says how.
func (p *Prometheus) Done() <-chan struct{} { return p.done }

// Err is the process's exit error once Done is closed.
func (p *Prometheus) Err() error {
	select {
	case <-p.done:
		if p.err == nil {
			return errors.New("prometheus exited")
		}
		return fmt.Errorf("prometheus exited: %w", p.err)
	default:
		return nil
	}
}

// WaitReady polls /-/ready until Prometheus answers 200, it exits, or ctx
// ends.
func (p *Prometheus) WaitReady(ctx context.Context) error {
	t := p.clk.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return p.Err()
		case <-ctx.Done():
			return fmt.Errorf("prometheus at %s not ready: %w", p.URL, ctx.Err())
		case <-t.C():
		}
	}
}

// StopTimeout bounds a clean stop before Stop kills the process.
const StopTimeout = 10 * time.Second

// Stop sends SIGTERM (Prometheus flushes and exits), waits up to
// StopTimeout, then kills it. It returns once the process is gone.
func (p *Prometheus) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := p.clk.NewTimer(StopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C():
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
