package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// DatasourceUID is the uid of the Prometheus datasource the provisioning
// file creates and the dashboards' datasource variable selects by default.
const DatasourceUID = "capstan-prometheus"

// DatasourceName is that datasource's display name.
const DatasourceName = "capstan Prometheus"

// Stable dashboard UIDs: links and bookmarks to them survive regeneration.
const (
	InferenceUID    = "capstan-inference"
	ClusterUID      = "capstan-cluster"
	ReservationsUID = "capstan-reservations"
)

// Def names one dashboard and how to build it.
type Def struct {
	UID   string
	Title string
	File  string // file name under dashboards/
	Build func() (dashboard.Dashboard, error)
}

// All lists capstan's dashboards in the order the docs show them.
func All() []Def {
	return []Def{
		{UID: InferenceUID, Title: "capstan / Inference", File: "inference.json", Build: Inference},
		{UID: ClusterUID, Title: "capstan / Cluster", File: "cluster.json", Build: Cluster},
		{UID: ReservationsUID, Title: "capstan / Reservations", File: "reservations.json", Build: Reservations},
	}
}

// query is one PromQL target of a panel.
type query struct {
	expr   string
	legend string
}

func q(expr, legend string) query { return query{expr: expr, legend: legend} }

// dsRef points panels and variables at the datasource variable.
func dsRef() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
}

// dataqueries builds a panel's Prometheus queries, refIds A, B, C….
func dataqueries(instant bool, format prometheus.PromQueryFormat, qs []query) []*prometheus.DataqueryBuilder {
	out := make([]*prometheus.DataqueryBuilder, 0, len(qs))
	for i, x := range qs {
		b := prometheus.NewDataqueryBuilder().
			Datasource(dsRef()).
			RefId(string(rune('A' + i))).
			Expr(x.expr).
			EditorMode(prometheus.QueryEditorModeCode).
			Format(format)
		if x.legend != "" {
			b.LegendFormat(x.legend)
		}
		if instant {
			b.Instant()
		} else {
			b.Range()
		}
		out = append(out, b)
	}
	return out
}

// series is a time series panel, 12 columns wide unless span says
// otherwise.
func series(title, desc, unit string, qs ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(desc).
		Datasource(dsRef()).
		Unit(unit).
		Height(8).
		Span(12).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
	for _, t := range dataqueries(false, prometheus.PromQueryFormatTimeSeries, qs) {
		p.WithTarget(t)
	}
	return p
}

// single is a stat panel of instant queries.
func single(title, desc, unit string, qs ...query) *stat.PanelBuilder {
	p := stat.NewPanelBuilder().
		Title(title).
		Description(desc).
		Datasource(dsRef()).
		Unit(unit).
		Height(6).
		Span(6).
		GraphMode(common.BigValueGraphModeNone).
		ColorMode(common.BigValueColorModeValue).
		TextMode(common.BigValueTextModeValueAndName).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false))
	for _, t := range dataqueries(true, prometheus.PromQueryFormatTimeSeries, qs) {
		p.WithTarget(t)
	}
	return p
}

// grid is a table panel of instant queries, one row per series.
func grid(title, desc string, qs ...query) *table.PanelBuilder {
	p := table.NewPanelBuilder().
		Title(title).
		Description(desc).
		Datasource(dsRef()).
		Height(8).
		Span(12).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"}))
	for _, t := range dataqueries(true, prometheus.PromQueryFormatTable, qs) {
		p.WithTarget(t)
	}
	if len(qs) > 1 {
		// One row per label set, a column per query.
		p.WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}})
	}
	return p
}

// rightAxis moves a query's series to the right axis with its own unit.
func rightAxis(p *timeseries.PanelBuilder, refID, unit string) *timeseries.PanelBuilder {
	return p.OverrideByQuery(refID, []dashboard.DynamicConfigValue{
		{Id: "custom.axisPlacement", Value: "right"},
		{Id: "unit", Value: unit},
	})
}

// datasourceVar is the "datasource" variable every dashboard has; it
// defaults to the provisioned capstan datasource.
func datasourceVar() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").
		Label("Data source").
		Type("prometheus").
		Current(dashboard.VariableOption{
			Text:  dashboard.StringOrArrayOfString{String: cog.ToPtr(DatasourceName)},
			Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(DatasourceUID)},
		})
}

// labelVar is the multi-value variable name over the values of the label
// of the same name on metric; All by default (regex .*, which also matches
// series without the label).
func labelVar(name, label, metric string) *dashboard.QueryVariableBuilder {
	expr := fmt.Sprintf("label_values(%s, %s)", metric, name)
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(dsRef()).
		Query(dashboard.StringOrMap{String: cog.ToPtr(expr)}).
		Definition(expr).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(dashboard.VariableOption{
			Text:  dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value: dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		})
}

// newDashboard starts a dashboard with capstan's common settings.
func newDashboard(uid, title, desc string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(desc).
		Tags([]string{"capstan"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		// A menu of the other capstan dashboards, keeping the time range.
		Link(dashboard.NewDashboardLinkBuilder("capstan dashboards").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"capstan"}).
			AsDropdown(true).
			KeepTime(true).
			IncludeVars(false).
			TargetBlank(false).
			Icon("external link").
			Tooltip("")).
		WithVariable(datasourceVar())
}

// finish builds the dashboard and numbers its panels 1, 2, 3… in layout
// order, so the JSON is the same on every run.
func finish(b *dashboard.DashboardBuilder) (dashboard.Dashboard, error) {
	d, err := b.Build()
	if err != nil {
		return d, fmt.Errorf("dashboards: build: %w", err)
	}
	var id uint32
	for i := range d.Panels {
		id++
		switch {
		case d.Panels[i].Panel != nil:
			d.Panels[i].Panel.Id = cog.ToPtr(id)
		case d.Panels[i].RowPanel != nil:
			d.Panels[i].RowPanel.Id = id
			for j := range d.Panels[i].RowPanel.Panels {
				id++
				d.Panels[i].RowPanel.Panels[j].Id = cog.ToPtr(id)
			}
		}
	}
	return d, nil
}

// rate is the window every rate() uses: Grafana's $__rate_interval.
const rate = "[$__rate_interval]"

// quantiles returns the p50, p95 and p99 of a histogram family, summed by
// the given labels.
func quantiles(family, selector, by, legend string) []query {
	var out []query
	for _, p := range []struct {
		v    string
		name string
	}{{"0.5", "p50"}, {"0.95", "p95"}, {"0.99", "p99"}} {
		group := "le"
		if by != "" {
			group = "le, " + by
		}
		out = append(out, q(fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s_bucket%s%s)))", p.v, group, family, selector, rate),
			strings.TrimSpace(p.name+" "+legend)))
	}
	return out
}
