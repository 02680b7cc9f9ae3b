package manifest

import (
	"math"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/endpoint"
)

// TestMaxReplicasMatchesEndpointCap: a deployment registers a SageMaker
// endpoint, so the two caps must agree.
func TestMaxReplicasMatchesEndpointCap(t *testing.T) {
	if MaxReplicas != endpoint.MaxInstancesPerVariant {
		t.Fatalf("MaxReplicas %d != endpoint.MaxInstancesPerVariant %d", MaxReplicas, endpoint.MaxInstancesPerVariant)
	}
}

// TestNumberCaps: every count and duration a manifest carries is checked
// against its range, from the YAML a user writes (spec.replicas 2147483647
// used to be accepted and make the controller number replicas without end).
func TestNumberCaps(t *testing.T) {
	tests := []struct {
		name, base, extra string
		path, msg         string // empty path: valid
	}{
		{"replicas at the cap", minimalIEC, "  replicas: 1000\n", "", ""},
		{"replicas MaxInt32", minimalIEC, "  replicas: 2147483647\n", "spec.replicas", "<= 1000"},
		{"replicas 1001", minimalJSM, "  replicas: 1001\n", "spec.replicas", "<= 1000"},
		{"maxDeployTime a day", minimalIEC, "  maxDeployTimeInSeconds: 86400\n", "", ""},
		{"maxDeployTime over a day", minimalIEC, "  maxDeployTimeInSeconds: 2147483647\n", "spec.maxDeployTimeInSeconds", "<= 86400"},
		{"maxReplicaCount MaxInt32", minimalJSM, "  autoScalingSpec: {maxReplicaCount: 2147483647}\n", "spec.autoScalingSpec.maxReplicaCount", "<= 1000"},
		{"minReplicaCount over the cap", minimalJSM, "  autoScalingSpec: {minReplicaCount: 1001}\n", "spec.autoScalingSpec.minReplicaCount", "<= 1000"},
		{"pollingInterval MaxInt32", minimalJSM, "  autoScalingSpec: {pollingInterval: 2147483647}\n", "spec.autoScalingSpec.pollingInterval", "<= 86400"},
		{"cooldownPeriod over a day", minimalJSM, "  autoScalingSpec: {cooldownPeriod: 86401}\n", "spec.autoScalingSpec.cooldownPeriod", "<= 86400"},
		{"initialCooldownPeriod over a day", minimalJSM, "  autoScalingSpec: {initialCooldownPeriod: 86401}\n", "spec.autoScalingSpec.initialCooldownPeriod", "<= 86400"},
		{"metricCollectionPeriod over a day", minimalJSM, "  autoScalingSpec: {cloudWatchTrigger: {namespace: capstan, metricName: QueueDepth, targetValue: 1, metricCollectionPeriod: 86460}}\n",
			"spec.autoScalingSpec.cloudWatchTrigger.metricCollectionPeriod", "up to 86400"},
		{"metricCollectionStartTime MaxInt32", minimalJSM, "  autoScalingSpec: {cloudWatchTrigger: {namespace: capstan, metricName: QueueDepth, targetValue: 1, metricCollectionStartTime: 2147483647}}\n",
			"spec.autoScalingSpec.cloudWatchTrigger.metricCollectionStartTime", "<= 86400"},
		{"maxQueueSize MaxInt32", minimalIEC, "    requestLimits: {maxQueueSize: 2147483647}\n", "spec.worker.requestLimits.maxQueueSize", "<= 1000000"},
		{"maxConcurrentRequests MaxInt32", minimalIEC, "    requestLimits: {maxConcurrentRequests: 2147483647}\n", "spec.worker.requestLimits.maxConcurrentRequests", "1-1000000"},
		{"quantity overflowing float64", minimalIEC, "", "spec.worker.resources.requests[memory]", "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.base + tt.extra
			if tt.name == "quantity overflowing float64" {
				src = strings.Replace(src, "memory: 16Gi", "memory: "+strings.Repeat("9", 300)+"Ei", 1)
			}
			_, err := Load([]byte(src))
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

// TestTriggerThresholdsFinite: NaN and infinities cannot come from YAML or
// JSON, but objects built in Go are validated too.
func TestTriggerThresholdsFinite(t *testing.T) {
	const base = "spec.autoScalingSpec.prometheusTriggerList[0]."
	for _, tt := range []struct {
		name      string
		mutate    func(p *PrometheusTrigger)
		path, msg string
	}{
		{"target NaN", func(p *PrometheusTrigger) { p.TargetValue = ptr(math.NaN()) }, base + "targetValue", "finite"},
		{"target +Inf", func(p *PrometheusTrigger) { p.TargetValue = ptr(math.Inf(1)) }, base + "targetValue", "finite"},
		{"target negative", func(p *PrometheusTrigger) { p.TargetValue = ptr(-1.0) }, base + "targetValue", "> 0"},
		{"activation NaN", func(p *PrometheusTrigger) { p.ActivationTargetValue = ptr(math.NaN()) }, base + "activationTargetValue", "finite"},
		{"activation +Inf", func(p *PrometheusTrigger) { p.ActivationTargetValue = ptr(math.Inf(1)) }, base + "activationTargetValue", "finite"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeOneT[*JumpStartModel](t, minimalJSM)
			p := PrometheusTrigger{ServerAddress: "http://127.0.0.1:9090", Query: "sum(up)", TargetValue: ptr(2.0)}
			tt.mutate(&p)
			o.Spec.AutoScalingSpec = &AutoScalingSpec{PrometheusTriggerList: []PrometheusTrigger{p}}
			o.Default()
			wantOnly(t, o.Validate(), tt.path, tt.msg)
		})
	}
	o := decodeOneT[*JumpStartModel](t, minimalJSM)
	o.Spec.AutoScalingSpec = &AutoScalingSpec{CloudWatchTrigger: &CloudWatchTrigger{Namespace: "capstan", MetricName: "QueueDepth",
		TargetValue: ptr(1.0), MinValue: ptr(math.Inf(-1))}}
	o.Default()
	wantOnly(t, o.Validate(), "spec.autoScalingSpec.cloudWatchTrigger.minValue", "finite")
}
