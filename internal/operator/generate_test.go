package operator_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedManifestsCurrent fails when the committed CRDs and
// ClusterRole under deploy/operator differ from what controller-gen makes
// of the Go types and markers now: it runs the package's own go:generate
// line into a temporary directory and compares.
func TestGeneratedManifestsCurrent(t *testing.T) {
	dir, err := filepath.Abs("../../deploy/operator")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "embed.go"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(string(src)) {
		if after, ok := strings.CutPrefix(l, "//go:generate "); ok {
			line = strings.TrimSpace(after)
		}
	}
	if line == "" {
		t.Fatal("deploy/operator/embed.go has no go:generate line")
	}
	out := t.TempDir()
	args := strings.Fields(line)
	for i, a := range args {
		switch a {
		case "output:crd:dir=crds":
			args[i] = "output:crd:dir=" + filepath.Join(out, "crds")
		case "output:rbac:dir=rbac":
			args[i] = "output:rbac:dir=" + filepath.Join(out, "rbac")
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
	for _, sub := range []string{"crds", "rbac"} {
		files, err := filepath.Glob(filepath.Join(out, sub, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("controller-gen wrote no %s: %v", sub, err)
		}
		for _, f := range files {
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(filepath.Join(dir, sub, filepath.Base(f)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("deploy/operator/%s/%s is not what controller-gen generates (run go generate ./deploy/operator and commit)", sub, filepath.Base(f))
			}
		}
	}
}
