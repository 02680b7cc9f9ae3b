package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Target is one PromQL query of a built dashboard.
type Target struct {
	Dashboard string // dashboard title
	Panel     string // panel title
	RefID     string
	Expr      string
	Legend    string
}

// Panels returns a built dashboard's panels in layout order, those inside
// rows included (rows themselves are not panels).
func Panels(d dashboard.Dashboard) []dashboard.Panel {
	var out []dashboard.Panel
	for _, p := range d.Panels {
		switch {
		case p.Panel != nil:
			out = append(out, *p.Panel)
		case p.RowPanel != nil:
			out = append(out, p.RowPanel.Panels...)
		}
	}
	return out
}

// Targets returns every Prometheus query of a built dashboard, in layout
// order. A target of another datasource is an error: every panel reads
// the capstan Prometheus.
func Targets(d dashboard.Dashboard) ([]Target, error) {
	var out []Target
	for _, p := range Panels(d) {
		for _, t := range p.Targets {
			var pq prometheus.Dataquery
			switch v := t.(type) {
			case prometheus.Dataquery:
				pq = v
			case *prometheus.Dataquery:
				pq = *v
			default:
				return nil, fmt.Errorf("dashboards: panel %q: target of type %T, want a Prometheus query", deref(p.Title), t)
			}
			out = append(out, Target{Dashboard: deref(d.Title), Panel: deref(p.Title), RefID: deref(pq.RefId), Expr: pq.Expr, Legend: deref(pq.LegendFormat)})
		}
	}
	return out, nil
}

// VariableQueries returns the PromQL-backed template variable queries of a
// built dashboard (label_values(...)), by variable name.
func VariableQueries(d dashboard.Dashboard) map[string]string {
	out := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type == dashboard.VariableTypeQuery && v.Query != nil && v.Query.String != nil {
			out[v.Name] = *v.Query.String
		}
	}
	return out
}

// PanelTable renders every dashboard's panels and queries as the markdown
// table of docs/observability.md.
func PanelTable() (string, error) {
	var b strings.Builder
	b.WriteString("| Dashboard | Panel | Legend | PromQL |\n|---|---|---|---|\n")
	for _, def := range All() {
		d, err := def.Build()
		if err != nil {
			return "", err
		}
		ts, err := Targets(d)
		if err != nil {
			return "", err
		}
		for _, t := range ts {
			legend := ""
			if t.Legend != "" {
				legend = "`" + cell(t.Legend) + "`"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", def.Title, cell(t.Panel), legend, cell(t.Expr))
		}
	}
	return b.String(), nil
}

// cell escapes a table cell's pipes (PromQL regexes use them).
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
