package dashboards

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite deploy/grafana and the panel table of docs/observability.md")

// repoRoot is the module root, seen from this package's directory.
const repoRoot = "../.."

// TestDashboardRequiredPanels: each dashboard has its stable UID, its
// template variables, and the panels its users come for.
func TestDashboardRequiredPanels(t *testing.T) {
	tests := []struct {
		build  func() (dashboard.Dashboard, error)
		uid    string
		vars   []string
		panels []string
	}{
		{Inference, "capstan-inference", []string{"datasource", "endpoint"}, []string{
			"Request rate by endpoint, variant and status",
			"Latency p50/p95/p99",
			"Time to first byte (TTFB) p50/p95/p99",
			"Time to first token (TTFT) p50/p95/p99",
			"Tokens per second in and out",
			"KV hit rate by tier",
			"Queue depth and held requests",
			"Replicas desired vs ready (endpoints)",
			"Replicas desired vs ready (deployments)",
			"Scaling decisions",
		}},
		{Cluster, "capstan-cluster", []string{"datasource", "cluster"}, []string{
			"Nodes by group and capacity type",
			"GPU and MIG slice allocation",
			"GPU instances by type",
			"Pending replicas",
			"Node-hours",
			"Node cost",
		}},
		{Reservations, "capstan-reservations", []string{"datasource", "plan"}, []string{
			"Training plans by state",
			"Reserved vs used instance-hours",
			"Time left",
			"Upfront fee",
			"Reserved instances in use and available",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.uid, func(t *testing.T) {
			d, err := tt.build()
			if err != nil {
				t.Fatal(err)
			}
			if d.Uid == nil || *d.Uid != tt.uid {
				t.Errorf("uid %v, want %s", deref(d.Uid), tt.uid)
			}
			var vars []string
			for _, v := range d.Templating.List {
				vars = append(vars, v.Name)
			}
			if strings.Join(vars, ",") != strings.Join(tt.vars, ",") {
				t.Errorf("variables %v, want %v", vars, tt.vars)
			}
			titles := map[string]dashboard.Panel{}
			for _, p := range Panels(d) {
				title := deref(p.Title)
				if _, dup := titles[title]; dup {
					t.Errorf("two panels titled %q", title)
				}
				titles[title] = p
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", title)
				}
				if p.Datasource == nil || deref(p.Datasource.Uid) != "${datasource}" {
					t.Errorf("panel %q does not read the datasource variable", title)
				}
			}
			for _, want := range tt.panels {
				if _, ok := titles[want]; !ok {
					t.Errorf("no panel %q", want)
				}
			}
		})
	}
}

