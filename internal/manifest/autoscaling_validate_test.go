package manifest

import (
	"strings"
	"testing"
)

// TestValidateCloudWatchMetrics: namespaces and metric names capstan maps
// pass; anything else fails naming the field.
func TestValidateCloudWatchMetrics(t *testing.T) {
	const base = "spec.autoScalingSpec.cloudWatchTrigger."
	tests := []struct {
		name             string
		ns, metric, stat string
		path, msg        string // empty path = valid
	}{
		{"SageMaker Invocations Sum", "AWS/SageMaker", "Invocations", "Sum", "", ""},
		{"SageMaker InvocationsPerInstance", "AWS/SageMaker", "InvocationsPerInstance", "", "", ""},
		{"SageMaker ModelLatency Average", "AWS/SageMaker", "ModelLatency", "Average", "", ""},
		{"SageMaker ConcurrentRequestsPerModel p90", "AWS/SageMaker", "ConcurrentRequestsPerModel", "p90", "", ""},
		{"SageMaker 5XX Maximum", "AWS/SageMaker", "Invocation5XXErrors", "Maximum", "", ""},
		{"SageMaker InvocationModelErrors", "AWS/SageMaker", "InvocationModelErrors", "Average", "", ""},
		{"capstan QueueDepth", "capstan", "QueueDepth", "Maximum", "", ""},
		{"capstan InFlightPerReplica", "capstan", "InFlightPerReplica", "Average", "", ""},
		{"capstan KVCacheUtilization p99", "capstan", "KVCacheUtilization", "p99", "", ""},
		{"capstan TimeToFirstToken", "capstan", "TimeToFirstToken", "Average", "", ""},
		{"unknown SageMaker metric", "AWS/SageMaker", "CPUUtilization", "", base + "metricName", "InvocationsPerInstance"},
		{"built-in in the SageMaker namespace", "AWS/SageMaker", "QueueDepth", "", base + "metricName", "unsupported metric"},
		{"SageMaker metric in the capstan namespace", "capstan", "Invocations", "", base + "metricName", "QueueDepth"},
		{"case matters", "capstan", "queuedepth", "", base + "metricName", "unsupported metric"},
		{"unknown namespace", "AWS/SQS", "ApproximateNumberOfMessagesVisible", "", base + "namespace", "AWS/SageMaker and capstan"},
		{"latency percentile", "AWS/SageMaker", "ModelLatency", "p99", "", ""},
		{"overhead latency percentile", "AWS/SageMaker", "OverheadLatency", "p99.9", "", ""},
		{"SageMaker 4XX Sum", "AWS/SageMaker", "Invocation4XXErrors", "Sum", "", ""},
		{"TTFT maximum", "capstan", "TimeToFirstToken", "Maximum", "", ""},
		{"count percentile", "AWS/SageMaker", "Invocations", "p50", "", ""},
		{"arrival rate maximum", "capstan", "ArrivalRate", "Maximum", "", ""},
		{"bad statistic", "capstan", "QueueDepth", "Median", base + "metricStat", "unsupported statistic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeOneT[*JumpStartModel](t, minimalJSM)
			o.Spec.AutoScalingSpec = &AutoScalingSpec{CloudWatchTrigger: &CloudWatchTrigger{Namespace: tt.ns, MetricName: tt.metric, MetricStat: tt.stat, TargetValue: ptr(1.0)}}
			o.Default()
			err := o.Validate()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			wantOnly(t, err, tt.path, tt.msg)
		})
	}
}

func TestValidatePrometheusFields(t *testing.T) {
	const base = "spec.autoScalingSpec.prometheusTriggerList[0]."
	tests := []struct {
		name      string
		mutate    func(p *PrometheusTrigger)
		path, msg string
	}{
		{"valid with headers and namespace", func(p *PrometheusTrigger) { p.CustomHeaders = "X-Scope-OrgID=t1, A = b"; p.Namespace = "team" }, "", ""},
		{"header without value", func(p *PrometheusTrigger) { p.CustomHeaders = "X-Scope-OrgID" }, base + "customHeaders", "name=value"},
		{"header with a bad name", func(p *PrometheusTrigger) { p.CustomHeaders = "a b=1" }, base + "customHeaders", "valid header name"},
		{"empty entry", func(p *PrometheusTrigger) { p.CustomHeaders = "a=1,,b=2" }, base + "customHeaders", "entry 1"},
		{"header value with a line break", func(p *PrometheusTrigger) { p.CustomHeaders = "a=1\r\nX: y" }, base + "customHeaders", "line break"},
		{"namespace too long", func(p *PrometheusTrigger) { p.Namespace = strings.Repeat("n", 254) }, base + "namespace", "253"},
		{"query too long", func(p *PrometheusTrigger) { p.Query = strings.Repeat("x", maxStringBytes+1) }, base + "query", "longer than"},
		{"metricType enum", func(p *PrometheusTrigger) { p.MetricType = "AverageValue" }, base + "metricType", "Average, Value"},
		{"activation >= 0", func(p *PrometheusTrigger) { p.ActivationTargetValue = ptr(-1.0) }, base + "activationTargetValue", ">= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeOneT[*JumpStartModel](t, minimalJSM)
			p := PrometheusTrigger{ServerAddress: "http://127.0.0.1:9090", Query: "sum(up)", TargetValue: ptr(2.0)}
			tt.mutate(&p)
			o.Spec.AutoScalingSpec = &AutoScalingSpec{PrometheusTriggerList: []PrometheusTrigger{p}}
			o.Default()
			err := o.Validate()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			wantOnly(t, err, tt.path, tt.msg)
		})
	}
}
