package operator

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

func load(t *testing.T, y string) manifest.Object {
	t.Helper()
	objs, err := manifest.Load([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return objs[0]
}

const iecBase = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: m}
spec:
  modelName: m
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: b, region: us-east-1}}
  worker:
    image: img
    args: [--port, "8000"]
    environmentVariables: [{name: A, value: "1"}, {name: S, valueFrom: {secretKeyRef: {name: s, key: k}}}]
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: w}
    resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}
`

func TestBuild(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, d *Desired)
	}{
		{
			name: "instanceTypes become a required In with preferences in order",
			yaml: iecBase + "  instanceTypes: [ml.g5.12xlarge, ml.g5.24xlarge]\n",
			check: func(t *testing.T, d *Desired) {
				na := d.Deployment.Spec.Template.Spec.Affinity.NodeAffinity
				req := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
				if req.Key != LabelInstanceType || strings.Join(req.Values, ",") != "ml.g5.12xlarge,ml.g5.24xlarge" {
					t.Errorf("required = %+v", req)
				}
				p := na.PreferredDuringSchedulingIgnoredDuringExecution
				if len(p) != 2 || p[0].Weight <= p[1].Weight || p[0].Preference.MatchExpressions[0].Values[0] != "ml.g5.12xlarge" {
					t.Errorf("preferred = %+v", p)
				}
			},
		},
		{
			name: "env, valueFrom, default mount, GPU toleration, default readiness probe",
			yaml: iecBase + "  instanceType: ml.g5.12xlarge\n  loadBalancer: {healthCheckPath: /health}\n",
			check: func(t *testing.T, d *Desired) {
				ps := d.Deployment.Spec.Template.Spec
				c := ps.Containers[0]
				if len(c.Env) != 2 || c.Env[0].Value != "1" || c.Env[1].ValueFrom == nil || c.Env[1].ValueFrom.SecretKeyRef.Key != "k" {
					t.Errorf("env = %+v", c.Env)
				}
				if c.VolumeMounts[0].MountPath != manifest.DefaultModelMountPath || ps.Volumes[0].Name != "w" || ps.Volumes[0].EmptyDir == nil {
					t.Errorf("mount %+v volumes %+v", c.VolumeMounts, ps.Volumes)
				}
				if len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != manifest.ResourceGPU {
					t.Errorf("tolerations = %+v", ps.Tolerations)
				}
				if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/health" || c.ReadinessProbe.HTTPGet.Port.StrVal != "http" {
					t.Errorf("readiness = %+v", c.ReadinessProbe)
				}
				if *d.Deployment.Spec.ProgressDeadlineSeconds != manifest.DefaultMaxDeployTimeSeconds {
					t.Errorf("progress deadline = %d", *d.Deployment.Spec.ProgressDeadlineSeconds)
				}
				if d.HPA != nil {
					t.Error("HPA without autoScalingSpec")
				}
			},
		},
		{
			name: "probes and volumes from the manifest are used as given",
			yaml: strings.Replace(iecBase, "{modelSourceType: s3, s3Storage: {bucketName: b, region: us-east-1}}", "{modelSourceType: kubernetesVolume}", 1) + `  instanceType: ml.g5.12xlarge
  kubernetes:
    volumes: [{name: w, hostPath: {path: /opt/dlami/nvme}}]
    serviceAccountName: sa
`,
			check: func(t *testing.T, d *Desired) {
				ps := d.Deployment.Spec.Template.Spec
				if len(ps.Volumes) != 1 || ps.Volumes[0].HostPath == nil || ps.Volumes[0].HostPath.Path != "/opt/dlami/nvme" || ps.ServiceAccountName != "sa" {
					t.Errorf("volumes %+v sa %q", ps.Volumes, ps.ServiceAccountName)
				}
			},
		},
		{
			name: "a CloudWatch Value trigger is an external Value target",
			yaml: iecBase + `  instanceType: ml.g5.12xlarge
  autoScalingSpec:
    minReplicaCount: 2
    maxReplicaCount: 6
    scaleDownStabilizationTime: 60
    cloudWatchTrigger: {name: inv, namespace: AWS/SageMaker, metricName: Invocations, targetValue: 10.5, metricType: Value}
