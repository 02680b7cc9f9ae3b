package manifest

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzManifest feeds YAML/JSON to Load (decode, default, validate): it must
// never panic, and whatever it accepts must carry numbers within capstan's
// caps. Seeds: the testdata manifests, the minimal objects and the
// reproduction of an uncapped spec.replicas.
func FuzzManifest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.yaml"))
	for _, p := range append(files, golden...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		minimalIEC, minimalJSM,
		minimalIEC + "  replicas: 2147483647\n",
		minimalJSM + "  replicas: 1000\n  maxDeployTimeInSeconds: 86400\n",
		minimalJSM + "  autoScalingSpec: {minReplicaCount: 0, maxReplicaCount: 2147483647, pollingInterval: 2147483647}\n",
		minimalJSM + "  autoScalingSpec: {cloudWatchTrigger: {namespace: capstan, metricName: QueueDepth, targetValue: 1e308, activationTargetValue: .nan}}\n",
		minimalIEC + "    requestLimits: {maxConcurrentRequests: 2147483647, maxQueueSize: 1000000}\n",
		minimalIEC + "---\n" + minimalJSM,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Load(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			checkCaps(t, o)
			// Defaulting and validating again changes nothing.
			o.Default()
			if err := o.Validate(); err != nil {
				t.Fatalf("accepted object fails a second validation: %v", err)
			}
		}
	})
}

// checkCaps fails t if an accepted object carries a number outside its cap.
func checkCaps(t *testing.T, o Object) {
	t.Helper()
	in := func(name string, v *int32, lo, hi int32) {
		if v != nil && (*v < lo || *v > hi) {
			t.Fatalf("%s/%s: accepted %s = %d outside [%d, %d]", o.GetKind(), o.GetMeta().Name, name, *v, lo, hi)
		}
	}
	pos := func(name string, v *float64) {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
			t.Fatalf("%s/%s: accepted %s = %v", o.GetKind(), o.GetMeta().Name, name, *v)
		}
	}
	autoscaling := func(a *AutoScalingSpec) {
		if a == nil {
			return
		}
		in("minReplicaCount", a.MinReplicaCount, 0, MaxReplicas)
		in("maxReplicaCount", a.MaxReplicaCount, 1, MaxReplicas)
		in("pollingInterval", a.PollingInterval, 1, MaxScalingSeconds)
		in("cooldownPeriod", a.CooldownPeriod, 0, MaxScalingSeconds)
		in("initialCooldownPeriod", a.InitialCooldownPeriod, 0, MaxScalingSeconds)
		in("scaleDownStabilizationTime", a.ScaleDownStabilizationTime, 0, 3600)
		in("scaleUpStabilizationTime", a.ScaleUpStabilizationTime, 0, 3600)
		cws := a.CloudWatchTriggerList
		if a.CloudWatchTrigger != nil {
			cws = append(cws, *a.CloudWatchTrigger)
		}
		for _, c := range cws {
			pos("targetValue", c.TargetValue)
			pos("activationTargetValue", c.ActivationTargetValue)
			in("metricCollectionPeriod", c.MetricCollectionPeriod, 1, MaxScalingSeconds)
			in("metricCollectionStartTime", c.MetricCollectionStartTime, 1, MaxScalingSeconds)
		}
		ps := a.PrometheusTriggerList
		if a.PrometheusTrigger != nil {
			ps = append(ps, *a.PrometheusTrigger)
		}
		for _, p := range ps {
			pos("targetValue", p.TargetValue)
			pos("activationTargetValue", p.ActivationTargetValue)
		}
	}
	switch o := o.(type) {
	case *InferenceEndpointConfig:
		s := o.Spec
		in("replicas", s.Replicas, 0, MaxReplicas)
		in("maxDeployTimeInSeconds", s.MaxDeployTimeInSeconds, 1, MaxDeployTimeSeconds)
		autoscaling(s.AutoScalingSpec)
		if s.IntelligentRoutingSpec != nil {
			autoscaling(s.IntelligentRoutingSpec.AutoScalingSpec)
		}
		if s.Worker != nil && s.Worker.Resources != nil {
			// The deployment converts these to int64 milli-CPUs and bytes.
			for _, m := range []map[string]Quantity{s.Worker.Resources.Requests, s.Worker.Resources.Limits} {
				for k, q := range m {
					if v, err := q.Value(); err != nil || !(v >= 0) || v*1000 > math.MaxInt64/2 {
						t.Fatalf("%s/%s: accepted resource %s = %s (%v, %v)", o.GetKind(), o.GetMeta().Name, k, q, v, err)
					}
				}
			}
		}
		if s.Worker != nil && s.Worker.RequestLimits != nil {
			in("maxConcurrentRequests", s.Worker.RequestLimits.MaxConcurrentRequests, 0, MaxRequestLimit)
			in("maxQueueSize", s.Worker.RequestLimits.MaxQueueSize, 0, MaxRequestLimit)
		}
	case *JumpStartModel:
		s := o.Spec
		in("replicas", s.Replicas, 0, MaxReplicas)
		in("maxDeployTimeInSeconds", s.MaxDeployTimeInSeconds, 1, MaxDeployTimeSeconds)
		autoscaling(s.AutoScalingSpec)
		if s.IntelligentRoutingSpec != nil {
			autoscaling(s.IntelligentRoutingSpec.AutoScalingSpec)
		}
	}
}
