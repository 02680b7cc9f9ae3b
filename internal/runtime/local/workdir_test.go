package local

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWorkDirStaysInside checks workDir on its own, behind the id pattern
// that Start checks first: whatever id reaches it, the directory it returns
// is one entry directly under the replicas directory, never the directory
// itself (which setStopped would remove) or anything outside it.
func TestWorkDirStaysInside(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	r, err := New(Options{Binary: exe, LogDir: base})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id string
		ok bool
	}{
		{"ep.AllTraffic.gen1.0", true},
		{"a", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../x", false},
		{"a/../../x", false},
		{"a/b", false},
		{"/etc", false},
		{"a/", false},
	}
	for _, tt := range tests {
		dir, err := r.workDir(tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("workDir(%q) = %q, %v; want ok=%v", tt.id, dir, err, tt.ok)
			continue
		}
		if tt.ok && dir != filepath.Join(base, tt.id) {
			t.Errorf("workDir(%q) = %q", tt.id, dir)
		}
	}
}

// TestNewRemovesLeftWorkDirs: the work dirs a killed server left (its
// replicas died with it) go when the next runtime starts; logs stay.
func TestNewRemovesLeftWorkDirs(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	left := filepath.Join(base, "ep.AllTraffic.gen3.0")
	if err := os.MkdirAll(filepath.Join(left, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(base, "ep.AllTraffic.gen3.0.log")
	if err := os.WriteFile(logFile, []byte("engine log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Binary: exe, LogDir: base}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the previous run's work dir is still there: %v", err)
	}
	if _, err := os.Stat(logFile); err != nil {
		t.Errorf("the previous run's log went too: %v", err)
	}
}