`,
			check: func(t *testing.T, d *Desired) {
				h := d.HPA
				if h == nil {
					t.Fatal("no HPA")
				}
				if *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 6 || *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 60 {
					t.Errorf("spec = %+v", h.Spec)
				}
				m := h.Spec.Metrics[0].External
				if m.Metric.Name != "inv" || m.Target.Type != autoscalingv2.ValueMetricType || m.Target.Value.String() != "10500m" {
					t.Errorf("metric = %+v", m)
				}
			},
		},
		{
			name: "a JumpStartModel without MIG takes every GPU of the instance",
			yaml: `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: j}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.12xlarge}
  environmentVariables: [{name: X, value: "y"}]
`,
			check: func(t *testing.T, d *Desired) {
				c := d.Deployment.Spec.Template.Spec.Containers[0]
				if q := c.Resources.Limits[manifest.ResourceGPU]; q.Value() != 4 {
					t.Errorf("gpu limit = %v, want 4", q.String())
				}
				if !strings.Contains(strings.Join(c.Args, " "), "--tensor-parallel 4") || c.Env[0].Name != "X" {
					t.Errorf("args %v env %v", c.Args, c.Env)
				}
				if d.Deployment.Labels[apiv1.LabelKind] != "jsm" || d.Service.Spec.Selector[apiv1.LabelKind] != "jsm" {
					t.Errorf("labels %v", d.Deployment.Labels)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Build(load(t, tc.yaml), BuildOptions{ModelImage: "capstan:test"})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
		})
	}
}

func TestStatusFor(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dep := func(gen, observed int64, replicas, ready int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Name, d.Generation = "x", gen
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready, Conditions: conds}
		return d
	}
	tests := []struct {
		name   string
		o      observed
		state  manifest.State
		reason string
	}{
		{"no deployment yet", observed{desired: 1}, manifest.StateDeploymentPending, manifest.ReasonDeploying},
		{"rolling", observed{desired: 2, deployment: dep(1, 1, 2, 1)}, manifest.StateDeploymentInProgress, manifest.ReasonDeploying},
		{"stale observation", observed{desired: 2, deployment: dep(2, 1, 2, 2)}, manifest.StateDeploymentInProgress, manifest.ReasonDeploying},
		{"complete", observed{desired: 2, deployment: dep(1, 1, 2, 2)}, manifest.StateDeploymentComplete, manifest.ReasonDeployed},
		{"scaled to zero", observed{desired: 0, deployment: dep(1, 1, 0, 0)}, manifest.StateDeploymentComplete, manifest.ReasonScaledToZero},
		{"deadline", observed{desired: 1, deployment: dep(1, 1, 1, 0, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"})}, manifest.StateDeploymentFailed, manifest.ReasonDeployTimeout},
		{"invalid", observed{failure: "spec.x: bad", failureReason: manifest.ReasonInvalidSpec}, manifest.StateDeploymentFailed, manifest.ReasonInvalidSpec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.selector = map[string]string{apiv1.LabelName: "x"}
			st := statusFor(manifest.Status{}, tc.o, now)
			if st.State != tc.state || st.DeploymentStatus.Reason != tc.reason {
				t.Errorf("state %s reason %s, want %s %s", st.State, st.DeploymentStatus.Reason, tc.state, tc.reason)
			}
			if st.Selector != apiv1.LabelName+"=x" {
				t.Errorf("selector %q", st.Selector)
			}
			// A second pass later with nothing changed keeps the times.
			again := statusFor(st, tc.o, now.Add(time.Minute))
			if !statusEqual(st, again) {
				t.Errorf("status changed without a change:\n%+v\n%+v", st, again)
			}
		})
	}
}
