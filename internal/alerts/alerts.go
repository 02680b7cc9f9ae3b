// Package alerts generates capstan's Prometheus alerting rules: SLO burn
// rates for time to first token and errors, replicas that are not ready or
// wait for a node, training plans about to expire and endpoints left on an
// expired one, and node launch failures. deploy/prometheus/capstan-rules.yml
// is YAML() checked in (a test fails when it is stale; go test
// ./internal/alerts -update rewrites it), and `capstan observability up`
// loads the same bytes. deploy/prometheus/capstan-rules.test.yml unit-tests
// every alert with promtool; docs/observability.md lists them.
package alerts

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// The service level objectives the burn-rate alerts watch.
const (
	// TTFTThreshold is the time to first token a streamed request should
	// beat, in seconds. It is a bucket boundary of
	// capstan_gateway_time_to_first_token_seconds (0.001·2^k), so the
	// bucket's le label selects it exactly.
	TTFTThreshold = "2.048"
	// TTFTObjective: 99% of streamed requests see their first token within
	// TTFTThreshold; the error budget is the other 1%.
	TTFTObjective = "99%"
	ttftBudget    = "0.01"
	// ErrorObjective: 99.9% of requests get an answer that is not a 5xx or a
	// gateway error; the budget is 0.1%.
	ErrorObjective = "99.9%"
	errorBudget    = "0.001"
)

// Window is one multi-window burn-rate condition (the Google SRE workbook's
// scheme): the budget burns at least Burn times its sustainable rate over
// both the Long and the Short window.
type Window struct {
	Severity    string
	Long, Short string
	Burn        string
	For         string
}

// Windows: a fast burn pages (2% of a 30-day budget in an hour), a slow
// one opens a ticket (5% in 6 hours).
var Windows = []Window{
	{Severity: "page", Long: "1h", Short: "5m", Burn: "14.4", For: "2m"},
	{Severity: "ticket", Long: "6h", Short: "30m", Burn: "6", For: "15m"},
}

// Rule is one alerting rule of a Prometheus rule file.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Group is a rule group.
type Group struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// File is a Prometheus rule file.
type File struct {
	Groups []Group `json:"groups"`
}

// ttftBad is the share of streamed requests per endpoint and variant whose
// first token came later than TTFTThreshold over window w.
func ttftBad(w string) string {
	return fmt.Sprintf(`(1 - sum by (endpoint, variant) (rate(capstan_gateway_time_to_first_token_seconds_bucket{le=%q}[%s]))`+
		` / sum by (endpoint, variant) (rate(capstan_gateway_time_to_first_token_seconds_count[%s])))`, TTFTThreshold, w, w)
}

// errorRatio is the share of requests per endpoint and variant that failed
// (a 5xx answer or a gateway error: no backend, refused, timed out) over w.
func errorRatio(w string) string {
	return fmt.Sprintf(`(sum by (endpoint, variant) (rate(capstan_gateway_requests_total{status=~"5..|error"}[%s]))`+
		` / sum by (endpoint, variant) (rate(capstan_gateway_requests_total[%s])))`, w, w)
}

func burn(ratio func(string) string, budget string, w Window) string {
	return fmt.Sprintf("%s > (%s * %s)\nand\n%s > (%s * %s)", ratio(w.Long), w.Burn, budget, ratio(w.Short), w.Burn, budget)
}

