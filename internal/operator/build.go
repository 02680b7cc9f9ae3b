package operator

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// Labels the operator puts on everything it makes, beside apiv1's
// selector labels.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "capstan-operator"
	// LabelInstanceType is the well-known node label the scheduler matches
	// against the manifest's instance type.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// ContainerName is the model-server container of every pod.
	ContainerName = "model"
	// JumpStartPort is where a JumpStartModel's server listens (HTTP and
	// metrics, as the reference's default metrics port).
	JumpStartPort = 8080
)

// BuildOptions are the operator-wide inputs to what it builds.
type BuildOptions struct {
	// ModelImage runs JumpStartModel pods (which name no image): the capstan
	// image, whose `capstan engine sim` serves the model's API.
	ModelImage string
	// KEDA: the cluster serves KEDA's ScaledObject, which autoScalingSpec
	// then becomes instead of an HPA.
	KEDA bool
}

// Desired is what one manifest becomes in the cluster.
type Desired struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	// HPA is nil when the manifest has no autoScalingSpec or KEDA serves
	// ScaledObjects.
	HPA *autoscalingv2.HorizontalPodAutoscaler
	// ScaledObject is set for an autoScalingSpec when KEDA is installed.
	ScaledObject *unstructured.Unstructured
}

func objectLabels(kind, name string) map[string]string {
	l := apiv1.SelectorLabels(kind, name)
	l[LabelManagedBy] = ManagedBy
	return l
}

// Build turns a defaulted, valid manifest into its Deployment, Service and
// HPA. It reads nothing from the cluster, so it is the whole mapping from
// manifest fields to Kubernetes fields.
func Build(obj manifest.Object, opts BuildOptions) (*Desired, error) {
	m := obj.GetMeta()
	var (
		pod      corev1.PodSpec
		c        = corev1.Container{Name: ContainerName}
		replicas int32
		deadline int32
		port     corev1.ContainerPort
		health   = manifest.DefaultHealthCheckPath
		metrics  *manifest.Metrics
		scaling  *manifest.AutoScalingSpec
	)
	switch o := obj.(type) {
	case *manifest.InferenceEndpointConfig:
		s := &o.Spec
		replicas, deadline = *s.Replicas, *s.MaxDeployTimeInSeconds
		metrics, scaling = s.Metrics, s.AutoScalingSpec
		if s.LoadBalancer != nil && s.LoadBalancer.HealthCheckPath != "" {
			health = s.LoadBalancer.HealthCheckPath
		}
		if err := workerContainer(&c, &pod, s); err != nil {
			return nil, err
		}
		a, known := engineAdapter(&c)
		health = readinessPath(health, a, known)
		configureEngine(&c, &pod, a, engineInputs{kv: s.KVCacheSpec, routing: s.IntelligentRoutingSpec, model: s.ModelName, instanceType: iecInstanceType(s)})
		port = c.Ports[0]
		if err := placeIEC(&pod, s); err != nil {
			return nil, err
		}
	case *manifest.JumpStartModel:
		s := &o.Spec
		replicas, deadline = *s.Replicas, *s.MaxDeployTimeInSeconds
		metrics, scaling = s.Metrics, s.AutoScalingSpec
		if s.LoadBalancer != nil && s.LoadBalancer.HealthCheckPath != "" {
			health = s.LoadBalancer.HealthCheckPath
		}
		port = corev1.ContainerPort{Name: manifest.DefaultPortName, ContainerPort: JumpStartPort, Protocol: corev1.ProtocolTCP}
		if err := jumpStartContainer(&c, &pod, s, port, opts); err != nil {
			return nil, err
		}
		a, known := engineAdapter(&c)
		health = readinessPath(health, a, known)
		configureEngine(&c, &pod, a, engineInputs{kv: s.KVCacheSpec, routing: s.IntelligentRoutingSpec, model: s.Model.ModelID, instanceType: s.Server.InstanceType})
	default:
		return nil, fmt.Errorf("operator: unknown manifest kind %T", obj)
	}
	if c.ReadinessProbe == nil {
		// The reference applies a readiness probe of its own when the
		// manifest has none; ours asks the load balancer's health path.
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: health, Port: intstr.FromString(port.Name)}},
			PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 5, SuccessThreshold: 1,
		}
	}
	svcPorts := []corev1.ServicePort{{Name: port.Name, Port: port.ContainerPort, TargetPort: intstr.FromString(port.Name), Protocol: corev1.ProtocolTCP}}
	if mp := metricsPort(metrics); mp != 0 && mp != port.ContainerPort {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: mp, Protocol: corev1.ProtocolTCP})
		svcPorts = append(svcPorts, corev1.ServicePort{Name: "metrics", Port: mp, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP})
	}
	if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == apiv1.KVEventsPortName }) {
		// The engine publishes KV events (configureEngine told it to): the
		// gateway in the cluster finds the port by name in the Service's
		// EndpointSlices and subscribes to every ready pod.
		svcPorts = append(svcPorts, corev1.ServicePort{Name: apiv1.KVEventsPortName, Port: KVEventsPort, TargetPort: intstr.FromString(apiv1.KVEventsPortName), Protocol: corev1.ProtocolTCP})
	}
	if wantsGPU(c.Resources) {
		// GPU nodes are commonly tainted so that only GPU pods land there.
		pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Key: manifest.ResourceGPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	pod.Containers = []corev1.Container{c}

	kind := obj.GetKind()
	sel := apiv1.SelectorLabels(kind, m.Name)
	podLabels := objectLabels(kind, m.Name)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: objectLabels(kind, m.Name)},
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			Selector:                &metav1.LabelSelector{MatchLabels: sel},
			ProgressDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       pod,
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: objectLabels(kind, m.Name)},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: svcPorts, Type: corev1.ServiceTypeClusterIP},
	}
	out := &Desired{Deployment: d, Service: svc}
	if scaling != nil && opts.KEDA {
		out.ScaledObject = buildScaledObject(kind, m, scaling)
	} else if scaling != nil {
		hpa, err := buildHPA(kind, m, scaling)
		if err != nil {
			return nil, err
		}
		out.HPA = hpa
	}
	return out, nil
}

