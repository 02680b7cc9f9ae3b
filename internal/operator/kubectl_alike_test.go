package operator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubectlAnswersAlike runs one kubectl session twice, against the
// operator's kube-apiserver (etcd, the CRDs, the webhook, the operator)
// and against `capstan serve`, and compares what kubectl prints for the
// verbs both serve: apply (created, unchanged, configured), server-side
// apply, get -o jsonpath, scale, patch, label, a refused unknown field,
// delete and get of what is gone. Where the two word an error their own
// way, both must fail and name the same field or object.
func TestKubectlAnswersAlike(t *testing.T) {
	capstanBin := os.Getenv("CAPSTAN_BIN")
	if capstanBin == "" {
		t.Fatal("CAPSTAN_BIN is not set: ./test/run.sh builds capstan and sets it")
	}
	e := startEnvWith(t, envOptions{inProcess: true})
	dir := t.TempDir()
	capstanConfig := startCapstanServe(t, capstanBin, dir)
	jsm := func(file string, replicas, extra string) string {
		p := filepath.Join(dir, file)
		doc := "apiVersion: inference.sagemaker.aws.amazon.com/v1\nkind: JumpStartModel\nmetadata: {name: alike, namespace: default}\nspec:\n" +
			"  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}\n" +
			"  server: {instanceType: ml.g5.8xlarge}\n  replicas: " + replicas + "\n" + extra
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one, two, bad := jsm("one.yaml", "0", ""), jsm("two.yaml", "1", ""), jsm("bad.yaml", "1", "  replicaz: 2\n")
	steps := []struct {
		args string
		// fails: both must fail, and each error must name all of these.
		fails []string
	}{
		{args: "apply -f " + one},
		{args: "apply -f " + one},
		{args: "apply -f " + two},
		{args: "get jsm alike -o jsonpath={.spec.replicas}"},
		{args: "scale jsm alike --replicas=2"},
		{args: "get jsm alike -o jsonpath={.spec.replicas}"},
		{args: "patch jsm alike --type=merge -p {\"spec\":{\"replicas\":0}}"},
		{args: "label jsm alike team=a"},
		{args: "get jsm -l team=a -o name"},
		{args: "apply -f " + bad, fails: []string{"replicaz"}},
		{args: "apply --server-side --force-conflicts -f " + one},
		{args: "get jsm alike -o jsonpath={.spec.replicas}"},
		{args: "get jsm --chunk-size=1 -o name"},
		{args: "get jsm alike --subresource=status -o jsonpath={.metadata.name}"},
		{args: "explain jsm.spec.server"},
		{args: "explain jsm.spec.server --output=plaintext-openapiv2"},
		{args: "delete jsm alike --dry-run=server"},
		{args: "get jsm alike -o name"},
		{args: "delete jsm alike --wait=true"},
		{args: "get jsm alike", fails: []string{`"alike" not found`}},
	}
	for _, s := range steps {
		args := strings.Fields(s.args)
		realOut, realErr := kubectlRun(t, e.kubectlBin, e.kubeconfig, args)
		capOut, capErr := kubectlRun(t, e.kubectlBin, capstanConfig, args)
		if s.fails != nil {
			if realErr == nil || capErr == nil {
				t.Fatalf("kubectl %s: API server %v, capstan %v; want both to fail\nAPI server: %s\ncapstan: %s", s.args, realErr, capErr, realOut, capOut)
			}
			for _, want := range s.fails {
				if !strings.Contains(realOut, want) || !strings.Contains(capOut, want) {
					t.Fatalf("kubectl %s: want both errors to name %q\nAPI server: %s\ncapstan: %s", s.args, want, realOut, capOut)
				}
			}
			continue
		}
		if realErr != nil || capErr != nil || realOut != capOut {
			t.Fatalf("kubectl %s answers differently:\nAPI server (%v): %q\ncapstan (%v): %q", s.args, realErr, realOut, capErr, capOut)
		}
	}
}

// kubectlRun runs kubectl with kubeconfig and returns its output, stdout
// and stderr together.
func kubectlRun(t *testing.T, bin, kubeconfig string, args []string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
