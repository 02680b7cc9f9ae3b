package operator_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
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
	want := []string{"Namespace", "CustomResourceDefinition", "CustomResourceDefinition", "ClusterRole", "ServiceAccount", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "Deployment", "Service",
		"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("install prints %v, want %v", got, want)
	}
	// The gateway reads, and writes only the CRDs' scale subresource (it
	// scales deployments from zero).
	var writes []string
	for doc := range strings.SplitSeq(b.String(), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil || r.Kind != "ClusterRole" || r.Name != "capstan-gateway" {
			continue
		}
		for _, rule := range r.Rules {
			if !slices.Equal(rule.Verbs, []string{"get", "list", "watch"}) {
				writes = append(writes, fmt.Sprintf("%v on %v", rule.Verbs, rule.Resources))
			}
		}
	}
	if want := "[get update patch] on [inferenceendpointconfigs/scale jumpstartmodels/scale]"; strings.Join(writes, "; ") != want {
		t.Errorf("the gateway's ClusterRole grants %q beyond reads, want %q", writes, want)
	}
	if strings.Contains(b.String(), "image: "+operator.DefaultImage) {
		t.Error("--image is not applied to every image (the gateway's too)")
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

// TestInstallApplies applies the kustomize base with kubectl to a bare API
// server, as a user installs the operator: every object is accepted and
// the CRDs become established (the operator's pods do not run here: no
// scheduler or kubelet).
func TestInstallApplies(t *testing.T) {
	e := startEnvWith(t, envOptions{bare: true})
	out := e.mustKubectl(t, "apply", "-k", "../../deploy/operator")
	for _, want := range []string{"namespace/capstan-system created", "inferenceendpointconfigs.inference.sagemaker.aws.amazon.com created",
		"jumpstartmodels.inference.sagemaker.aws.amazon.com created", "clusterrole.rbac.authorization.k8s.io/capstan-operator created",
		"serviceaccount/capstan-operator created", "validatingwebhookconfiguration.admissionregistration.k8s.io/capstan-operator-validating created",
		"deployment.apps/capstan-operator created", "service/capstan-operator-webhook created",
		"serviceaccount/capstan-gateway created", "clusterrole.rbac.authorization.k8s.io/capstan-gateway created",
		"deployment.apps/capstan-gateway created", "service/capstan-gateway created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k deploy/operator: no %q in:\n%s", want, out)
		}
	}
	e.mustKubectl(t, "wait", "--for=condition=Established", "--timeout=30s",
		"crd/inferenceendpointconfigs.inference.sagemaker.aws.amazon.com", "crd/jumpstartmodels.inference.sagemaker.aws.amazon.com")
	if got := e.mustKubectl(t, "api-resources", "--api-group=inference.sagemaker.aws.amazon.com", "--no-headers"); !strings.Contains(got, "iec") || !strings.Contains(got, "jsm") {
		t.Errorf("short names iec and jsm not served:\n%s", got)
	}
}
