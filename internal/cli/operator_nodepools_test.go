package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperatorNodePools runs `capstan operator nodepools --cluster-config`:
// a class and a pool per group on stdout, and a bad file's error naming it.
func TestOperatorNodePools(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "cluster.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for f, s := range map[string]string{
		good: "name: ml\ngroups:\n  - {name: a10g, instanceType: ml.g5.12xlarge, count: 1, maxCount: 4}\n  - {name: spot, instanceType: ml.g5.12xlarge, count: 2, spot: true}\n",
		bad:  "name: ml\ngroups: [{name: a, instanceType: ml.nope.xlarge}]\n",
	} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, file string
		wantOut    []string
		wantErr    string
	}{
		{name: "two groups", file: good, wantOut: []string{"kind: NodePool", "name: ml-a10g", "name: ml-spot", "- spot", `nvidia.com/gpu: "16"`}},
		{name: "unknown instance type", file: bad, wantErr: "groups[0] (a): instanceType"},
		{name: "missing file", file: filepath.Join(dir, "none.yaml"), wantErr: "--cluster-config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := NewRootCommand()
			var out, errOut bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&errOut)
			root.SetArgs([]string{"operator", "nodepools", "--cluster-config", tt.file})
			err := root.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			if n := strings.Count(out.String(), "kind: NodePool\n"); n != 2 {
				t.Errorf("%d NodePools, want 2:\n%s", n, out.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("no %q in:\n%s", w, out.String())
				}
			}
		})
	}
}
