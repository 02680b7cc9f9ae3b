package operator_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/operator"
)

// TestInstall checks that `capstan operator install` prints every object of
// the kustomize base, and the same objects kubectl kustomize builds.
func TestInstall(t *testing.T) {
	var b bytes.Buffer
	if err := operator.WriteInstall(&b, operator.InstallOptions{Image: "registry.example/capstan:v1"}); err != nil {
		t.Fatal(err)
	}
	kinds := func(s string) []string {
		var out []string
		for doc := range strings.SplitSeq(s, "\n---\n") {
			var h struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &h); err != nil {
				t.Fatalf("install output is not YAML: %v", err)
			}
			if h.Kind != "" {
				out = append(out, h.Kind)
			}
		}
		return out
	}
	got := kinds(b.String())
	want := []string{"Namespace", "CustomResourceDefinition", "CustomResourceDefinition", "ClusterRole", "ServiceAccount", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "Deployment", "Service"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("install prints %v, want %v", got, want)
	}
	if !strings.Contains(b.String(), "image: registry.example/capstan:v1") || !strings.Contains(b.String(), "--model-image=registry.example/capstan:v1") {
		t.Error("--image is not applied to the operator and model images")
	}
	out, err := exec.Command("kubectl", "kustomize", "../../deploy/operator").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/operator: %v", err)
	}
	if n := len(kinds(string(out))); n != len(want) {
		t.Errorf("kubectl kustomize builds %d objects, install prints %d", n, len(want))
	}
}
