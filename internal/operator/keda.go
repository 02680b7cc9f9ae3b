package operator

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// ScaledObjectGVK is KEDA's ScaledObject. When its CRD is installed the
// operator compiles autoScalingSpec to one (as the HyperPod operator does),
// which brings scale to zero and KEDA's own scalers; else to an HPA.
var ScaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}

// HasKEDA reports whether the cluster serves KEDA's ScaledObject.
func HasKEDA(m meta.RESTMapper) bool {
	_, err := m.RESTMapping(ScaledObjectGVK.GroupKind(), ScaledObjectGVK.Version)
	return err == nil
}

// NewScaledObject is an empty ScaledObject to read into.
func NewScaledObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ScaledObjectGVK)
	return u
}

// buildScaledObject compiles autoScalingSpec to a KEDA ScaledObject that
// scales the manifest through its scale subresource, with the reference's
// defaults; minReplicaCount 0 is scale to zero.
func buildScaledObject(kind string, m *manifest.ObjectMeta, a *manifest.AutoScalingSpec) *unstructured.Unstructured {
	i64 := func(p *int32, def int32) int64 { return int64(deref(p, def)) }
	spec := map[string]any{
		"scaleTargetRef": map[string]any{
			"apiVersion": apiv1.GroupVersion.String(), "kind": kind, "name": m.Name,
		},
		"minReplicaCount":       i64(a.MinReplicaCount, manifest.DefaultMinReplicaCount),
		"maxReplicaCount":       i64(a.MaxReplicaCount, manifest.DefaultMaxReplicaCount),
		"pollingInterval":       i64(a.PollingInterval, manifest.DefaultPollingInterval),
		"cooldownPeriod":        i64(a.CooldownPeriod, manifest.DefaultCooldownPeriod),
		"initialCooldownPeriod": i64(a.InitialCooldownPeriod, manifest.DefaultInitialCooldownPeriod),
		"advanced": map[string]any{
			"horizontalPodAutoscalerConfig": map[string]any{
				"behavior": map[string]any{
					"scaleDown": map[string]any{"stabilizationWindowSeconds": i64(a.ScaleDownStabilizationTime, manifest.DefaultScaleDownStabilization)},
					"scaleUp":   map[string]any{"stabilizationWindowSeconds": i64(a.ScaleUpStabilizationTime, manifest.DefaultScaleUpStabilization)},
				},
			},
		},
		"triggers": kedaTriggers(m.Name, a),
	}
	u := NewScaledObject()
	u.SetName(m.Name)
	u.SetNamespace(m.Namespace)
	labels := objectLabels(kind, m.Name)
	u.SetLabels(labels)
	u.Object["spec"] = spec
	return u
}

func num(f *float64, def float64) string {
	v := def
	if f != nil {
		v = *f
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func kedaMetricType(t string) string {
	if t == manifest.MetricTypeValue {
		return "Value"
	}
	return "AverageValue"
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// kedaTriggers maps the triggers to KEDA's aws-cloudwatch and prometheus
// scalers (the list wins over the single trigger, as in the reference).
func kedaTriggers(name string, a *manifest.AutoScalingSpec) []any {
	var out []any
	for i, t := range a.CloudWatchTriggers() {
		n := manifest.TriggerName(t.Name, name, "cloudwatch", i)
		md := map[string]any{
			"namespace":                   t.Namespace,
			"metricName":                  t.MetricName,
			"targetMetricValue":           num(t.TargetValue, 0),
			"activationTargetMetricValue": num(t.ActivationTargetValue, 0),
			"minMetricValue":              num(t.MinValue, 0),
			"metricCollectionTime":        strconv.Itoa(int(deref(t.MetricCollectionStartTime, manifest.DefaultMetricCollectionStart))),
			"metricStatPeriod":            strconv.Itoa(int(deref(t.MetricCollectionPeriod, manifest.DefaultMetricCollectionPeriod))),
			"metricStat":                  orDefault(t.MetricStat, manifest.DefaultMetricStat),
		}
		if len(t.Dimensions) > 0 {
			var dn, dv []string
			for _, d := range t.Dimensions {
				dn, dv = append(dn, d.Name), append(dv, d.Value)
			}
			md["dimensionName"], md["dimensionValue"] = strings.Join(dn, ";"), strings.Join(dv, ";")
		}
		out = append(out, map[string]any{
			"type": "aws-cloudwatch", "name": n, "metricType": kedaMetricType(t.MetricType),
			"useCachedMetrics": boolOr(t.UseCachedMetrics, true), "metadata": md,
		})
	}
	for i, t := range a.PrometheusTriggers() {
		n := manifest.TriggerName(t.Name, name, "prometheus", i)
		md := map[string]any{
			"serverAddress":       t.ServerAddress,
			"query":               t.Query,
			"threshold":           num(t.TargetValue, 0),
			"activationThreshold": num(t.ActivationTargetValue, 0),
		}
		if t.Namespace != "" {
			md["namespace"] = t.Namespace
		}
		if t.CustomHeaders != "" {
			md["customHeaders"] = t.CustomHeaders
		}
		out = append(out, map[string]any{
			"type": "prometheus", "name": n, "metricType": kedaMetricType(t.MetricType),
			"useCachedMetrics": boolOr(t.UseCachedMetrics, true), "metadata": md,
		})
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
