package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// LlamaCppDir is the directory holding llama.cpp's llama-server and the
// tiny GGUF model the real-engine tests serve: $CAPSTAN_LLAMACPP_DIR, which
// test/run.sh exports from test/engines/llamacpp.sh. The build takes
// minutes the first time, so go test never runs it: without the variable
// the test fails at once with the command to run. No engine is a failure,
// never a skip.
func LlamaCppDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CAPSTAN_LLAMACPP_DIR")
	if dir == "" {
		t.Fatal("CAPSTAN_LLAMACPP_DIR is not set: this test runs llama.cpp's llama-server; build it (about 8 minutes the first time, cached after) with\n" +
			"  export CAPSTAN_LLAMACPP_DIR=$(test/engines/llamacpp.sh | tail -1)\n(./test/run.sh does this)")
	}
	for _, f := range []string{"llama-server", "tiny.gguf"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("CAPSTAN_LLAMACPP_DIR=%s: %v (rebuild with test/engines/llamacpp.sh)", dir, err)
		}
	}
	return dir
}
