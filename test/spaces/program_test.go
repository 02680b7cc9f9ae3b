package spaces_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOtherProgram: a template whose app is not Jupyter runs its command
// (here a shell that writes a page and serves the space's home with
// Python's http.server), is checked by an HTTP GET of its base URL, is
// served through the proxy, and counts requests through the proxy as
// activity for idle shutdown.
func TestOtherProgram(t *testing.T) {
	s := startServer(t, migCluster)
	s.apply(`apiVersion: workspace.jupyter.org/v1alpha1
kind: WorkspaceTemplate
metadata: {name: static-site}
spec:
  displayName: A static site
  defaultImage: python:3
  appType: web
  defaultResources: {requests: {cpu: 250m, memory: 512Mi}}
  defaultContainerConfig:
    command: [sh, -c]
    args:
      - mkdir -p "$HOME$CAPSTAN_SPACE_BASE_URL" && echo "hello from $CAPSTAN_SPACE" > "$HOME$CAPSTAN_SPACE_BASE_URL/index.html" && exec python3 -m http.server "$(CAPSTAN_SPACE_PORT)" --bind 127.0.0.1 --directory "$HOME"
---
apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: web}
spec:
  displayName: web
  templateRef: {name: static-site}
  idleShutdown: {enabled: true, idleTimeoutInMinutes: 5}
`)
	s.waitPhase("web", "Running", 60*time.Second)
	code, b := s.do(http.MethodGet, "/spaces/default/web/index.html", nil, nil)
	if code != http.StatusOK || !strings.Contains(string(b), "hello from default/web") {
		t.Fatalf("through the proxy: %d %s", code, b)
	}
	// Requests through the proxy are its activity.
	s.mustCapstan("clock", "advance", "3m")
	time.Sleep(6 * time.Second)
	s.do(http.MethodGet, "/spaces/default/web/index.html", nil, nil)
	s.mustCapstan("clock", "advance", "3m")
	time.Sleep(6 * time.Second)
	if w, _ := s.workspaceOf("web"); w.Status.Phase != "Running" {
		t.Fatalf("stopped 3 minutes after a request, with a 5-minute idle timeout: phase %s", w.Status.Phase)
	}
	s.mustCapstan("clock", "advance", "6m")
	s.waitPhase("web", "Stopped", 60*time.Second)
}
