package spaces_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestCodeEditorInBrowser: a space of sagemaker-code-editor-template runs
// code-server (test/spaces/code-server.sh installs it) in its sandbox.
// Opened at its URL in headless Chromium, the VS Code workbench loads
// through capstan's proxy, signed in by the session cookie the proxy adds,
// with the space's home as its folder. Without that cookie code-server
// itself answers with its login page.
func TestCodeEditorInBrowser(t *testing.T) {
	if _, err := exec.LookPath("code-server"); err != nil {
		t.Fatalf("the Code Editor test needs code-server on PATH (test/spaces/code-server.sh installs it): %v", err)
	}
	s := startServer(t, "")
	s.apply(`apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: editor}
spec:
  displayName: editor
  templateRef: {name: sagemaker-code-editor-template, namespace: jupyter-k8s-system}
`)
	w := s.waitPhase("editor", "Running", 2*time.Minute)
	home := filepath.Join(s.dataDir, "spaces", "default", "editor", "home")
	if err := os.WriteFile(filepath.Join(home, "hello_capstan.py"), []byte("print('hello')\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The app behind the proxy: the workbench page for the proxy's
	// cookie, the login page for a request without it.
	code, page := s.do(http.MethodGet, "/spaces/default/editor/?folder="+home, nil, nil)
	if code != http.StatusOK || !strings.Contains(string(page), "vscode-workbench-web-configuration") {
		t.Fatalf("the workbench page through capstan: %d %.300s", code, page)
	}
	port := spacePort(t, s, "editor")
	resp, err := http.Get("http://" + port + "/?folder=" + home)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/login" {
		t.Errorf("code-server without capstan's cookie served %s, want its login page", resp.Request.URL)
	}

	ctx := testutil.NewBrowser(t, 1280, 800)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Navigate(w.Status.AccessURL)); err != nil {
		t.Fatalf("open the space: %v", err)
	}
	evalUntil(t, ctx, "the workbench with the space's files",
		`!!document.querySelector(".monaco-workbench") && document.body.innerText.includes("hello_capstan.py")`, 2*time.Minute)
	shot(t, ctx, "code-editor")
}

// spacePort is the loopback address the space's app listens on, read from
// the command line of the space's process (the port is not in its status).
func spacePort(t *testing.T, s *server, name string) string {
	t.Helper()
	for _, pid := range spaceProcesses(t, s.dataDir, "default/"+name) {
		b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(a, "--bind-addr="); ok {
				return v
			}
		}
	}
	t.Fatalf("no process of space %s with --bind-addr", name)
	return ""
}
