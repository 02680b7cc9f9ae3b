package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func runKubeconfig(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Execute(context.Background(), append([]string{"kubeconfig"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// capstan kubeconfig prints a kubeconfig clientcmd loads, with the server
// and the admin token; --merge adds it to an existing kubeconfig, keeping
// what was there, and makes it current.
func TestKubeconfig(t *testing.T) {
	t.Setenv("CAPSTAN_TOKEN", "")
	out, stderr, code := runKubeconfig(t, "--server", "http://127.0.0.1:9090", "--token", "admin-0123")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	cfg, err := clientcmd.Load([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "capstan" || cfg.Clusters["capstan"].Server != "http://127.0.0.1:9090" ||
		cfg.AuthInfos["capstan"].Token != "admin-0123" || cfg.Contexts["capstan"].Namespace != "default" {
		t.Fatalf("kubeconfig:\n%s", out)
	}

	path := filepath.Join(t.TempDir(), "config")
	existing := clientcmdapi.NewConfig()
	existing.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod.example:6443"}
	existing.AuthInfos["prod"] = &clientcmdapi.AuthInfo{Token: "prod-token"}
	existing.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "prod"}
	existing.CurrentContext = "prod"
	if err := clientcmd.WriteToFile(*existing, path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	t.Setenv("CAPSTAN_TOKEN", "env-token")
	out, stderr, code = runKubeconfig(t, "--server", "http://127.0.0.1:9090", "--merge", "--context", "lab")
	if code != 0 || !strings.Contains(out, `context "lab"`) {
		t.Fatalf("merge: exit %d: %s %s", code, out, stderr)
	}
	merged, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if merged.CurrentContext != "lab" || merged.AuthInfos["lab"].Token != "env-token" || merged.Contexts["prod"] == nil ||
		merged.AuthInfos["prod"].Token != "prod-token" {
		t.Fatalf("merged kubeconfig: %+v", merged)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the kubeconfig holding tokens is readable by others: %v %v", fi.Mode(), err)
	}

	if _, stderr, code := runKubeconfig(t, "--server", "127.0.0.1:9090"); code == 0 || !strings.Contains(stderr, "want an http:// or https:// URL") {
		t.Fatalf("a server without a scheme: exit %d, %s", code, stderr)
	}
}
