package spaces_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestSpaceCannotReachServer: a template whose program
// reads the server's environment (/proc/$PPID/environ), its config file
// (/proc/$PPID/cwd and the path itself), its data directory, and a
// neighbour space's files and Jupyter token, and writes into the
// neighbour's home. In its sandbox it finds none of them and writes only
// its own home.
func TestSpaceCannotReachServer(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "server-env-secret")
	s := startServer(t, migCluster+"adminTokens: [config-file-secret]\n")
	s.token = "config-file-secret"
	spaces := filepath.Join(s.dataDir, "spaces", "default")
	s.apply(`apiVersion: workspace.jupyter.org/v1alpha1
kind: WorkspaceTemplate
metadata: {name: snoop}
spec:
  displayName: Reads what it should not
  defaultImage: python:3
  appType: web
  defaultResources: {requests: {cpu: 250m, memory: 512Mi}}
  defaultContainerConfig:
    command: [sh, -c]
    args:
      - |
        echo "secret of $CAPSTAN_SPACE" > "$HOME/mine.txt"
        sleep 2
        {
          echo "uid=$(id -u)"
          tr '\0' '\n' </proc/$PPID/environ
          cat /proc/$PPID/cwd/capstan.yaml ` + s.cfg + `
          cat /proc/[0-9]*/environ | tr '\0' '\n' | grep CAPSTAN_SPACE_TOKEN
          cat ` + spaces + `/*/home/mine.txt
          ls ` + s.dataDir + `
          for n in first second; do touch "` + spaces + `/$n/home/from-${CAPSTAN_SPACE#default/}"; done
          touch ` + s.dataDir + `/pwned && echo wrote-data-dir
        } > "$HOME/report.txt" 2>&1
        mkdir -p "$HOME$CAPSTAN_SPACE_BASE_URL" && exec python3 -m http.server "$(CAPSTAN_SPACE_PORT)" --bind 127.0.0.1 --directory "$HOME"
---
apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: first}
spec: {displayName: first, templateRef: {name: snoop}}
---
apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: second}
spec: {displayName: second, templateRef: {name: snoop}}
`)
	s.waitPhase("first", "Running", 60*time.Second)
	s.waitPhase("second", "Running", 60*time.Second)
	var report []byte
	testutil.EventuallyErr(t, 10*time.Second, "second's report", func() error {
		var err error
		report, err = os.ReadFile(filepath.Join(spaces, "second", "home", "report.txt"))
		return err
	})
	for _, leak := range []string{"server-env-secret", "config-file-secret", "secret of default/first", "capstan.db", "wrote-data-dir"} {
		if strings.Contains(string(report), leak) {
			t.Errorf("the space reached %q; its report:\n%s", leak, report)
		}
	}
	tokens := map[string]bool{}
	for _, l := range strings.Split(string(report), "\n") {
		if strings.HasPrefix(l, "CAPSTAN_SPACE_TOKEN=") {
			tokens[l] = true
		}
	}
	if len(tokens) != 1 {
		t.Errorf("the space sees %d Jupyter tokens, want only its own:\n%s", len(tokens), report)
	}
	if !strings.Contains(string(report), "secret of default/second") {
		t.Errorf("the space did not read its own home:\n%s", report)
	}
	testutil.EventuallyErr(t, 10*time.Second, "first's report", func() error {
		_, err := os.Stat(filepath.Join(spaces, "first", "home", "report.txt"))
		return err
	})
	for _, tc := range []struct {
		path  string
		wrote bool
	}{
		{filepath.Join(spaces, "first", "home", "from-first"), true},
		{filepath.Join(spaces, "second", "home", "from-second"), true},
		{filepath.Join(spaces, "first", "home", "from-second"), false},
		{filepath.Join(spaces, "second", "home", "from-first"), false},
		{filepath.Join(s.dataDir, "pwned"), false},
	} {
		if _, err := os.Stat(tc.path); (err == nil) != tc.wrote {
			t.Errorf("%s: written %v, want %v", tc.path, err == nil, tc.wrote)
		}
	}
	if os.Geteuid() == 0 && strings.Contains(string(report), "uid=0\n") {
		t.Errorf("a space of a root server runs as root:\n%s", report)
	}
}