// notReady compares a replicas gauge's desired and ready states per owner;
// an owner without a ready series counts 0 ready.
func notReady(metric, by string) string {
	desired := fmt.Sprintf(`max by (%s) (%s{state="desired"})`, by, metric)
	return fmt.Sprintf("%s\n> (max by (%s) (%s{state=\"ready\"}) or 0 * %s)", desired, by, metric, desired)
}

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// Rules are capstan's alert groups.
func Rules() File {
	var slo []Rule
	for _, w := range Windows {
		slo = append(slo, Rule{
			Alert:  "CapstanTTFTBudgetBurn" + title(w.Severity),
			Expr:   burn(ttftBad, ttftBudget, w),
			For:    w.For,
			Labels: map[string]string{"severity": w.Severity, "slo": "ttft"},
			Annotations: map[string]string{
				"summary": "{{ $labels.endpoint }}/{{ $labels.variant }}: time to first token over " + TTFTThreshold + "s for {{ $value | humanizePercentage }} of streamed requests",
				"description": fmt.Sprintf("The TTFT objective (%s of streamed requests within %ss) is burning its budget %sx faster than sustainable over %s and %s.",
					TTFTObjective, TTFTThreshold, w.Burn, w.Long, w.Short),
			},
		})
	}
	for _, w := range Windows {
		slo = append(slo, Rule{
			Alert:  "CapstanErrorBudgetBurn" + title(w.Severity),
			Expr:   burn(errorRatio, errorBudget, w),
			For:    w.For,
			Labels: map[string]string{"severity": w.Severity, "slo": "errors"},
			Annotations: map[string]string{
				"summary": "{{ $labels.endpoint }}/{{ $labels.variant }}: {{ $value | humanizePercentage }} of requests failed",
				"description": fmt.Sprintf("The availability objective (%s of requests without a 5xx or gateway error) is burning its budget %sx faster than sustainable over %s and %s.",
					ErrorObjective, w.Burn, w.Long, w.Short),
			},
		})
	}
	replicas := []Rule{
		{
			Alert:  "CapstanEndpointReplicasNotReady",
			Expr:   notReady("capstan_endpoint_replicas", "endpoint, variant"),
			For:    "10m",
			Labels: map[string]string{"severity": "ticket"},
			Annotations: map[string]string{
				"summary":     "{{ $labels.endpoint }}/{{ $labels.variant }}: fewer replicas ready than desired for 10 minutes",
				"description": "The variant wants more replicas than pass their health checks; see DescribeEndpoint and the replica logs.",
			},
		},
		{
			Alert:  "CapstanDeploymentReplicasNotReady",
			Expr:   notReady("capstan_deployment_replicas", "namespace, name, kind"),
			For:    "10m",
			Labels: map[string]string{"severity": "ticket"},
			Annotations: map[string]string{
				"summary":     "{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: fewer replicas ready than desired for 10 minutes",
				"description": "See `capstan describe` of the object for its events.",
			},
		},
		{
			Alert:  "CapstanDeploymentReplicasPending",
			Expr:   `capstan_deployment_replicas{state="pending"} > 0`,
			For:    "15m",
			Labels: map[string]string{"severity": "ticket"},
			Annotations: map[string]string{
				"summary":     "{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}: {{ $value }} replicas waiting for a node for 15 minutes",
				"description": "No node has room for them (FailedScheduling events say why).",
			},
		},
		{
			Alert:  "CapstanNodeAutoscalerPendingReplicas",
			Expr:   `capstan_node_autoscaler_pending_replicas > 0`,
			For:    "15m",
			Labels: map[string]string{"severity": "ticket"},
			Annotations: map[string]string{
				"summary":     "cluster {{ $labels.cluster }}: {{ $value }} replicas no node has room for, for 15 minutes",
				"description": "The node autoscaler has not found capacity for them.",
			},
		},
	}
	capacity := []Rule{
		{
			Alert:  "CapstanTrainingPlanExpiring",
			Expr:   `(capstan_training_plan_remaining_seconds < 86400) > 0`,
			Labels: map[string]string{"severity": "ticket"},
			Annotations: map[string]string{
				"summary":     "training plan {{ $labels.plan }} ends in {{ $value | humanizeDuration }}",
				"description": "Endpoints and clusters on the plan stop serving when it ends; extend it or move them.",
			},
		},
		{
			Alert:  "CapstanEndpointOnExpiredPlan",
			Expr:   `capstan_endpoint_on_expired_plan == 1`,
			Labels: map[string]string{"severity": "page"},
			Annotations: map[string]string{
				"summary":     "endpoint {{ $labels.endpoint }} runs on expired training plan {{ $labels.plan }}",
				"description": "Its invocations fail until it is updated to capacity that exists.",
			},
		},
	}
	clusters := []Rule{
		{
			Alert:  "CapstanNodeLaunchFailures",
			Expr:   `sum by (reason) (increase(capstan_cluster_node_events_total{reason=~"InsufficientCapacity|ClusterFailed"}[15m])) > 0`,
			Labels: map[string]string{"severity": "ticket"},
			Annotations: map[string]string{
				"summary":     "nodes failed to launch ({{ $labels.reason }}) in the last 15 minutes",
				"description": "Nodes could not be launched; see DescribeCluster's FailureMessage and the cluster events.",
			},
		},
		{
			Alert:  "CapstanNodeAutoscalerProvisioningFailures",
			Expr:   `sum by (cluster, result) (increase(capstan_node_autoscaler_provisioning_decisions_total{result=~"insufficient_capacity|error"}[15m])) > 0`,
			Labels: map[string]string{"severity": "ticket"},
			Annotations: map[string]string{
				"summary":     "cluster {{ $labels.cluster }}: node launches failed ({{ $labels.result }}) in the last 15 minutes",
				"description": "The node autoscaler could not launch the nodes its pending replicas need.",
			},
		},
	}
	return File{Groups: []Group{
		{Name: "capstan-slo", Rules: slo},
		{Name: "capstan-replicas", Rules: replicas},
		{Name: "capstan-capacity", Rules: capacity},
		{Name: "capstan-clusters", Rules: clusters},
	}}
}

// header starts the generated file.
const header = "# Generated by `go test ./internal/alerts -update` from internal/alerts; do not edit.\n" +
	"# Prometheus alerting rules for capstan (docs/observability.md, Alerts).\n"

// YAML is the rule file: what deploy/prometheus/capstan-rules.yml holds and
// `capstan observability up` loads.
func YAML() []byte {
	b, err := yaml.Marshal(Rules())
	if err != nil {
		panic("alerts: " + err.Error()) // plain structs of strings: cannot fail
	}
	return append([]byte(header), b...)
}