func metricsPort(m *manifest.Metrics) int32 {
	if m == nil || (m.Enabled != nil && !*m.Enabled) {
		return 0
	}
	if m.ModelMetrics != nil && m.ModelMetrics.Port != nil {
		return *m.ModelMetrics.Port
	}
	return manifest.DefaultMetricsPort
}

func wantsGPU(r corev1.ResourceRequirements) bool {
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		for k := range l {
			if k == manifest.ResourceGPU || strings.HasPrefix(string(k), manifest.ResourceMIGPrefix) {
				return true
			}
		}
	}
	return false
}

// decodeInto converts a manifest's opaque core/v1 JSON into its Go type.
func decodeInto(raw []byte, into any, field string) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("operator: %s: %w", field, err)
	}
	return nil
}

func resourceList(m map[string]manifest.Quantity, field string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(corev1.ResourceList, len(m))
	for k, v := range m {
		q, err := resource.ParseQuantity(string(v))
		if err != nil {
			return nil, fmt.Errorf("operator: %s[%s]: %w", field, k, err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

func workerContainer(c *corev1.Container, pod *corev1.PodSpec, s *manifest.InferenceEndpointConfigSpec) error {
	w := s.Worker
	c.Image = w.Image
	c.Command = slices.Clone(w.Command)
	c.Args = slices.Clone(w.Args)
	c.WorkingDir = w.WorkingDir
	name := w.ModelInvocationPort.Name
	if name == "" {
		name = manifest.DefaultPortName
	}
	c.Ports = []corev1.ContainerPort{{Name: name, ContainerPort: w.ModelInvocationPort.ContainerPort, Protocol: corev1.ProtocolTCP}}
	for _, e := range w.EnvironmentVariables {
		ev := corev1.EnvVar{Name: e.Name, Value: e.Value}
		if len(e.ValueFrom) > 0 && string(e.ValueFrom) != "null" {
			ev.ValueFrom = &corev1.EnvVarSource{}
			if err := decodeInto(e.ValueFrom, ev.ValueFrom, "spec.worker.environmentVariables."+e.Name+".valueFrom"); err != nil {
				return err
			}
		}
		c.Env = append(c.Env, ev)
	}
	if r := w.Resources; r != nil {
		var err error
		if c.Resources.Requests, err = resourceList(r.Requests, "spec.worker.resources.requests"); err != nil {
			return err
		}
		if c.Resources.Limits, err = resourceList(r.Limits, "spec.worker.resources.limits"); err != nil {
			return err
		}
	}
	if p := w.Probes; p != nil {
		for _, pr := range []struct {
			raw  []byte
			dst  **corev1.Probe
			name string
		}{{p.LivenessProbe, &c.LivenessProbe, "livenessProbe"}, {p.ReadinessProbe, &c.ReadinessProbe, "readinessProbe"}, {p.StartupProbe, &c.StartupProbe, "startupProbe"}} {
			if len(pr.raw) == 0 || string(pr.raw) == "null" {
				continue
			}
			*pr.dst = &corev1.Probe{}
			if err := decodeInto(pr.raw, *pr.dst, "spec.worker.probes."+pr.name); err != nil {
				return err
			}
		}
	}
	vm := w.ModelVolumeMount
	mount := vm.MountPath
	if mount == "" {
		mount = manifest.DefaultModelMountPath
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: vm.Name, MountPath: mount}}
	if k := s.Kubernetes; k != nil {
		pod.ServiceAccountName = k.ServiceAccountName
		pod.SchedulerName = k.SchedulerName
		for i, v := range k.Volumes {
			raw, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("operator: spec.kubernetes.volumes[%d]: %w", i, err)
			}
			var vol corev1.Volume
			if err := decodeInto(raw, &vol, fmt.Sprintf("spec.kubernetes.volumes[%d]", i)); err != nil {
				return err
			}
			pod.Volumes = append(pod.Volumes, vol)
		}
		for i, raw := range k.InitContainers {
			var ic corev1.Container
			if err := decodeInto(raw, &ic, fmt.Sprintf("spec.kubernetes.initContainers[%d]", i)); err != nil {
				return err
			}
			pod.InitContainers = append(pod.InitContainers, ic)
		}
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name }) {
		// No volume of that name in spec.kubernetes.volumes: the weights
		// volume is a scratch directory on the node (S3/FSx/Hugging Face
		// fetching into it is the model source's job, not yet the
		// operator's; see docs/operator.md).
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: vm.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return nil
}

// placeIEC maps instanceType, instanceTypes or nodeAffinity (at most one is
// set) to node selection on the instance-type label.
func placeIEC(pod *corev1.PodSpec, s *manifest.InferenceEndpointConfigSpec) error {
	switch {
	case s.InstanceType != "":
		pod.NodeSelector = map[string]string{LabelInstanceType: s.InstanceType}
	case len(s.InstanceTypes) > 0:
		// Any of the types may take the replica; earlier ones are preferred.
		na := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(s.InstanceTypes),
			}}}},
		}}
		for i, t := range s.InstanceTypes {
			na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{
				Weight: int32(max(1, 100-10*i)),
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{t},
				}}},
			})
		}
		pod.Affinity = &corev1.Affinity{NodeAffinity: na}
	case len(s.NodeAffinity) > 0 && string(s.NodeAffinity) != "null":
		na := &corev1.NodeAffinity{}
		if err := decodeInto(s.NodeAffinity, na, "spec.nodeAffinity"); err != nil {
			return err
		}
		pod.Affinity = &corev1.Affinity{NodeAffinity: na}
	}
	return nil
}

