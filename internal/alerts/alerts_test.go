package alerts

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/capstan-dev/capstan/internal/metrics"
)

var update = flag.Bool("update", false, "rewrite deploy/prometheus/capstan-rules.yml")

const (
	rulesFile = "../../deploy/prometheus/capstan-rules.yml"
	testsFile = "../../deploy/prometheus/capstan-rules.test.yml"
)

// The checked-in rules file is what the code generates.
func TestRulesFileIsCurrent(t *testing.T) {
	if *update {
		if err := os.WriteFile(rulesFile, YAML(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, YAML()) {
		t.Fatalf("%s is stale; run go test ./internal/alerts -update", rulesFile)
	}
}

// family is the catalog family a series name belongs to: a histogram's
// _bucket, _sum and _count series belong to the histogram.
func family(name string) (metrics.Def, bool) {
	if d, ok := metrics.Lookup(name); ok {
		return d, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if d, ok := metrics.Lookup(base); ok && d.Type == metrics.Histogram {
				return d, true
			}
		}
	}
	return metrics.Def{}, false
}

// Every alert's expression parses, and every metric it reads and every
// label it matches on is in the catalog (a renamed metric would leave an
// alert that never fires).
func TestRulesUseCatalogMetrics(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range Rules().Groups {
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				if seen[r.Alert] {
					t.Fatalf("alert name used twice")
				}
				seen[r.Alert] = true
				if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
					t.Errorf("needs a severity label and a summary")
				}
				expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
				if err != nil {
					t.Fatalf("%s: %v", r.Expr, err)
				}
				n := 0
				parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
					vs, ok := node.(*parser.VectorSelector)
					if !ok {
						return nil
					}
					n++
					d, ok := family(vs.Name)
					if !ok {
						t.Errorf("metric %s is not in internal/metrics.Catalog", vs.Name)
						return nil
					}
					for _, m := range vs.LabelMatchers {
						if m.Name == labels.MetricName || (m.Name == "le" && d.Type == metrics.Histogram) {
							continue
						}
						if !slices.Contains(d.Labels, m.Name) {
							t.Errorf("%s has no label %s (catalog: %v)", d.Name, m.Name, d.Labels)
						}
					}
					return nil
				})
				if n == 0 {
					t.Errorf("reads no metric: %s", r.Expr)
				}
			})
		}
	}
}

// promtool: it is in Debian's prometheus package, which test/run.sh
// installs; under CI its absence is a failure, elsewhere a skip.
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found (apt-get install prometheus); CI must run the rule tests")
		}
		t.Skip("promtool not installed (apt-get install prometheus); CI installs it")
	}
	return bin
}

// promtool check rules accepts the file and promtool test rules passes the
// unit tests: each alert fires on the series that should fire it and stays
// quiet on the ones that should not.
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", testsFile}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// Every alert has a test case that fires it, so a rule cannot be added
// untested.
func TestEveryAlertIsUnitTested(t *testing.T) {
	raw, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range Rules().Groups {
		for _, r := range g.Rules {
			if !strings.Contains(string(raw), "alertname: "+r.Alert+"\n") {
				t.Errorf("%s has no alert_rule_test in %s", r.Alert, filepath.Base(testsFile))
			}
		}
	}
}
