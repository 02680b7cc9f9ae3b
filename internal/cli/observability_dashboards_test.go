package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/dashboards"
)

// runDashboards runs `capstan observability dashboards ARGS` the way the
// binary does once the command is wired under the observability group.
func runDashboards(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	obs := newObservabilityDashboardsCmd()
	// Registered here for the test only: the observability group owns it.
	group := &cobra.Command{Use: "observability"}
	group.AddCommand(obs)
	root.AddCommand(group)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"observability", "dashboards"}, args...))
	err := root.Execute()
	return out.String() + errOut.String(), err
}

func TestObservabilityDashboardsWritesGrafanaFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "grafana")
	out, err := runDashboards(t, "--out", dir, "--prometheus-url", "http://prom.internal:9091")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{
		"dashboards/cluster.json",
		"dashboards/inference.json",
		"dashboards/reservations.json",
		"provisioning/dashboards/capstan.yaml",
		"provisioning/datasources/prometheus.yaml",
	}
	for _, f := range want {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if !strings.Contains(out, "wrote "+p+"\n") {
			t.Errorf("output does not report %s:\n%s", p, out)
		}
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	for _, def := range dashboards.All() {
		raw, err := os.ReadFile(filepath.Join(dir, "dashboards", def.File))
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID   string `json:"uid"`
			Title string `json:"title"`
		}
		if err := json.Unmarshal(raw, &d); err != nil || d.UID != def.UID || d.Title != def.Title {
			t.Errorf("%s: uid %q title %q (%v)", def.File, d.UID, d.Title, err)
		}
	}
	ds, _ := os.ReadFile(filepath.Join(dir, "provisioning", "datasources", "prometheus.yaml"))
	if !strings.Contains(string(ds), `url: "http://prom.internal:9091"`) || !strings.Contains(string(ds), `uid: "`+dashboards.DatasourceUID+`"`) {
		t.Errorf("datasource provisioning:\n%s", ds)
	}
	abs, _ := filepath.Abs(filepath.Join(dir, "dashboards"))
	prov, _ := os.ReadFile(filepath.Join(dir, "provisioning", "dashboards", "capstan.yaml"))
	if !strings.Contains(string(prov), `path: "`+abs+`"`) {
		t.Errorf("dashboard provisioning does not name %s:\n%s", abs, prov)
	}
}

func TestObservabilityDashboardsFlags(t *testing.T) {
	dir := t.TempDir()
	t.Run("default prometheus URL and a dashboards path", func(t *testing.T) {
		out, err := runDashboards(t, "--out", dir, "--dashboards-path", "/var/lib/grafana/dashboards/capstan")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		ds, _ := os.ReadFile(filepath.Join(dir, "provisioning", "datasources", "prometheus.yaml"))
		prov, _ := os.ReadFile(filepath.Join(dir, "provisioning", "dashboards", "capstan.yaml"))
		if !strings.Contains(string(ds), `url: "http://127.0.0.1:9090"`) || !strings.Contains(string(prov), `path: "/var/lib/grafana/dashboards/capstan"`) {
			t.Errorf("provisioning:\n%s\n%s", ds, prov)
		}
	})
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"no --out", nil, "--out is required"},
		{"URL without scheme", []string{"--out", dir, "--prometheus-url", "127.0.0.1:9090"}, `prometheus URL "127.0.0.1:9090"`},
		{"relative dashboards path", []string{"--out", dir, "--dashboards-path", "dash"}, `dashboards path "dash"`},
		{"stray argument", []string{"--out", dir, "extra"}, "unknown command"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runDashboards(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q\n%s", err, tt.want, out)
			}
		})
	}
	// A refused run writes nothing.
	empty := filepath.Join(t.TempDir(), "g")
	if _, err := runDashboards(t, "--out", empty, "--prometheus-url", "ftp://x"); err == nil {
		t.Fatal("ftp URL accepted")
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("refused run created %s (%v)", empty, err)
	}
}
