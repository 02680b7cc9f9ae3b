package spaces_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/capstan-dev/capstan/internal/testutil"
	"github.com/capstan-dev/capstan/internal/workspace"
)

// The spaces tests drive the real binary (`capstan serve --dev-clock`), its
// CLI, the Jupyter server Debian packages (test/run.sh installs it), the
// Jupyter REST and kernel WebSocket APIs through capstan's proxy, and
// headless Chromium, as users do.

// migCluster is a default cluster of one ml.p5.4xlarge node whose H100 is
// one MIG slice, 7g.80gb: a space and a replica cannot both hold it.
const migCluster = `cluster:
  instanceGroups:
    - {name: mig, instanceType: ml.p5.4xlarge, count: 1, migLayout: all-7g.80gb}
`

type server struct {
	t       testing.TB
	URL     string
	dataDir string
	cfg     string
	bin     string
	proc    *testutil.Process
	cancel  context.CancelFunc
	token   string // admin token, when configured
}

func requireJupyter(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/jupyter-notebook"); err != nil {
		t.Fatalf("the spaces tests need Debian's jupyter-notebook (test/run.sh installs it): %v", err)
	}
}

// startServer runs capstan serve with the given capstan.yaml on a free
// port and a fresh data dir.
func startServer(t testing.TB, yaml string) *server {
	t.Helper()
	requireJupyter(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "capstan.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dataDir: filepath.Join(dir, "data"), cfg: cfg, bin: testutil.CapstanBinary(t)}
	s.start("127.0.0.1:0")
	return s
}

func (s *server) start(listen string) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.proc = testutil.Start(t, ctx, s.bin, "serve", "--config", s.cfg, "--listen", listen, "--data-dir", s.dataDir,
		"--dev-clock", "--engine-time-scale", "0.01")
	line := s.proc.WaitLine(t, "capstan serving on ", 60*time.Second)
	s.URL = strings.TrimSpace(line[strings.Index(line, "http://"):])
	t.Cleanup(func() { cancel(); _ = s.proc.Cmd.Wait() })
}

// capstan runs the CLI against the server and returns its output.
func (s *server) capstan(args ...string) (string, error) {
	s.t.Helper()
	args = append(args, "--server", s.URL)
	if s.token != "" {
		args = append(args, "--token", s.token)
	}
	p := testutil.Start(s.t, context.Background(), s.bin, args...)
	err := p.Cmd.Wait()
	time.Sleep(50 * time.Millisecond) // let the output reader drain
	return p.Output(), err
}

func (s *server) mustCapstan(args ...string) string {
	s.t.Helper()
	out, err := s.capstan(args...)
	if err != nil {
		s.t.Fatalf("capstan %v: %v\n%s", args, err, out)
	}
	return out
}

