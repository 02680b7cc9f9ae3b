package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/gateway"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// iecYAML is a valid InferenceEndpointConfig; extra is spliced into spec.
func iecYAML(name, extra string) string {
	return `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: ` + name + `, namespace: default}
spec:
  modelName: qwen3-32b
  instanceType: ml.g5.24xlarge
  invocationEndpoint: v1/completions
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: qwen}
  worker:
    image: vllm/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "6", memory: 30Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
` + extra
}

func decodeIEC(t testing.TB, s string) *apiv1.InferenceEndpointConfig {
	t.Helper()
	o := &apiv1.InferenceEndpointConfig{}
	if err := yaml.UnmarshalStrict([]byte(s), o); err != nil {
		t.Fatalf("decode: %v\n%s", err, s)
	}
	return o
}

func decodeJSM(t testing.TB, name, extra string) *apiv1.JumpStartModel {
	t.Helper()
	o := &apiv1.JumpStartModel{}
	y := `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: ` + name + `, namespace: default}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.12xlarge}
` + extra
	if err := yaml.UnmarshalStrict([]byte(y), o); err != nil {
		t.Fatalf("decode: %v\n%s", err, y)
	}
	return o
}

// withKind relabels a slice as the Service of an object of another kind.
func withKind(s discoveryv1.EndpointSlice, kind string) discoveryv1.EndpointSlice {
	for k, v := range apiv1.SelectorLabels(kind, s.Labels[apiv1.LabelName]) {
		s.Labels[k] = v
	}
	return s
}

// slice is an EndpointSlice of the object's Service as the endpointslice
// controller writes it (the Service's labels copied).
func slice(obj, name string, ports map[string]int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	l := apiv1.SelectorLabels("InferenceEndpointConfig", obj)
	l[discoveryv1.LabelServiceName] = obj
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: l},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &n, Port: &p})
	}
	return s
}

func ep(addr, pod string, ready *bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if pod != "" {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "default"}
	}
	return e
}

