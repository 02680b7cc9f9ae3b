package bench

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
)

//go:embed report.html.tmpl
var reportTemplate string

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"f1":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":  func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"pct": func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
}).Parse(reportTemplate))

// WriteHTML writes the self-contained report: tables rendered server-side,
// charts drawn as inline SVG by the page's own script from the embedded
// results (no network fetches). The script sets data-charts-rendered on <html>
// to the number of charts drawn once all are, or data-render-error.
func WriteHTML(w io.Writer, res *Result) error {
	slim := *res
	slim.Records = nil              // per-request records stay in the JSON file
	data, err := json.Marshal(slim) // escapes <, > and & so it is safe inside <script>
	if err != nil {
		return fmt.Errorf("report data: %w", err)
	}
	cfg, err := json.MarshalIndent(res.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("report config: %w", err)
	}
	return reportTmpl.Execute(w, map[string]any{
		"R":      res,
		"Data":   template.JS(data), //nolint:gosec // json.Marshal output, HTML-escaped
		"Config": string(cfg),
	})
}
