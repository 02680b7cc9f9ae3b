package kubeapi

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// /version reports the Kubernetes release of the apimachinery capstan is
// built with.
func TestKubernetesVersionFollowsGoMod(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s.io/apimachinery v0\.(\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/apimachinery")
	}
	if want := "v1." + string(m[1]); KubernetesVersion != want {
		t.Fatalf("KubernetesVersion %s, but go.mod's apimachinery is Kubernetes %s", KubernetesVersion, want)
	}
	if v := serverVersion(); v.Major != "1" || !strings.HasPrefix(v.GitVersion, KubernetesVersion) || !strings.HasPrefix(KubernetesVersion, "v1."+v.Minor+".") {
		t.Fatalf("version %+v", v)
	}
}
