package operator_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/operator"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// TestKEDA: with KEDA's ScaledObject CRD installed, autoScalingSpec becomes
// a ScaledObject on the manifest's scale subresource (scale to zero
// included) instead of an HPA, with the reference's defaults and triggers.
func TestKEDA(t *testing.T) {
	e := startEnvWith(t, envOptions{inProcess: true, extraCRDs: []string{"testdata/keda-crd"}})
	ctx := context.Background()
	e.mustKubectl(t, "apply", "-f", iecDemoExample, "-f", "../manifest/testdata/reference-jsm-mig-scale-to-zero.yaml")

	so := func(name string) *unstructured.Unstructured {
		u := operator.NewScaledObject()
		eventually(t, "ScaledObject "+name, func() error {
			return e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, u)
		})
		return u
	}
	field := func(u *unstructured.Unstructured, path ...string) any {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		return v
	}
	trigger := func(u *unstructured.Unstructured) map[string]any {
		ts, _, _ := unstructured.NestedSlice(u.Object, "spec", "triggers")
		if len(ts) != 1 {
			t.Fatalf("%s triggers = %v", u.GetName(), ts)
		}
		return ts[0].(map[string]any)
	}

	demo := so("demo")
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"spec", "scaleTargetRef", "kind"}, "InferenceEndpointConfig"},
		{[]string{"spec", "scaleTargetRef", "apiVersion"}, apiv1.GroupVersion.String()},
		{[]string{"spec", "minReplicaCount"}, int64(0)},
		{[]string{"spec", "maxReplicaCount"}, int64(4)},
		{[]string{"spec", "pollingInterval"}, int64(15)},
		{[]string{"spec", "cooldownPeriod"}, int64(60)},
		{[]string{"spec", "initialCooldownPeriod"}, int64(300)},
		{[]string{"spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleDown", "stabilizationWindowSeconds"}, int64(300)},
	} {
		if got := field(demo, c.path...); got != c.want {
			t.Errorf("demo %v = %v (%T), want %v", c.path, got, got, c.want)
		}
	}
	tr := trigger(demo)
	md := tr["metadata"].(map[string]any)
	if tr["type"] != "prometheus" || md["query"] != "sum(vllm:num_requests_waiting)" || md["threshold"] != "4" || md["activationThreshold"] != "1" || md["serverAddress"] != "http://127.0.0.1:9090" {
		t.Errorf("demo trigger = %v", tr)
	}
	assertOwned(t, demo.GetOwnerReferences(), "InferenceEndpointConfig", "demo")
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, &autoscalingv2.HorizontalPodAutoscaler{}); err == nil {
		t.Error("an HPA was made although KEDA is installed (KEDA makes its own)")
	}

	jsm := so("deepseek")
	tr = trigger(jsm)
	md = tr["metadata"].(map[string]any)
	if tr["type"] != "aws-cloudwatch" || md["dimensionName"] != "EndpointName;VariantName" || md["dimensionValue"] != "deepseek;AllTraffic" ||
		md["targetMetricValue"] != "10.5" || md["activationTargetMetricValue"] != "5" || md["metricStat"] != "Sum" || md["metricStatPeriod"] != "30" {
		t.Errorf("deepseek trigger = %v", tr)
	}

	// KEDA scales to zero through the scale subresource; the Deployment follows.
	e.mustKubectl(t, "scale", "jsm/deepseek", "--replicas=0")
	eventually(t, "Deployment deepseek at 0", func() error {
		d := &appsv1.Deployment{}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "deepseek"}, d); err != nil {
			return err
		}
		if *d.Spec.Replicas != 0 {
			return errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
}