// TestDashboardJSONLoads: the written dashboards decode strictly as
// Grafana dashboards (the SDK's schema), every panel has a unique id and
// fits the 24-column grid, and the datasource variable defaults to the
// provisioned datasource.
func TestDashboardJSONLoads(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	files, err := Files(Options{DashboardsPath: "/g/dashboards"})
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range All() {
		t.Run(def.File, func(t *testing.T) {
			raw := files["dashboards/"+def.File]
			// The strict decoder reports unknown and missing required fields.
			// (It returns its error list as an error even when the list is
			// empty, and then drops the panel, so the checks below use the
			// plain decoder.)
			var strict dashboard.Dashboard
			if err := strict.UnmarshalJSONStrict(raw); err != nil {
				if errs, ok := err.(cog.BuildErrors); !ok || len(errs) > 0 {
					t.Fatalf("strict decode: %v", err)
				}
			}
			var d dashboard.Dashboard
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			if len(d.Panels) == 0 {
				t.Fatal("no panels")
			}
			if deref(d.Uid) != def.UID || deref(d.Title) != def.Title {
				t.Errorf("uid %q title %q, want %q %q", deref(d.Uid), deref(d.Title), def.UID, def.Title)
			}
			ids := map[uint32]bool{}
			for _, p := range d.Panels {
				var id uint32
				var pos *dashboard.GridPos
				switch {
				case p.Panel != nil:
					id, pos = deref32(p.Panel.Id), p.Panel.GridPos
				case p.RowPanel != nil:
					id, pos = p.RowPanel.Id, p.RowPanel.GridPos
				}
				if id == 0 || ids[id] {
					t.Errorf("panel id %d missing or repeated", id)
				}
				ids[id] = true
				if pos == nil || pos.X+pos.W > 24 || pos.W == 0 || pos.H == 0 {
					t.Errorf("panel %d: grid position %+v", id, pos)
				}
			}
			built, err := def.Build()
			if err != nil {
				t.Fatal(err)
			}
			want, err := Targets(built)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Targets(d)
			if err != nil {
				t.Fatalf("decoded targets: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("decoded queries differ from the built ones:\n%v\n%v", got, want)
			}
			ds := d.Templating.List[0]
			if ds.Name != "datasource" || ds.Current == nil || deref(ds.Current.Value.String) != DatasourceUID {
				t.Errorf("datasource variable %+v, want current value %s", ds, DatasourceUID)
			}
		})
	}
}

func deref32(p *uint32) uint32 {
	if p == nil {
		return 0
	}
	return *p
}

// TestDashboardProvisioning: the provisioning files are YAML in the shape
// Grafana's provisioning reads, naming the datasource uid the dashboards
// use, the Prometheus URL and the dashboards folder given.
func TestDashboardProvisioning(t *testing.T) {
	files, err := Files(Options{PrometheusURL: "http://prom.example:9091/p", DashboardsPath: "/srv/grafana/capstan dashboards"})
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		APIVersion  int `json:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool `json:"isDefault"`
		} `json:"datasources"`
	}
	if err := yaml.Unmarshal(files["provisioning/datasources/prometheus.yaml"], &ds); err != nil {
		t.Fatal(err)
	}
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("datasources: %+v", ds)
	}
	got := ds.Datasources[0]
	if got.UID != DatasourceUID || got.Type != "prometheus" || got.URL != "http://prom.example:9091/p" || got.Access != "proxy" || !got.IsDefault {
		t.Errorf("datasource %+v", got)
	}
	var prov struct {
		APIVersion int `json:"apiVersion"`
		Providers  []struct {
			Name, Type, Folder string
			Options            struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(files["provisioning/dashboards/capstan.yaml"], &prov); err != nil {
		t.Fatal(err)
	}
	if prov.APIVersion != 1 || len(prov.Providers) != 1 || prov.Providers[0].Type != "file" ||
		prov.Providers[0].Options.Path != "/srv/grafana/capstan dashboards" {
		t.Errorf("dashboard provider %+v", prov)
	}

	for _, bad := range []Options{
		{PrometheusURL: "127.0.0.1:9090", DashboardsPath: "/d"},
		{PrometheusURL: "ftp://x", DashboardsPath: "/d"},
		{PrometheusURL: "http://x", DashboardsPath: "relative/d"},
	} {
		if _, err := Files(bad); err == nil {
			t.Errorf("Files(%+v): no error", bad)
		}
	}
}

// TestDashboardDeployCopyIsCurrent: deploy/grafana holds exactly what the
// code generates (with the container paths of DeployDashboardsPath);
// -update rewrites it.
func TestDashboardDeployCopyIsCurrent(t *testing.T) {
	dir := filepath.Join(repoRoot, "deploy", "grafana")
	want, err := Files(Options{PrometheusURL: DefaultPrometheusURL, DashboardsPath: DeployDashboardsPath})
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := Write(dir, Options{PrometheusURL: DefaultPrometheusURL, DashboardsPath: DeployDashboardsPath}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string][]byte{}
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatalf("%v (run go test ./internal/dashboards -update)", err)
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if !bytes.Equal(got[n], want[n]) {
			t.Errorf("deploy/grafana/%s differs from what the code generates (run go test ./internal/dashboards -update)", n)
		}
	}
}

// Markers of the generated panel table in docs/observability.md.
const (
	tableBegin = "<!-- begin generated panel table: go test ./internal/dashboards -update -->"
	tableEnd   = "<!-- end generated panel table -->"
)

// TestDashboardDocsTableIsCurrent: the panel table of docs/observability.md
// is the one PanelTable generates; -update rewrites it.
func TestDashboardDocsTableIsCurrent(t *testing.T) {
	path := filepath.Join(repoRoot, "docs", "observability.md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	before, rest, ok1 := strings.Cut(doc, tableBegin+"\n")
	_, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s: no %q … %q markers", path, tableBegin, tableEnd)
	}
	table, err := PanelTable()
	if err != nil {
		t.Fatal(err)
	}
	want := before + tableBegin + "\n" + table + tableEnd + after
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the panel table is stale (run go test ./internal/dashboards -update)", path)
}

// TestDashboardPanelTableCoversEveryQuery: every query of every dashboard
// is a row of the docs table, with its pipes escaped.
func TestDashboardPanelTableCoversEveryQuery(t *testing.T) {
	table, err := PanelTable()
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Count(table, "\n") - 2
	n := 0
	for _, def := range All() {
		d, err := def.Build()
		if err != nil {
			t.Fatal(err)
		}
		ts, _ := Targets(d)
		for _, tg := range ts {
			n++
			if !strings.Contains(table, "`"+strings.ReplaceAll(tg.Expr, "|", `\|`)+"`") {
				t.Errorf("table lacks %s", tg.Expr)
			}
		}
	}
	if rows != n {
		t.Errorf("table has %d rows, dashboards %d queries", rows, n)
	}
}
