package dashboards

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/capstan-dev/capstan/internal/metrics"
)

// targetLabels are the labels Prometheus attaches to every scraped series;
// replicaLabels those service discovery attaches to an engine replica's
// series (a SageMaker variant's or a manifest deployment's) plus the
// engine's constant labels.
var (
	targetLabels  = []string{"job", "instance"}
	replicaLabels = []string{"endpoint", "variant", "namespace", "deployment", "model_name", "engine"}
)

// grafanaBuiltins are Grafana's own variables and what a query gets for
// them when checked.
var grafanaBuiltins = map[string]string{
	"$__rate_interval": "5m",
	"$__interval":      "1m",
	"$__range":         "1h",
}

var (
	legendLabelRe = regexp.MustCompile(`\{\{\s*([^}\s]+)\s*\}\}`)
	varRefRe      = regexp.MustCompile(`\$(\{)?([A-Za-z_]\w*)`)
	labelValuesRe = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_]\w*)\)$`)
	promParser    = parser.NewParser(parser.Options{})
)

// set is a set of label names.
type set map[string]bool

func setOf(names ...string) set {
	s := set{}
	for _, n := range names {
		s[n] = true
	}
	return s
}

func (s set) sorted() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s set) equal(o set) bool {
	return slices.Equal(s.sorted(), o.sorted())
}

// checker walks a parsed query, checking each metric and label against
// metrics.Catalog, and computes the labels each subexpression's series
// can carry.
type checker struct {
	problems []string
	metrics  []string // families named, in order
}

func (c *checker) errorf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// family resolves a series name to its catalog entry: a histogram's
// _bucket, _sum and _count to the histogram family.
func family(name string) (def metrics.Def, bucket, ok bool) {
	if d, ok := metrics.Lookup(name); ok {
		return d, false, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, cut := strings.CutSuffix(name, suf); cut {
			if d, ok := metrics.Lookup(base); ok && d.Type == metrics.Histogram {
				return d, suf == "_bucket", true
			}
		}
	}
	return metrics.Def{}, false, false
}

var rateFuncs = setOf("rate", "irate", "increase")

// labels returns the labels e's series can carry. underRate says e is the
// argument of rate(), irate() or increase().
func (c *checker) labels(e parser.Node, underRate bool) set {
	switch n := e.(type) {
	case *parser.VectorSelector:
		name := n.Name
		for _, m := range n.LabelMatchers {
			if m.Name == "__name__" && name == "" {
				name = m.Value
			}
		}
		def, bucket, ok := family(name)
		if !ok {
			c.errorf("metric %q is not in metrics.Catalog", name)
			return set{}
		}
		c.metrics = append(c.metrics, def.Name)
		allowed := setOf(def.Labels...)
		for _, l := range targetLabels {
			allowed[l] = true
		}
		if def.Scope == metrics.Replica {
			for _, l := range replicaLabels {
				allowed[l] = true
			}
		}
		if bucket {
			allowed["le"] = true
			if !underRate {
				c.errorf("%s read without rate(): histogram buckets are counters", name)
			}
		}
		if def.Type == metrics.Gauge && underRate {
			c.errorf("rate of the gauge %s", name)
		}
		for _, m := range n.LabelMatchers {
			if m.Name != "__name__" && !allowed[m.Name] {
				c.errorf("%s has no label %q (catalog: %v)", name, m.Name, def.Labels)
			}
		}
		return allowed
	case *parser.MatrixSelector:
		return c.labels(n.VectorSelector, underRate)
	case *parser.SubqueryExpr:
		return c.labels(n.Expr, false)
	case *parser.ParenExpr:
		return c.labels(n.Expr, underRate)
	case *parser.StepInvariantExpr:
		return c.labels(n.Expr, underRate)
	case *parser.UnaryExpr:
		return c.labels(n.Expr, false)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return set{}
	case *parser.Call:
		var argLabels []set
		for _, a := range n.Args {
			argLabels = append(argLabels, c.labels(a, rateFuncs[n.Func.Name]))
		}
		switch n.Func.Name {
		case "histogram_quantile":
			in := argLabels[1]
			if !in["le"] {
				c.errorf("histogram_quantile over series without le (sum by must keep le)")
			}
			out := set{}
			for l := range in {
				if l != "le" {
					out[l] = true
				}
			}
			return out
		case "label_replace":
			out := set{}
			for l := range argLabels[0] {
				out[l] = true
			}
			out[n.Args[1].(*parser.StringLiteral).Val] = true
			return out
		case "vector", "time", "scalar", "absent", "absent_over_time":
			return set{}
		}
		for i, a := range n.Args {
			if t := a.Type(); t == parser.ValueTypeVector || t == parser.ValueTypeMatrix {
				return argLabels[i]
			}
		}
		return set{}
	case *parser.AggregateExpr:
		in := c.labels(n.Expr, false)
		if n.Param != nil {
			c.labels(n.Param, false)
		}
		for _, g := range n.Grouping {
			if !in[g] {
				c.errorf("%s by/without %q: its input has no such label (it has %v)", n.Op, g, in.sorted())
			}
		}
		switch {
		case n.Op == parser.TOPK || n.Op == parser.BOTTOMK || n.Op == parser.LIMITK || n.Op == parser.LIMIT_RATIO:
			return in
		case n.Without:
			out := set{}
			for l := range in {
				if !slices.Contains(n.Grouping, l) {
					out[l] = true
				}
			}
			return out
		default:
			out := setOf(n.Grouping...)
			if n.Op == parser.COUNT_VALUES {
				out[n.Param.(*parser.StringLiteral).Val] = true
			}
			return out
		}
	case *parser.BinaryExpr:
		l, r := c.labels(n.LHS, false), c.labels(n.RHS, false)
		lv, rv := n.LHS.Type() == parser.ValueTypeVector, n.RHS.Type() == parser.ValueTypeVector
		switch {
		case lv && rv:
			vm := n.VectorMatching
			if vm == nil {
				vm = &parser.VectorMatching{Card: parser.CardOneToOne}
			}
			switch {
			case vm.On:
				for _, m := range vm.MatchingLabels {
					if !l[m] || !r[m] {
						c.errorf("%s on(%s): both sides must carry it (left %v, right %v)", n.Op, m, l.sorted(), r.sorted())
					}
				}
			case n.Op.IsSetOperator():
			default:
				// Matching on every label: both sides must carry the same
				// ones, or the result is silently empty.
				strip := func(s set) set {
					out := set{}
					for k := range s {
						if !slices.Contains(vm.MatchingLabels, k) {
							out[k] = true
						}
					}
					return out
				}
				if vm.Card == parser.CardOneToOne && !strip(l).equal(strip(r)) {
					c.errorf("%s matches series with different labels: left %v, right %v", n.Op, l.sorted(), r.sorted())
				}
			}
			out := set{}
			switch {
			case n.Op == parser.LOR:
				for k := range l {
					out[k] = true
				}
				for k := range r {
					out[k] = true
				}
			case vm.Card == parser.CardOneToMany:
				for k := range r {
					out[k] = true
				}
			default:
				for k := range l {
					out[k] = true
				}
			}
			for _, k := range vm.Include {
				out[k] = true
			}
			// One-to-one arithmetic (and comparisons with bool) keep only
			// the on() labels, or drop the ignoring() ones; a filtering
			// comparison returns the left series as they are.
			if vm.Card == parser.CardOneToOne && !n.Op.IsSetOperator() && (!n.Op.IsComparisonOperator() || n.ReturnBool) {
				for k := range out {
					if slices.Contains(vm.MatchingLabels, k) != vm.On {
						delete(out, k)
					}
				}
			}
			return out
		case lv:
			return l
		case rv:
			return r
		}
		return set{}
	}
	c.errorf("unexpected PromQL node %T", e)
	return set{}
}

// substitute replaces Grafana's built-in interval variables the way
// Grafana does before it sends a query.
func substitute(expr string) string {
	for k, v := range grafanaBuiltins {
		expr = strings.ReplaceAll(expr, k, v)
	}
	return expr
}

// checkQuery parses one panel query and checks it against the catalog:
// the problems found, and the metric families it reads.
func checkQuery(expr, legend string, vars set) (problems, families []string) {
	c := &checker{}
	for _, m := range varRefRe.FindAllStringSubmatch(expr, -1) {
		if name := m[2]; !strings.HasPrefix(name, "__") && !vars[name] {
			c.errorf("variable $%s is not defined on the dashboard", name)
		}
	}
	parsed, err := promParser.ParseExpr(substitute(expr))
	if err != nil {
		return append(c.problems, "parse: "+err.Error()), nil
	}
	if t := parsed.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
		c.errorf("query is a %s, want an instant vector", t)
	}
	out := c.labels(parsed, false)
	for _, m := range legendLabelRe.FindAllStringSubmatch(legend, -1) {
		if !out[m[1]] {
			c.errorf("legend names {{%s}} but the query's series carry only %v", m[1], out.sorted())
		}
	}
	return c.problems, c.metrics
}

// checkVariableQuery checks a label_values(metric, label) variable query.
func checkVariableQuery(query string) []string {
	m := labelValuesRe.FindStringSubmatch(query)
	if m == nil {
		return []string{fmt.Sprintf("variable query %q: want label_values(metric, label)", query)}
	}
	c := &checker{}
	sel, err := promParser.ParseExpr(m[1])
	if err != nil {
		return []string{"parse: " + err.Error()}
	}
	if _, ok := sel.(*parser.VectorSelector); !ok {
		c.errorf("label_values over %q: want a metric selector", m[1])
	}
	if out := c.labels(sel, false); len(c.problems) == 0 && !out[m[2]] {
		c.errorf("label_values: %s has no label %q", m[1], m[2])
	}
	return c.problems
}

// TestDashboardQueriesParseAndUseTheCatalog: every panel query of every
// dashboard parses with Prometheus's own parser, names only metrics of
// metrics.Catalog with labels they have, aggregates by labels its input
// carries, and its legend names labels its series have.
func TestDashboardQueriesParseAndUseTheCatalog(t *testing.T) {
	for _, def := range All() {
		t.Run(def.File, func(t *testing.T) {
			d, err := def.Build()
			if err != nil {
				t.Fatal(err)
			}
			vars := set{}
			for _, v := range d.Templating.List {
				vars[v.Name] = true
			}
			ts, err := Targets(d)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) == 0 {
				t.Fatal("no queries")
			}
			for _, tg := range ts {
				problems, fams := checkQuery(tg.Expr, tg.Legend, vars)
				for _, p := range problems {
					t.Errorf("panel %q query %s: %s\n  %s", tg.Panel, tg.RefID, p, tg.Expr)
				}
				if len(problems) == 0 && len(fams) == 0 {
					t.Errorf("panel %q query %s reads no metric: %s", tg.Panel, tg.RefID, tg.Expr)
				}
			}
			for name := range vars {
				used := name == "datasource"
				for _, tg := range ts {
					used = used || strings.Contains(tg.Expr, "$"+name)
				}
				if !used {
					t.Errorf("variable %s filters no query", name)
				}
			}
			for name, query := range VariableQueries(d) {
				for _, p := range checkVariableQuery(query) {
					t.Errorf("variable %s: %s", name, p)
				}
			}
		})
	}
}

// TestDashboardQueryChecker holds the checker itself to catching what it
// is there to catch.
func TestDashboardQueryChecker(t *testing.T) {
	vars := setOf("endpoint", "datasource")
	tests := []struct {
		name, expr, legend string
		want               string // substring of a problem; "" for none
	}{
		{"good rate", `sum by (endpoint, status) (rate(capstan_gateway_requests_total{endpoint=~"$endpoint"}[$__rate_interval]))`, "{{endpoint}} {{status}}", ""},
		{"good quantile", `histogram_quantile(0.99, sum by (le, endpoint) (rate(capstan_gateway_time_to_first_token_seconds_bucket[$__rate_interval])))`, "{{endpoint}}", ""},
		{"good replica target labels", `sum by (endpoint, variant) (rate(vllm:prefix_cache_hits_total{endpoint=~"$endpoint"}[5m]))`, "", ""},
		{"syntax", `sum by (endpoint (rate(capstan_gateway_requests_total[5m]))`, "", "parse:"},
		{"unknown metric", `rate(capstan_gateway_requestz_total[5m])`, "", "not in metrics.Catalog"},
		{"unknown label", `capstan_gateway_queued_requests{variant="x"}`, "", `no label "variant"`},
		{"target label on a server metric", `capstan_gateway_queued_requests{deployment="x"}`, "", `no label "deployment"`},
		{"group by a missing label", `sum by (tier) (rate(capstan_gateway_tokens_total[5m]))`, "", `"tier"`},
		{"group by a label aggregated away", `sum by (variant) (sum by (endpoint) (capstan_gateway_in_flight_requests))`, "", `"variant"`},
		{"quantile without le", `histogram_quantile(0.5, sum by (endpoint) (rate(capstan_gateway_request_duration_seconds_bucket[5m])))`, "", "without le"},
		{"buckets without rate", `histogram_quantile(0.5, sum by (le) (capstan_gateway_request_duration_seconds_bucket))`, "", "without rate()"},
		{"rate of a gauge", `rate(capstan_gateway_queued_requests[5m])`, "", "gauge"},
		{"mismatched division", `sum by (endpoint, variant) (rate(capstan_gateway_tokens_total[5m])) / sum by (endpoint) (rate(capstan_gateway_requests_total[5m]))`, "", "different labels"},
		{"legend label missing", `sum by (endpoint) (rate(capstan_gateway_requests_total[5m]))`, "{{variant}}", "legend names {{variant}}"},
		{"on() keeps only its labels", `sum by (endpoint, variant) (rate(capstan_gateway_tokens_total[5m])) / on (endpoint) group_left sum by (endpoint) (rate(capstan_gateway_requests_total[5m]))`, "{{variant}}", ""},
		{"on() one-to-one drops the rest", `sum by (endpoint, variant) (capstan_gateway_in_flight_requests) / on (endpoint, variant) sum by (endpoint, variant) (capstan_gateway_in_flight_requests)`, "{{endpoint}}", ""},
		{"ignoring() drops its labels", `sum by (endpoint, direction) (rate(capstan_gateway_tokens_total[5m])) / ignoring (direction) sum by (endpoint, direction) (rate(capstan_gateway_tokens_total[5m]))`, "{{direction}}", "legend names {{direction}}"},
		{"undefined variable", `capstan_gateway_queued_requests{endpoint=~"$cluster"}`, "", "$cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems, _ := checkQuery(tt.expr, tt.legend, vars)
			got := strings.Join(problems, "\n")
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("problems:\n%s\nwant one containing %q", got, tt.want)
			}
		})
	}
	for q, want := range map[string]string{
		"label_values(capstan_cluster_nodes, cluster)":  "",
		"label_values(capstan_cluster_nodes, endpoint)": `no label "endpoint"`,
		"label_values(capstan_nodes, cluster)":          "not in metrics.Catalog",
		"query_result(up)":                              "want label_values",
	} {
		got := strings.Join(checkVariableQuery(q), "\n")
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want one containing %q", q, got, want)
		}
	}
}
