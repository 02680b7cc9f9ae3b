package operator_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/operator"
)

// TestNodePoolsApply applies what `capstan operator nodepools` prints to a
// real API server with Karpenter's own NodePool CRD (its schema and CEL
// rules, from the sigs.k8s.io/karpenter module) and a stand-in
// HyperpodNodeClass CRD (testdata; HyperPod's is not public): every object
// is accepted and stored as printed.
func TestNodePoolsApply(t *testing.T) {
	crd := karpenterNodePoolCRD(t)
	e := startEnvWith(t, envOptions{bare: true})
	e.mustKubectl(t, "apply", "-f", crd, "-f", "testdata/hyperpodnodeclasses-crd.yaml")
	e.mustKubectl(t, "wait", "--for=condition=Established", "--timeout=30s",
		"crd/nodepools.karpenter.sh", "crd/hyperpodnodeclasses.karpenter.sagemaker.amazonaws.com")
	c, err := operator.ParseNodePoolCluster([]byte(`name: ml
groups:
  - {name: a10g, instanceType: ml.g5.12xlarge, count: 1, maxCount: 4}
  - {name: h200-mig, instanceType: ml.p5en.48xlarge, count: 1, migLayout: all-1g.18gb, planArn: "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"}
`))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := operator.WriteNodePools(&b, c, catalog.Default()); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "nodepools.yaml")
	if err := os.WriteFile(f, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.mustKubectl(t, "apply", "-f", f)
	for _, want := range []string{"hyperpodnodeclass.karpenter.sagemaker.amazonaws.com/ml-a10g created", "nodepool.karpenter.sh/ml-a10g created",
		"hyperpodnodeclass.karpenter.sagemaker.amazonaws.com/ml-h200-mig created", "nodepool.karpenter.sh/ml-h200-mig created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply: no %q in:\n%s", want, out)
		}
	}
	got := e.mustKubectl(t, "get", "nodepool", "ml-h200-mig", "-o",
		`jsonpath={.spec.template.metadata.labels.nvidia\.com/mig\.config} {.spec.limits.nvidia\.com/mig-1g\.18gb} {.spec.template.spec.requirements[1].values[0]}`)
	if got != "all-1g.18gb 56 reserved" {
		t.Errorf("stored NodePool: %q, want the MIG label, its slices' limit and reserved capacity", got)
	}
}

// karpenterVersion is the Karpenter release whose NodePool CRD the test
// applies, read from its Go module (the module proxy serves it), not
// copied into this repository.
const karpenterVersion = "v1.6.2"

func karpenterNodePoolCRD(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/karpenter@"+karpenterVersion).Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/karpenter@%s: %v\n%s", karpenterVersion, err, out)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download sigs.k8s.io/karpenter@%s: no module dir in %s", karpenterVersion, out)
	}
	return filepath.Join(m.Dir, "pkg", "apis", "crds", "karpenter.sh_nodepools.yaml")
}