func jumpStartContainer(c *corev1.Container, pod *corev1.PodSpec, s *manifest.JumpStartModelSpec, port corev1.ContainerPort, opts BuildOptions) error {
	if opts.ModelImage == "" {
		return fmt.Errorf("operator: a JumpStartModel needs the model image (--model-image)")
	}
	it, err := catalog.Default().InstanceType(s.Server.InstanceType)
	if err != nil {
		return fmt.Errorf("operator: spec.server.instanceType: %w", err)
	}
	c.Image = opts.ModelImage
	c.Ports = []corev1.ContainerPort{port}
	spec := runtime.ReplicaSpec{Model: s.Model.ModelID, GPU: it.Device()}
	res := corev1.ResourceList{}
	switch mig := s.Server.MIGProfile(); {
	case mig != "":
		spec.MIGProfile = mig
		res[corev1.ResourceName(manifest.ResourceMIGPrefix+mig)] = resource.MustParse("1")
	case it.GPUCount > 0:
		// A JumpStart replica takes the whole instance's GPUs, as the
		// single-machine controller places it.
		spec.TensorParallel = it.GPUCount
		res[manifest.ResourceGPU] = *resource.NewQuantity(int64(it.GPUCount), resource.DecimalSI)
	}
	// The simulated engine's command line is the local runtime's, from the
	// same adapter (the capstan image's entrypoint is capstan).
	c.Args = engines.MustByName(engines.Sim).Args(engines.Launch{Spec: spec, Host: "0.0.0.0", Port: int(port.ContainerPort)})
	if len(res) > 0 {
		c.Resources = corev1.ResourceRequirements{Requests: res, Limits: maps.Clone(res)}
	}
	for _, e := range s.EnvironmentVariables {
		c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	pod.NodeSelector = map[string]string{LabelInstanceType: s.Server.InstanceType}
	return nil
}

// buildHPA compiles autoScalingSpec to an autoscaling/v2 HPA. It scales the
// manifest itself through its scale subresource (not the Deployment), so
// the HPA, `kubectl scale` and edits of spec.replicas all go through
// spec.replicas and the operator stays the Deployment's only writer. An HPA
// cannot scale to zero: minReplicaCount 0 becomes 1 here (KEDA's job).
func buildHPA(kind string, m *manifest.ObjectMeta, a *manifest.AutoScalingSpec) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	minR := max(1, deref(a.MinReplicaCount, manifest.DefaultMinReplicaCount))
	maxR := max(minR, deref(a.MaxReplicaCount, manifest.DefaultMaxReplicaCount))
	down := deref(a.ScaleDownStabilizationTime, manifest.DefaultScaleDownStabilization)
	up := deref(a.ScaleUpStabilizationTime, manifest.DefaultScaleUpStabilization)
	metrics, err := hpaMetrics(m.Name, a)
	if err != nil {
		return nil, err
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: objectLabels(kind, m.Name)},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiv1.GroupVersion.String(), Kind: kind, Name: m.Name},
			MinReplicas:    &minR,
			MaxReplicas:    maxR,
			Metrics:        metrics,
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &down},
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &up},
			},
		},
	}, nil
}