func TestRoutes(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name      string
		objs      []apiv1.Object
		slices    []discoveryv1.EndpointSlice
		want      map[string]gateway.VariantRoute
		conflicts int
	}{
		{name: "ready endpoints, nil Ready counts as ready, sorted by pod",
			objs: []apiv1.Object{decodeIEC(t, iecYAML("a", ""))},
			slices: []discoveryv1.EndpointSlice{slice("a", "a-1", map[string]int32{"http": 8000, "metrics": 9400},
				ep("10.0.0.2", "a-y", &yes), ep("10.0.0.1", "a-x", nil), ep("10.0.0.3", "a-z", &no))},
			want: map[string]gateway.VariantRoute{"a": {Name: VariantName, Weight: 1, RoutingStrategy: "LEAST_OUTSTANDING_REQUESTS", Backends: []gateway.Backend{
				{ID: "default/a-x", Addr: "10.0.0.1:8000"}, {ID: "default/a-y", Addr: "10.0.0.2:8000"}}}}},
		{name: "endpointName names the route; round robin from the load balancer; no pod ref",
			objs:   []apiv1.Object{decodeIEC(t, iecYAML("b", "  endpointName: bee\n  loadBalancer: {routingAlgorithm: round_robin}\n"))},
			slices: []discoveryv1.EndpointSlice{slice("b", "b-1", map[string]int32{"http": 8000}, ep("10.0.0.9", "", nil))},
			want: map[string]gateway.VariantRoute{"bee": {Name: VariantName, Weight: 1, RoutingStrategy: "roundrobin", Backends: []gateway.Backend{
				{ID: "default/10.0.0.9:8000", Addr: "10.0.0.9:8000"}}}}},
		{name: "kvaware subscribes to the kv-events port; slices of other objects ignored",
			objs: []apiv1.Object{decodeIEC(t, iecYAML("c", "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n"))},
			slices: []discoveryv1.EndpointSlice{
				slice("c", "c-1", map[string]int32{"http": 8000, apiv1.KVEventsPortName: 5557}, ep("10.0.0.4", "c-p", nil)),
				slice("other", "o-1", map[string]int32{"http": 8000}, ep("10.0.0.5", "o-p", nil))},
			want: map[string]gateway.VariantRoute{"c": {Name: VariantName, Weight: 1, RoutingStrategy: "kvaware", Backends: []gateway.Backend{
				{ID: "default/c-p", Addr: "10.0.0.4:8000", KVEventsEndpoint: "tcp://10.0.0.4:5557"}}}}},
		{name: "prefixaware by default when enabled; no kv subscription; no slices yet",
			objs: []apiv1.Object{decodeIEC(t, iecYAML("d", "  intelligentRoutingSpec: {enabled: true}\n"))},
			want: map[string]gateway.VariantRoute{"d": {Name: VariantName, Weight: 1, RoutingStrategy: "prefixaware"}}},
		{name: "two objects, one endpoint name: the first keeps it",
			objs: []apiv1.Object{decodeIEC(t, iecYAML("f", "  endpointName: same\n")), decodeIEC(t, iecYAML("e", "  endpointName: same\n"))},
			slices: []discoveryv1.EndpointSlice{slice("e", "e-1", map[string]int32{"http": 1}, ep("10.0.0.6", "e-p", nil)),
				slice("f", "f-1", map[string]int32{"http": 1}, ep("10.0.0.7", "f-p", nil))},
			want: map[string]gateway.VariantRoute{"same": {Name: VariantName, Weight: 1, RoutingStrategy: "LEAST_OUTSTANDING_REQUESTS", Backends: []gateway.Backend{
				{ID: "default/e-p", Addr: "10.0.0.6:1"}}}},
			conflicts: 1},
		{name: "a JumpStartModel takes its SageMaker endpoint name and only its own kind's slices",
			objs: []apiv1.Object{decodeJSM(t, "j", "  sageMakerEndpoint: {name: jay}\n  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n")},
			slices: []discoveryv1.EndpointSlice{
				withKind(slice("j", "j-1", map[string]int32{"http": 8080, apiv1.KVEventsPortName: 5557}, ep("10.0.1.1", "j-p", nil)), "JumpStartModel"),
				slice("j", "j-iec", map[string]int32{"http": 8080}, ep("10.0.1.2", "j-iec-p", nil))},
			want: map[string]gateway.VariantRoute{"jay": {Name: VariantName, Weight: 1, RoutingStrategy: "kvaware", Backends: []gateway.Backend{
				{ID: "default/j-p", Addr: "10.0.1.1:8080", KVEventsEndpoint: "tcp://10.0.1.1:5557"}}}}},
		{name: "an invalid object gets no route",
			objs: []apiv1.Object{decodeIEC(t, strings.Replace(iecYAML("g", "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n"), "v1/completions", "v1/chat/completions", 1))},
			want: map[string]gateway.VariantRoute{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, conflicts := Routes(tt.objs, tt.slices)
			if len(conflicts) != tt.conflicts {
				t.Errorf("conflicts %v, want %d", conflicts, tt.conflicts)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("routes %+v, want %+v", got, tt.want)
			}
			for name, wv := range tt.want {
				r, ok := got[name]
				if !ok || r.Endpoint != name || len(r.Variants) != 1 {
					t.Fatalf("route %q: %+v", name, r)
				}
				v := r.Variants[0]
				if v.Name != wv.Name || v.Weight != wv.Weight || v.RoutingStrategy != wv.RoutingStrategy || len(v.Backends) != len(wv.Backends) {
					t.Fatalf("route %q variant %+v, want %+v", name, v, wv)
				}
				for i := range wv.Backends {
					if v.Backends[i] != wv.Backends[i] {
						t.Errorf("route %q backend %d = %+v, want %+v", name, i, v.Backends[i], wv.Backends[i])
					}
				}
			}
		})
	}
}

func TestRequestLimitsScaleWithReadyReplicas(t *testing.T) {
	o := decodeIEC(t, iecYAML("h", "")+"    requestLimits: {maxConcurrentRequests: 4, maxQueueSize: 2}\n")
	m := o.ToManifest()
	m.Default()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	got, _ := Routes([]apiv1.Object{o}, []discoveryv1.EndpointSlice{slice("h", "h-1", map[string]int32{"http": 1},
		ep("10.0.0.1", "h-1", nil), ep("10.0.0.2", "h-2", nil))})
	if r := got["h"]; r.MaxConcurrency != 8 || r.MaxQueue != 4 {
		t.Fatalf("limits %d/%d, want 8/4 (per replica × 2)", r.MaxConcurrency, r.MaxQueue)
	}
}
