package sagemaker

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/store"
)

// TestKubernetesConfigConversion: the nvidia.com/mig.config label is the
// group's MIG layout; other labels and taints are ignored, each named.
func TestKubernetesConfigConversion(t *testing.T) {
	body := `{"ClusterName":"c","InstanceGroups":[` +
		group(`"KubernetesConfig":{"Labels":{"team":"ml","nvidia.com/mig.config":"all-1g.10gb"},"Taints":[{"Key":"k","Effect":"NoSchedule"}]}`) + `,` +
		group(`"InstanceGroupName":"plain","KubernetesConfig":{}`) + `]}`
	var in createClusterInput
	if err := decode([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	var ve validationError
	ignored := in.common(&ve)
	if err := ve.Err(); err != nil {
		t.Fatal(err)
	}
	wantIgnored := []string{"InstanceGroups[0].KubernetesConfig.Labels.team", "InstanceGroups[0].KubernetesConfig.Taints"}
	if !slices.Equal(ignored, wantIgnored) {
		t.Fatalf("ignored = %v, want %v", ignored, wantIgnored)
	}
	specs := groupSpecs(in.InstanceGroups)
	if specs[0].MIGLayout != "all-1g.10gb" || specs[1].MIGLayout != "" {
		t.Fatalf("layouts %q %q", specs[0].MIGLayout, specs[1].MIGLayout)
	}
}

func TestKubernetesConfigValidation(t *testing.T) {
	var many []string
	for i := range 51 {
		many = append(many, `"l`+strings.Repeat("x", i)+`":"v"`)
	}
	tests := []struct{ name, kc, want string }{
		{"too many labels", `{"Labels":{` + strings.Join(many, ",") + `}}`,
			"Value '[51 items]' at 'instanceGroups.1.member.kubernetesConfig.labels' failed to satisfy constraint: Member must have length less than or equal to 50"},
		{"layout too long", `{"Labels":{"nvidia.com/mig.config":"` + strings.Repeat("a", 64) + `"}}`,
			"at 'instanceGroups.1.member.kubernetesConfig.labels.nvidia.com/mig.config' failed to satisfy constraint: Member must have length less than or equal to 63"},
		{"empty layout", `{"Labels":{"nvidia.com/mig.config":""}}`,
			"at 'instanceGroups.1.member.kubernetesConfig.labels.nvidia.com/mig.config' failed to satisfy constraint: Member must have length greater than or equal to 1"},
	}
	rec := &calls{}
	url := newClustersAPI(t, rec)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec.got = nil
			st, _, raw := call(t, url, "CreateCluster", `{"ClusterName":"c","InstanceGroups":[`+group(`"KubernetesConfig":`+tc.kc)+`]}`)
			if st != http.StatusBadRequest || !strings.Contains(string(raw), tc.want) || len(rec.got) > 0 {
				t.Fatalf("got %d %s (calls %v), want 400 with %q", st, raw, rec.got, tc.want)
			}
		})
	}
}

// newMIGAPI serves the control API over a real cluster service with a
// small p5 fleet.
func newMIGAPI(t *testing.T) (string, *hyperpod.Service, *clock.Fake) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "hp.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(t0)
	cat := catalog.Default()
	cal, err := capacity.New(st, cat, clk, fleet.Capacity{"ml.p5.48xlarge": {"eu-west-1a": 4}, "ml.g5.xlarge": {"eu-west-1a": 4}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := hyperpod.New(hyperpod.Options{Store: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Catalog: cat, Capacity: cal, Plans: cal, PlanNodes: cal, Pool: cluster.NewPool(clk), Region: "eu-west-1", AccountID: "123456789012"})
	if err != nil {
		t.Fatal(err)
	}
	return newClustersAPI(t, svc), svc, clk
}

// TestMIGLayoutOnTheWire: the label sets the layout, DescribeCluster
// echoes it, and a layout the GPU cannot hold is a ValidationException
// naming the member, the GPU and the profile.
func TestMIGLayoutOnTheWire(t *testing.T) {
	url, svc, clk := newMIGAPI(t)
	p5 := func(layout string) string {
		return group(`"InstanceGroupName":"mig","InstanceType":"ml.p5.48xlarge","InstanceCount":1,"KubernetesConfig":{"Labels":{"nvidia.com/mig.config":"` + layout + `"}}`)
	}
	st, _, raw := call(t, url, "CreateCluster", `{"ClusterName":"c1","InstanceGroups":[`+p5("all-1g.5gb")+`]}`)
	want := "Value at 'InstanceGroups[0].KubernetesConfig.Labels.nvidia.com/mig.config' failed to satisfy constraint: instance group mig"
	if st != http.StatusBadRequest || !strings.Contains(string(raw), "ValidationException") || !strings.Contains(string(raw), want) ||
		!strings.Contains(string(raw), "h100") || !strings.Contains(string(raw), "1g.5gb") {
		t.Fatalf("bad layout: %d %s", st, raw)
	}
	if st, _, raw := call(t, url, "CreateCluster", `{"ClusterName":"c1","InstanceGroups":[`+p5("all-1g.10gb")+`]}`); st != http.StatusOK {
		t.Fatalf("create: %d %s", st, raw)
	}
	clk.Step(30 * time.Second)
	if err := svc.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, _, raw = call(t, url, "DescribeCluster", `{"ClusterName":"c1"}`)
	var out struct {
		InstanceGroups []struct {
			KubernetesConfig struct{ CurrentLabels, DesiredLabels map[string]string }
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil || st != http.StatusOK || len(out.InstanceGroups) != 1 {
		t.Fatalf("describe: %d %s %v", st, raw, err)
	}
	kc := out.InstanceGroups[0].KubernetesConfig
	if kc.DesiredLabels[hyperpod.MIGConfigLabel] != "all-1g.10gb" || kc.CurrentLabels[hyperpod.MIGConfigLabel] != "all-1g.10gb" {
		t.Fatalf("KubernetesConfig %+v", kc)
	}
	// An update to another layout: desired at once, current once the
	// nodes are replaced.
	st, _, raw = call(t, url, "UpdateCluster", `{"ClusterName":"c1","InstanceGroups":[`+p5("all-3g.40gb")+`]}`)
	if st != http.StatusOK {
		t.Fatalf("update: %d %s", st, raw)
	}
	_, _, raw = call(t, url, "DescribeCluster", `{"ClusterName":"c1"}`)
	out.InstanceGroups = nil
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if kc := out.InstanceGroups[0].KubernetesConfig; kc.DesiredLabels[hyperpod.MIGConfigLabel] != "all-3g.40gb" || kc.CurrentLabels != nil {
		t.Fatalf("mid-update KubernetesConfig %+v", kc)
	}
	clk.Step(30 * time.Second)
	if err := svc.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, _, raw = call(t, url, "DescribeCluster", `{"ClusterName":"c1"}`)
	out.InstanceGroups = nil
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if kc := out.InstanceGroups[0].KubernetesConfig; kc.CurrentLabels[hyperpod.MIGConfigLabel] != "all-3g.40gb" {
		t.Fatalf("after the replacement KubernetesConfig %+v", kc)
	}
	st, _, raw = call(t, url, "UpdateCluster", `{"ClusterName":"c1","InstanceGroups":[`+p5("mixed-3-3g.40gb")+`]}`)
	if st != http.StatusBadRequest || !strings.Contains(string(raw), "3g.40gb") {
		t.Fatalf("bad update: %d %s", st, raw)
	}
}