// hpaMetrics turns the triggers into External metrics of the same names
// (the list wins over the single trigger, as in the reference); a metrics
// adapter serving them is the cluster's part. No trigger leaves the HPA's
// own default (CPU utilisation).
func hpaMetrics(name string, a *manifest.AutoScalingSpec) ([]autoscalingv2.MetricSpec, error) {
	type trig struct {
		name, metricType string
		target           *float64
	}
	var ts []trig
	for i, t := range a.CloudWatchTriggers() {
		ts = append(ts, trig{manifest.TriggerName(t.Name, name, "cloudwatch", i), t.MetricType, t.TargetValue})
	}
	for i, t := range a.PrometheusTriggers() {
		ts = append(ts, trig{manifest.TriggerName(t.Name, name, "prometheus", i), t.MetricType, t.TargetValue})
	}
	var out []autoscalingv2.MetricSpec
	for _, t := range ts {
		if t.target == nil {
			continue
		}
		q, err := resource.ParseQuantity(strconv.FormatFloat(*t.target, 'f', -1, 64))
		if err != nil {
			return nil, fmt.Errorf("operator: trigger %s targetValue: %w", t.name, err)
		}
		target := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}
		if t.metricType == manifest.MetricTypeValue {
			target = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}
		}
		out = append(out, autoscalingv2.MetricSpec{
			Type:     autoscalingv2.ExternalMetricSourceType,
			External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: t.name}, Target: target},
		})
	}
	return out, nil
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
