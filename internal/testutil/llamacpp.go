package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	llamaOnce sync.Once
	llamaDir  string
	llamaErr  string
)

// LlamaCppDir is the directory holding llama.cpp's llama-server and the
// tiny GGUF model the real-engine tests serve: $CAPSTAN_LLAMACPP_DIR
// (test/run.sh exports it), else what test/engines/llamacpp.sh prints,
// which builds what is missing (about ten minutes the first time on 2
// cores, then cached). No engine is a failure, never a skip.
func LlamaCppDir(t testing.TB) string {
	t.Helper()
	llamaOnce.Do(func() {
		if d := os.Getenv("CAPSTAN_LLAMACPP_DIR"); d != "" {
			llamaDir = d
			return
		}
		cmd := exec.Command("bash", filepath.Join(RepoRoot(t), "test", "engines", "llamacpp.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			llamaErr = "test/engines/llamacpp.sh (llama-server and the tiny model this test needs): " + err.Error()
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		llamaDir = lines[len(lines)-1]
	})
	if llamaErr != "" {
		t.Fatal(llamaErr)
	}
	for _, f := range []string{"llama-server", "tiny.gguf"} {
		if _, err := os.Stat(filepath.Join(llamaDir, f)); err != nil {
			t.Fatalf("llama.cpp engine dir %s: %v", llamaDir, err)
		}
	}
	return llamaDir
}
