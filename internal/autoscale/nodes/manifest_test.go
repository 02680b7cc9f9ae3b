package nodes

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseNodePoolGood(t *testing.T) {
	cases := []struct {
		file     string
		want     NodePool
		warnings []string
	}{
		{
			file: "nodepool.yaml",
			want: NodePool{Name: "gpu-spot", Cluster: "ml-cluster", Weight: 50, NodeClass: "gpu-groups",
				Requirements: []Requirement{
					{Key: KeyInstanceType, Operator: OpIn, Values: []string{"ml.g5.12xlarge", "ml.p4d.24xlarge"}},
					{Key: KeyCapacityType, Operator: OpNotIn, Values: []string{"on-demand"}},
					{Key: KeyZone, Operator: OpIn, Values: []string{"us-west-2a"}},
				},
				Limits: Limits{Nodes: 16, GPUs: 64, MilliCPU: 1_000_000, MemoryBytes: 4000 * gib},
				Disruption: DisruptionPolicy{ConsolidationPolicy: WhenEmptyOrUnderutilized, ConsolidateAfter: 30 * time.Second,
					Budgets: []Budget{{Nodes: "20%"}, {Nodes: "0", Reasons: []string{ReasonUnderutilized}}}},
			},
			warnings: []string{
				"spec.template.spec.requirements[2].key: key topology.kubernetes.io/zone has no effect",
				"spec.template.spec.expireAfter: accepted, but has no effect",
				"spec.template.metadata: accepted, but has no effect",
				"spec.disruption.budgets[1].duration: accepted, but has no effect",
				"spec.disruption.budgets[1].schedule: accepted, but has no effect",
			},
		},
		{
			file: "nodepool-minimal.json",
			want: NodePool{Name: "default", NodeClass: "all",
				Disruption: DisruptionPolicy{ConsolidationPolicy: WhenEmptyOrUnderutilized, Budgets: []Budget{{Nodes: "10%"}}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got, warns, err := ParseNodePool(readTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if len(warns) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d", warns, len(tc.warnings))
			}
			for _, w := range tc.warnings {
				found := false
				for _, g := range warns {
					found = found || strings.HasPrefix(g, w)
				}
				if !found {
					t.Errorf("no warning %q in %q", w, warns)
				}
			}
		})
	}
}

// pool is a valid NodePool with one line replaced or added.
func pool(replace, with string) string {
	doc := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: p
spec:
  weight: 10
  template:
    spec:
      nodeClassRef: {group: karpenter.sagemaker.amazonaws.com, kind: HyperpodNodeClass, name: nc}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [ml.g5.xlarge]}
  limits: {cpu: "8"}
  disruption:
    consolidateAfter: 0s
    budgets:
      - nodes: "10%"
#EXTRA
`
	if !strings.Contains(doc, replace) {
		panic("no " + replace)
	}
	return strings.Replace(doc, replace, with, 1)
}

func TestParseNodePoolErrors(t *testing.T) {
	cases := []struct{ doc, err string }{
		{"{", "parse NodePool"},
		{pool("karpenter.sh/v1", "karpenter.sh/v1beta1"), `apiVersion: "karpenter.sh/v1beta1"`},
		{pool("kind: NodePool", "kind: NodeClaim"), "kind:"},
		{pool("  name: p", "  name: P_bad"), "metadata.name:"},
		{pool("  weight: 10", "  weight: 101"), "spec.weight:"},
		{pool("  weight: 10", "  weight: 1.5"), "spec.weight:"},
		{pool("group: karpenter.sagemaker.amazonaws.com", "group: karpenter.k8s.aws"), "spec.template.spec.nodeClassRef.group:"},
		{pool("kind: HyperpodNodeClass", "kind: EC2NodeClass"), "spec.template.spec.nodeClassRef.kind:"},
		{pool(", name: nc}", "}"), "spec.template.spec.nodeClassRef.name: required"},
		{pool("operator: In, values: [ml.g5.xlarge]", "operator: In, values: []"), "spec.template.spec.requirements[0].values:"},
		{pool("operator: In, values: [ml.g5.xlarge]", "operator: Exists, values: [x]"), "spec.template.spec.requirements[0].values:"},
		{pool("operator: In", "operator: Gt"), "spec.template.spec.requirements[0].operator:"},
		{pool("operator: In", "operator: Like"), "spec.template.spec.requirements[0].operator:"},
		{pool("node.kubernetes.io/instance-type", "karpenter.sh/capacity-type"), "spec.template.spec.requirements[0].values[0]:"},
		{pool(`cpu: "8"`, `cpu: "-8"`), "spec.limits.cpu:"},
		{pool(`cpu: "8"`, `cpu: "8x"`), "spec.limits.cpu:"},
		{pool(`cpu: "8"`, `memory: "64Zi"`), "spec.limits.memory:"},
		{pool(`cpu: "8"`, `nvidia.com/gpu: "1.5"`), "spec.limits.nvidia.com/gpu:"},
		{pool(`cpu: "8"`, `nodes: "99999999999"`), "spec.limits.nodes:"},
		{pool("consolidateAfter: 0s", "consolidateAfter: soon"), "spec.disruption.consolidateAfter:"},
		{pool("consolidateAfter: 0s", "consolidateAfter: -1s"), "spec.disruption.consolidateAfter:"},
		{pool("consolidateAfter: 0s", "consolidationPolicy: Balanced"), "spec.disruption.consolidationPolicy:"},
		{pool(`nodes: "10%"`, `nodes: "110%"`), "spec.disruption.budgets[0].nodes:"},
		{pool(`nodes: "10%"`, `reasons: [Empty]`), "spec.disruption.budgets[0].nodes: required"},
		{pool(`nodes: "10%"`, `nodes: "1"`+"\n        reasons: [Expired]"), "spec.disruption.budgets[0].reasons[0]:"},
		{pool("#EXTRA", "    consolidateafter: 1s"), "spec.disruption.consolidateafter: unknown field"},
		{pool("      requirements:", "      expireAfter: forever\n      requirements:"), "spec.template.spec.expireAfter:"},
		{pool("  weight: 10", "  wieght: 10"), "spec.wieght: unknown field"},
		{pool("spec:\n  weight", "spce:\n  weight"), "spec: required"},
	}
	for _, tc := range cases {
		t.Run(tc.err, func(t *testing.T) {
			_, _, err := ParseNodePool([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestParseNodePoolWarnings(t *testing.T) {
	cases := []struct{ replace, with, warn string }{
		{`cpu: "8"`, `ephemeral-storage: 100Gi`, "spec.limits.ephemeral-storage: accepted, but has no effect"},
		{"node.kubernetes.io/instance-type", "kubernetes.io/arch", "spec.template.spec.requirements[0].key: key kubernetes.io/arch has no effect"},
		{"      requirements:", "      taints: [{key: gpu, effect: NoSchedule}]\n      requirements:", "spec.template.spec.taints: accepted"},
		{`nodes: "10%"`, `nodes: "1"` + "\n        reasons: [Drifted]", "spec.disruption.budgets[0].reasons[0]: Drifted has no effect"},
		{"  name: p", "  name: p\n  labels: {a: b}", "metadata.labels: accepted"},
		{"  weight: 10", "  weight: 10\n  replicas: 3", "spec.replicas: accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.warn, func(t *testing.T) {
			_, warns, err := ParseNodePool([]byte(pool(tc.replace, tc.with)))
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != 1 || !strings.HasPrefix(warns[0], tc.warn) {
				t.Fatalf("warnings %q, want one starting %q", warns, tc.warn)
			}
		})
	}
}

func TestParseQuantities(t *testing.T) {
	cases := []struct {
		limits string
		want   Limits
	}{
		{`{cpu: 500m, memory: 64Gi}`, Limits{MilliCPU: 500, MemoryBytes: 64 * gib}},
		{`{cpu: 1.5, memory: "1G"}`, Limits{MilliCPU: 1500, MemoryBytes: 1_000_000_000}},
		{`{cpu: 8, memory: 1000, nodes: 3, nvidia.com/gpu: "16"}`, Limits{MilliCPU: 8000, MemoryBytes: 1000, Nodes: 3, GPUs: 16}},
		{`{cpu: 0.0001}`, Limits{MilliCPU: 1}}, // rounded up, as Kubernetes does
	}
	for _, tc := range cases {
		t.Run(tc.limits, func(t *testing.T) {
			p, _, err := ParseNodePool([]byte(pool(`limits: {cpu: "8"}`, "limits: "+tc.limits)))
			if err != nil {
				t.Fatal(err)
			}
			if p.Limits != tc.want {
				t.Fatalf("limits %+v, want %+v", p.Limits, tc.want)
			}
		})
	}
}

func TestParseNodeClass(t *testing.T) {
	c, warns, err := ParseNodeClass(readTestdata(t, "nodeclass.yaml"))
	if err != nil || len(warns) != 0 {
		t.Fatalf("err %v warnings %q", err, warns)
	}
	if want := (NodeClass{Name: "gpu-groups", InstanceGroups: []string{"g5-spot", "p4d-reserved"}}); !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	head := "apiVersion: karpenter.sagemaker.amazonaws.com/v1\nkind: HyperpodNodeClass\nmetadata: {name: nc}\n"
	bad := []struct{ doc, err string }{
		{"apiVersion: karpenter.sh/v1\nkind: HyperpodNodeClass\nmetadata: {name: nc}\nspec: {instanceGroups: [a]}", "apiVersion:"},
		{head + "spec: {}", "spec.instanceGroups: required"},
		{head + "spec: {instanceGroups: []}", "spec.instanceGroups: 0 groups"},
		{head + "spec: {instanceGroups: [a,b,c,d,e,f,g,h,i,j,k]}", "spec.instanceGroups: 11 groups"},
		{head + "spec: {instanceGroups: [a, a]}", "spec.instanceGroups[1]:"},
		{head + "spec: {instanceGroups: [a, 3]}", "spec.instanceGroups[1]: want a string"},
		{head + "spec: {instanceGroups: [a], subnets: [x]}", "spec.subnets: unknown field"},
	}
	for _, tc := range bad {
		if _, _, err := ParseNodeClass([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: err = %v, want %q", tc.doc, err, tc.err)
		}
	}
	if _, warns, err := ParseNodeClass([]byte(head + "spec: {instanceGroups: [a]}\nstatus: {ready: true}")); err != nil ||
		len(warns) != 1 || !strings.HasPrefix(warns[0], "status: accepted") {
		t.Errorf("status: err %v warnings %q", err, warns)
	}
}
