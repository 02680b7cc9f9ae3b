package operator

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/autoscale/nodes"
	"github.com/capstan-dev/capstan/internal/catalog"
)

// splitDocs splits the output into its YAML documents.
func splitDocs(s string) []string {
	var out []string
	for d := range strings.SplitSeq(s, "---\n") {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	return out
}

// TestWriteNodePools checks each group's NodePool and HyperpodNodeClass
// through the parser capstan's node API applies them with.
func TestWriteNodePools(t *testing.T) {
	tests := []struct {
		name, group string
		// requirements as key=value, in order.
		reqs []string
		// limits as capstan's parser reads them.
		limits nodes.Limits
		// extra are the other limits' "key: value" lines in the output.
		extra []string
		// migLabel is the template's nvidia.com/mig.config label.
		migLabel string
		// warnings are the fields capstan's parser reports as having no
		// effect in capstan (kept for Karpenter and the node's labels).
		warnings []string
	}{
		{
			name: "on-demand whole GPUs, maxCount", group: "g5",
			reqs:   []string{"node.kubernetes.io/instance-type=ml.g5.12xlarge", "karpenter.sh/capacity-type=on-demand", "sagemaker.amazonaws.com/instance-group-name=g5"},
			limits: nodes.Limits{Nodes: 6, GPUs: 24},
		},
		{
			name: "spot, no maxCount: the count bounds it", group: "Spot-P4d",
			reqs:   []string{"node.kubernetes.io/instance-type=ml.p4d.24xlarge", "karpenter.sh/capacity-type=spot", "sagemaker.amazonaws.com/instance-group-name=Spot-P4d"},
			limits: nodes.Limits{Nodes: 2, GPUs: 16},
		},
		{
			name: "a training plan is reserved capacity; a MIG layout labels nodes and limits its slices", group: "h200-mig",
			reqs:     []string{"node.kubernetes.io/instance-type=ml.p5en.48xlarge", "karpenter.sh/capacity-type=reserved", "sagemaker.amazonaws.com/instance-group-name=h200-mig"},
			limits:   nodes.Limits{Nodes: 1, GPUs: 8},
			extra:    []string{"nvidia.com/mig-1g.18gb: \"56\""},
			migLabel: "all-1g.18gb",
			warnings: []string{"spec.template.metadata", "spec.limits.nvidia.com/mig-1g.18gb"},
		},
	}
	const cfg = `name: ML-Cluster
groups:
  - {name: g5, instanceType: ml.g5.12xlarge, count: 1, maxCount: 6, executionRole: r}
  - {name: Spot-P4d, instanceType: ml.p4d.24xlarge, count: 2, spot: true, executionRole: r}
  - {name: h200-mig, instanceType: ml.p5en.48xlarge, count: 0, planArn: "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p", migLayout: all-1g.18gb, executionRole: r}
`
	c, err := ParseNodePoolCluster([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteNodePools(&b, c, catalog.Default()); err != nil {
		t.Fatal(err)
	}
	docs := splitDocs(b.String())
	if len(docs) != 2*len(tests) {
		t.Fatalf("%d documents, want a class and a pool per group:\n%s", len(docs), b.String())
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := NodePoolName("ML-Cluster", tt.group)
			class, warn, err := nodes.ParseNodeClass([]byte(docs[2*i]))
			if err != nil || len(warn) > 0 {
				t.Fatalf("HyperpodNodeClass: %v %v\n%s", err, warn, docs[2*i])
			}
			if class.Name != want || !slices.Equal(class.InstanceGroups, []string{tt.group}) {
				t.Errorf("class = %+v, want %s on [%s]", class, want, tt.group)
			}
			pool, warn, err := nodes.ParseNodePool([]byte(docs[2*i+1]))
			if err != nil {
				t.Fatalf("NodePool: %v\n%s", err, docs[2*i+1])
			}
			// The MIG label and slices are for Karpenter and the nodes;
			// capstan's autoscaler counts GPUs and nodes only, and says so.
			var fields []string
			for _, w := range warn {
				fields = append(fields, strings.SplitN(w, ":", 2)[0])
			}
			if !slices.Equal(fields, tt.warnings) {
				t.Errorf("warnings %v, want no-effect ones on %v", warn, tt.warnings)
			}
			if pool.Name != want || pool.NodeClass != want || pool.Cluster != "ML-Cluster" {
				t.Errorf("pool %s class %s cluster %s, want %s, %s, ML-Cluster", pool.Name, pool.NodeClass, pool.Cluster, want, want)
			}
			var reqs []string
			for _, r := range pool.Requirements {
				if r.Operator != nodes.OpIn || len(r.Values) != 1 {
					t.Errorf("requirement %+v, want In one value", r)
				}
				reqs = append(reqs, r.Key+"="+strings.Join(r.Values, ","))
			}
			if !slices.Equal(reqs, tt.reqs) {
				t.Errorf("requirements:\n got %v\nwant %v", reqs, tt.reqs)
			}
			if pool.Limits != tt.limits {
				t.Errorf("limits = %+v, want %+v", pool.Limits, tt.limits)
			}
			for _, l := range tt.extra {
				if !strings.Contains(docs[2*i+1], l) {
					t.Errorf("no %q in\n%s", l, docs[2*i+1])
				}
			}
			var raw struct {
				Spec struct {
					Template struct {
						Metadata struct{ Labels map[string]string }
					}
				}
			}
			if err := yaml.Unmarshal([]byte(docs[2*i+1]), &raw); err != nil {
				t.Fatal(err)
			}
			if got := raw.Spec.Template.Metadata.Labels["nvidia.com/mig.config"]; got != tt.migLabel {
				t.Errorf("mig.config label %q, want %q", got, tt.migLabel)
			}
		})
	}
}

// TestWriteNodePoolsErrors checks that a bad group prints nothing and names
// the field.
func TestWriteNodePoolsErrors(t *testing.T) {
	tests := []struct{ name, cfg, want string }{
		{"unknown instance type", "groups: [{name: a, instanceType: ml.nope.xlarge}]", "groups[0] (a): instanceType"},
		{"MIG layout the GPU lacks", "groups: [{name: a, instanceType: ml.g5.12xlarge, migLayout: all-1g.10gb}]", "groups[0] (a): migLayout"},
		{"duplicate group", "groups: [{name: a, instanceType: ml.g5.12xlarge}, {name: a, instanceType: ml.g5.12xlarge}]", `groups[1].name: group "a" listed twice`},
		{"no groups", "name: c", "no instance groups"},
		{"misspelt field", "groups: [{name: a, instanceType: ml.g5.12xlarge, maxNodes: 3}]", "maxNodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			c, err := ParseNodePoolCluster([]byte(tt.cfg))
			if err == nil {
				err = WriteNodePools(&b, c, catalog.Default())
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
			if b.Len() > 0 {
				t.Errorf("printed %q for a bad config", b.String())
			}
		})
	}
}
