package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// K8sBinDir is the folder of control-plane binaries (etcd, kube-apiserver,
// kubectl) that test/k8s/binaries.sh built, named by $CAPSTAN_K8S_BIN.
// go test never builds them (about ten minutes the first time): without
// the variable, or with a binary missing, the test fails at once with the
// command that builds them.
func K8sBinDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CAPSTAN_K8S_BIN")
	if dir == "" {
		t.Fatal("CAPSTAN_K8S_BIN is not set: this test runs etcd and kube-apiserver; build them (about ten minutes the first time, cached after) with\n" +
			"  export CAPSTAN_K8S_BIN=$(test/k8s/binaries.sh)\n(./test/run.sh does this)")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("CAPSTAN_K8S_BIN=%s: %v (rebuild with test/k8s/binaries.sh)", dir, err)
		}
	}
	return dir
}
