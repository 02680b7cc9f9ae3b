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
// ClusterRole under deploy/operator, or the spaces' CRDs under
// deploy/spaces, differ from what controller-gen makes of the Go types and
// markers now: it runs each package's own go:generate line into a
// temporary directory and compares.
func TestGeneratedManifestsCurrent(t *testing.T) {
	for _, pkg := range []struct {
		dir  string
		subs []string
	}{
		{"../../deploy/operator", []string{"crds", "rbac"}},
		{"../../deploy/spaces", []string{"crds"}},
	} {
		t.Run(filepath.Base(pkg.dir), func(t *testing.T) { checkGenerated(t, pkg.dir, pkg.subs) })
	}
}

func checkGenerated(t *testing.T, rel string, subs []string) {
	dir, err := filepath.Abs(rel)
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
		t.Fatalf("%s/embed.go has no go:generate line", rel)
	}
	out := t.TempDir()
	args := strings.Fields(line)
	for i, a := range args {
		for _, sub := range subs {
			if a == "output:"+strings.TrimSuffix(sub, "s")+":dir="+sub {
				args[i] = "output:" + strings.TrimSuffix(sub, "s") + ":dir=" + filepath.Join(out, sub)
			}
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
	for _, sub := range subs {
		files, err := filepath.Glob(filepath.Join(out, sub, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("controller-gen wrote no %s: %v", sub, err)
		}
		for _, f := range files {
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(filepath.Join(dir, sub, filepath.Base(f)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s/%s/%s is not what controller-gen generates (run go generate ./%s and commit)", filepath.Base(dir), sub, filepath.Base(f), strings.TrimPrefix(rel, "../../"))
			}
		}
	}
}