// apply writes yaml to a file and applies it with the CLI.
func (s *server) apply(yaml string) string {
	s.t.Helper()
	f := filepath.Join(s.t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return s.mustCapstan("apply", "-f", f)
}

// do sends one HTTP request to the server and returns the status and body.
func (s *server) do(method, path string, body []byte, hdr map[string]string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

const wsPath = "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces/"

// workspaceOf reads the stored workspace; ok is false on 404.
func (s *server) workspaceOf(name string) (workspace.Workspace, bool) {
	s.t.Helper()
	code, b := s.do(http.MethodGet, wsPath+name, nil, nil)
	if code == http.StatusNotFound {
		return workspace.Workspace{}, false
	}
	if code != http.StatusOK {
		s.t.Fatalf("get workspace %s: %d %s", name, code, b)
	}
	var w workspace.Workspace
	if err := json.Unmarshal(b, &w); err != nil {
		s.t.Fatal(err)
	}
	return w, true
}

// waitPhase waits for the workspace's phase.
func (s *server) waitPhase(name, phase string, timeout time.Duration) workspace.Workspace {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var w workspace.Workspace
	for time.Now().Before(deadline) {
		var ok bool
		if w, ok = s.workspaceOf(name); ok && w.Status.Phase == phase {
			return w
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, _ := s.capstan("describe", "ws", name)
	s.t.Fatalf("workspace %s never reached phase %s (last %q):\n%s", name, phase, w.Status.Phase, out)
	return w
}

// slowPoll caps the pause between two looks of a wait here: the
// conditions run the capstan CLI or scan /proc.
const slowPoll = 200 * time.Millisecond

// spaceProcesses lists the pids whose environment marks them as one of
// the spaces of dataDir (Jupyter and its kernels), zombies excluded.
func spaceProcesses(t testing.TB, dataDir, key string) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	abs, _ := filepath.Abs(filepath.Join(dataDir, "spaces"))
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		env = append(env, 0)
		if !bytes.Contains(env, []byte("CAPSTAN_SPACES_DIR="+abs+"\x00")) {
			continue
		}
		if key != "" && !bytes.Contains(env, []byte("CAPSTAN_SPACE="+key+"\x00")) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// startKernel starts a Python kernel in the space through the Jupyter REST
// API and returns its id.
func (s *server) startKernel(name string) string {
	s.t.Helper()
	st, b := s.do(http.MethodPost, "/spaces/default/"+name+"/api/kernels", []byte(`{"name":"python3"}`), nil)
	if st != http.StatusCreated {
		s.t.Fatalf("start kernel: %d %s", st, b)
	}
	var k struct{ ID string }
	if err := json.Unmarshal(b, &k); err != nil {
		s.t.Fatal(err)
	}
	return k.ID
}

// kernelURL is the WebSocket URL of a kernel's channels.
func (s *server) kernelURL(name, kernel string) string {
	return "ws" + strings.TrimPrefix(s.URL, "http") + "/spaces/default/" + name + "/api/kernels/" + kernel + "/channels"
}

// dialKernel opens a kernel's WebSocket with exactly hdr and returns the
// handshake's status (101 when it opened).
func (s *server) dialKernel(name, kernel string, hdr http.Header) int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, s.kernelURL(name, kernel), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		if resp == nil {
			s.t.Fatalf("kernel websocket: %v", err)
		}
		return resp.StatusCode
	}
	c.Close(websocket.StatusNormalClosure, "")
	return resp.StatusCode
}

// execute runs code in a new kernel of the space through capstan's proxy:
// the Jupyter REST API starts the kernel, its WebSocket channel runs the
// code, and the stream output comes back.
func (s *server) execute(name, code string) string {
	s.t.Helper()
	return s.executeWithin(name, code, 60*time.Second)
}

// executeWithin is execute for code that may run up to timeout.
func (s *server) executeWithin(name, code string, timeout time.Duration) string {
	t := s.t
	t.Helper()
	kernel := s.startKernel(name)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hdr := http.Header{}
	if s.token != "" {
		hdr.Set("Authorization", "Bearer "+s.token)
	}
	wsURL := s.kernelURL(name, kernel)
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("kernel websocket %s: %v", wsURL, err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	msgID := fmt.Sprintf("exec-%d", time.Now().UnixNano())
	req := map[string]any{
		"header":        map[string]any{"msg_id": msgID, "username": "test", "session": "capstan-test", "msg_type": "execute_request", "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "channel": "shell", "buffers": []any{},
		"content": map[string]any{"code": code, "silent": false, "store_history": false, "user_expressions": map[string]any{},
			"allow_stdin": false, "stop_on_error": true},
	}
	raw, _ := json.Marshal(req)
	if err := c.Write(ctx, websocket.MessageText, raw); err != nil {
		t.Fatalf("send execute_request: %v", err)
	}
	var out strings.Builder
	replied, idle := false, false
	for !replied || !idle {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read kernel channel (output so far %q): %v", out.String(), err)
		}
		var m struct {
			Header struct {
				MsgType string `json:"msg_type"`
			} `json:"header"`
			ParentHeader struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(data, &m) != nil || m.ParentHeader.MsgID != msgID {
			continue
		}
		switch m.Header.MsgType {
		case "stream":
			var sc struct{ Text string }
			_ = json.Unmarshal(m.Content, &sc)
			out.WriteString(sc.Text)
		case "error":
			t.Fatalf("the cell failed: %s", m.Content)
		case "execute_reply":
			replied = true
		case "status":
			var sc struct {
				State string `json:"execution_state"`
			}
			_ = json.Unmarshal(m.Content, &sc)
			idle = idle || sc.State == "idle"
		}
	}
	return out.String()
}

// writeFile writes content to a temporary file and returns its path.
func writeFile(t testing.TB, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// metrics is the server's /metrics text.
func (s *server) metrics() string {
	s.t.Helper()
	code, b := s.do(http.MethodGet, "/metrics", nil, nil)
	if code != http.StatusOK {
		s.t.Fatalf("/metrics: %d", code)
	}
	return string(b)
}

// metricValue is the value of one series of /metrics (its name and
// labels as exposed), failing when it is absent.
func (s *server) metricValue(series string) float64 {
	s.t.Helper()
	m := s.metrics()
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				s.t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	s.t.Fatalf("/metrics has no %s:\n%s", series, grepLines(m, "capstan_space"))
	return 0
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
