package metrics_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/internal/metrics"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md from the catalog and the registries' help")

// docs/metrics.md is what Markdown renders from the catalog and the help
// text the real server and a replica register; -update rewrites it.
func TestMetricsDoc(t *testing.T) {
	srv, _, _ := startServer(t, "127.0.0.1:1") // no replica is started
	help := map[string]string{}
	for _, ds := range []map[string]desc{serverDescs(t, srv), replicaDescs(t)} {
		for name, d := range ds {
			help[name] = d.Help
		}
	}
	for _, d := range metrics.Catalog {
		if help[d.Name] == "" {
			t.Errorf("%s: no help text registered", d.Name)
		}
	}
	got := metrics.Markdown(help)
	path := filepath.Join("..", "..", filepath.FromSlash(metrics.DocPath))
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with: go test ./internal/metrics -run TestMetricsDoc -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the catalog and the registered help; regenerate it with:\n\tgo test ./internal/metrics -run TestMetricsDoc -update", metrics.DocPath)
	}
}
