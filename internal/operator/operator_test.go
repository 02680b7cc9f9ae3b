package operator_test

import (
	"context"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/operator"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// The published manifests, verbatim (../shared/reference/examples.md; the
// manifest package's tests hold the same files).
const (
	jsmExample     = "../manifest/testdata/examples-jsm-mig.yaml"
	iecMIGExample  = "../manifest/testdata/examples-iec-mig.yaml"
	iecDemoExample = "../manifest/testdata/examples-iec-kv-routing.yaml"
)

// TestOperator drives the operator on a real kube-apiserver with kubectl:
// apply the published JumpStartModel and MIG InferenceEndpointConfig, check
// what they became, scale, mirror status, refuse an invalid MIG profile,
// delete. It runs no kube-controller-manager, so garbage collection and
// Deployment status are not exercised here: owner references are asserted
// instead, and the Deployment's status is written by the test.
func TestOperator(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()

	t.Run("JumpStartModel on a MIG slice", func(t *testing.T) {
		e.mustKubectl(t, "apply", "-f", jsmExample)
		d := e.deployment(t, "default", "deepseek")
		c := d.Spec.Template.Spec.Containers[0]
		mig := corev1.ResourceName("nvidia.com/mig-7g.40gb")
		assertQuantity(t, "requests", c.Resources.Requests, mig, "1")
		assertQuantity(t, "limits", c.Resources.Limits, mig, "1")
		if _, ok := c.Resources.Limits["nvidia.com/gpu"]; ok {
			t.Errorf("a MIG replica must not ask for whole GPUs: %v", c.Resources.Limits)
		}
		if got := d.Spec.Template.Spec.NodeSelector[operator.LabelInstanceType]; got != "ml.p4d.24xlarge" {
			t.Errorf("nodeSelector = %v, want instance type ml.p4d.24xlarge", d.Spec.Template.Spec.NodeSelector)
		}
		if c.Image != "capstan:test" || !strings.Contains(strings.Join(c.Args, " "), "--model deepseek-llm-r1-distill-qwen-1-5b") || !strings.Contains(strings.Join(c.Args, " "), "--mig-profile 7g.40gb") {
			t.Errorf("container = %s %v, want the model image running the JumpStart model on its MIG slice", c.Image, c.Args)
		}
		assertOwned(t, d.OwnerReferences, "JumpStartModel", "deepseek")
		svc := e.service(t, "default", "deepseek")
		assertOwned(t, svc.OwnerReferences, "JumpStartModel", "deepseek")
		if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Port != operator.JumpStartPort {
			t.Errorf("service ports = %+v", svc.Spec.Ports)
		}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "deepseek"}, &autoscalingv2.HorizontalPodAutoscaler{}); err == nil {
			t.Error("an HPA was made for a manifest without autoScalingSpec")
		}
	})

	t.Run("InferenceEndpointConfig on a MIG slice", func(t *testing.T) {
		e.mustKubectl(t, "apply", "-f", iecMIGExample)
		d := e.deployment(t, "default", "qwen-mig")
		c := d.Spec.Template.Spec.Containers[0]
		assertQuantity(t, "requests", c.Resources.Requests, "nvidia.com/mig-4g.71gb", "1")
		assertQuantity(t, "limits", c.Resources.Limits, "nvidia.com/mig-4g.71gb", "1")
		assertQuantity(t, "requests", c.Resources.Requests, corev1.ResourceCPU, "5600m")
		assertQuantity(t, "requests", c.Resources.Requests, corev1.ResourceMemory, "10Gi")
		if c.Image != "lmcache/vllm-openai:latest" {
			t.Errorf("image = %q", c.Image)
		}
		if got := d.Spec.Template.Spec.NodeSelector[operator.LabelInstanceType]; got != "ml.p5en.48xlarge" {
			t.Errorf("nodeSelector = %v", d.Spec.Template.Spec.NodeSelector)
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "model-weights" || c.VolumeMounts[0].MountPath != "/opt/ml/model" {
			t.Errorf("volume mounts = %+v", c.VolumeMounts)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("replicas = %v, want 1", d.Spec.Replicas)
		}
		assertOwned(t, d.OwnerReferences, "InferenceEndpointConfig", "qwen-mig")
		svc := e.service(t, "default", "qwen-mig")
		assertOwned(t, svc.OwnerReferences, "InferenceEndpointConfig", "qwen-mig")
		ports := map[string]int32{}
		for _, p := range svc.Spec.Ports {
			ports[p.Name] = p.Port
		}
		if ports["http"] != 8000 || ports["metrics"] != manifest.DefaultMetricsPort {
			t.Errorf("service ports = %v, want http 8000 and metrics 8080", ports)
		}
	})

	t.Run("autoScalingSpec becomes an HPA on the scale subresource", func(t *testing.T) {
		e.mustKubectl(t, "apply", "-f", iecDemoExample)
		var hpa autoscalingv2.HorizontalPodAutoscaler
		eventually(t, "HPA demo", func() error {
			return e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, &hpa)
		})
		ref := hpa.Spec.ScaleTargetRef
		if ref.Kind != "InferenceEndpointConfig" || ref.Name != "demo" || ref.APIVersion != apiv1.GroupVersion.String() {
			t.Errorf("scaleTargetRef = %+v", ref)
		}
		// minReplicaCount 0 needs KEDA; an HPA floors at 1.
		if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 1 || hpa.Spec.MaxReplicas != 4 {
			t.Errorf("min/max = %v/%d, want 1/4", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
		}
		if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].External == nil || hpa.Spec.Metrics[0].External.Target.AverageValue.Cmp(resource.MustParse("4")) != 0 {
			t.Errorf("metrics = %+v, want one external metric with average value 4", hpa.Spec.Metrics)
		}
		assertOwned(t, hpa.OwnerReferences, "InferenceEndpointConfig", "demo")
	})

	t.Run("kvCacheSpec and intelligentRoutingSpec become vLLM flags and LMCache env", func(t *testing.T) {
		e.mustKubectl(t, "apply", "-f", iecDemoExample)
		d := &appsv1.Deployment{}
		eventually(t, "Deployment demo", func() error {
			return e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, d)
		})
		c := d.Spec.Template.Spec.Containers[0]
		args := strings.Join(c.Args, " ")
		for _, want := range []string{`--kv-transfer-config={"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`, "--enable-prefix-caching"} {
			if !strings.Contains(args, want) {
				t.Errorf("args %q lack %s", args, want)
			}
		}
		// The example routes prefixaware: the router hashes prompts, so no
		// engine publishes KV events.
		if strings.Contains(args, "--kv-events-config") {
			t.Errorf("args %q publish KV events for a prefixaware router", args)
		}
		env := map[string]string{}
		for _, ev := range c.Env {
			env[ev.Name] = ev.Value
		}
		if env["LMCACHE_REMOTE_URL"] != "redis://127.0.0.1:6379" || env["LMCACHE_LOCAL_CPU"] != "True" {
			t.Errorf("env = %v, want LMCache's remote URL and CPU tier", env)
		}
	})

	t.Run("a replica change scales the Deployment", func(t *testing.T) {
		e.mustKubectl(t, "scale", "inferenceendpointconfig/qwen-mig", "--replicas=3")
		eventually(t, "Deployment qwen-mig at 3 replicas", func() error {
			d := &appsv1.Deployment{}
			if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "qwen-mig"}, d); err != nil {
				return err
			}
			if *d.Spec.Replicas != 3 {
				return errorf("replicas %d", *d.Spec.Replicas)
			}
			return nil
		})
	})

	t.Run("a spec change rolls the Deployment; immutable fields are refused", func(t *testing.T) {
		e.mustKubectl(t, "patch", "iec/qwen-mig", "--type=merge", "-p", `{"spec":{"worker":{"image":"lmcache/vllm-openai:v0.3.9"}}}`)
		eventually(t, "the new image in the Deployment", func() error {
			d := &appsv1.Deployment{}
			if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "qwen-mig"}, d); err != nil {
				return err
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != "lmcache/vllm-openai:v0.3.9" {
				return errorf("image %s", img)
			}
			return nil
		})
		// capstan apply's ValidateUpdate, through the webhook.
		_, stderr, err := e.kubectl("patch", "iec/qwen-mig", "--type=merge", "-p", `{"spec":{"worker":{"environmentVariables":[{"name":"X","value":"1"}]}}}`)
		if err == nil || !strings.Contains(stderr, "spec.worker.environmentVariables: cannot be updated") {
			t.Errorf("changing the worker's environment: err %v\n%s", err, stderr)
		}
	})

	t.Run("removing autoScalingSpec removes the HPA", func(t *testing.T) {
		e.mustKubectl(t, "patch", "iec/demo", "--type=merge", "-p", `{"spec":{"autoScalingSpec":null}}`)
		eventually(t, "HPA demo gone", func() error {
			err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, &autoscalingv2.HorizontalPodAutoscaler{})
			if err == nil {
				return errorf("still there")
			}
			return client.IgnoreNotFound(err)
		})
	})

	t.Run("status mirrors the Deployment", func(t *testing.T) {
		iec := &apiv1.InferenceEndpointConfig{}
		key := client.ObjectKey{Namespace: "default", Name: "qwen-mig"}
		eventually(t, "state DeploymentInProgress", func() error {
			if err := e.client.Get(ctx, key, iec); err != nil {
				return err
			}
			if iec.Status.State != manifest.StateDeploymentInProgress || iec.Status.Selector == "" {
				return errorf("status %+v", iec.Status)
			}
			return nil
		})
		// No kube-controller-manager runs here: play its part.
		d := e.deployment(t, "default", "qwen-mig")
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
		if err := e.client.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, "state DeploymentComplete", func() error {
			if err := e.client.Get(ctx, key, iec); err != nil {
				return err
			}
			if iec.Status.State != manifest.StateDeploymentComplete || iec.Status.Replicas != 3 || iec.Status.ReadyReplicas != 3 {
				return errorf("status %+v", iec.Status)
			}
			return nil
		})
		out := e.mustKubectl(t, "get", "jsm,iec")
		if !strings.Contains(out, "DeploymentComplete") || !strings.Contains(out, "deepseek") {
			t.Errorf("kubectl get jsm,iec:\n%s", out)
		}
	})

	for _, tc := range []struct {
		name, file, from, to, path string
		kind                       client.Object
	}{
		// 3g.20gb is an A100-40GB profile; ml.p5en.48xlarge has H200s.
		{"InferenceEndpointConfig", iecMIGExample, "mig-4g.71gb", "mig-3g.20gb", "spec.worker.resources.requests[nvidia.com/mig-3g.20gb]", &apiv1.InferenceEndpointConfig{}},
		// 4g.71gb is an H200 profile; ml.p4d.24xlarge has A100-40GBs.
		{"JumpStartModel", jsmExample, "mig-7g.40gb", "mig-4g.71gb", "spec.server.acceleratorPartitionType", &apiv1.JumpStartModel{}},
	} {
		t.Run("the wrong MIG profile is refused with the field path/"+tc.name, func(t *testing.T) {
			src, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			bad := strings.ReplaceAll(string(src), tc.from, tc.to)
			bad = strings.Replace(bad, "  name: ", "  name: wrong-", 1)
			_, want := manifest.Load([]byte(bad))
			fes := manifest.FieldErrors(want)
			if len(fes) == 0 {
				t.Fatal("capstan apply's validation accepts the wrong profile; the test premise is broken")
			}
			f := t.TempDir() + "/bad.yaml"
			if err := os.WriteFile(f, []byte(bad), 0o600); err != nil {
				t.Fatal(err)
			}
			_, stderr, err := e.kubectl("apply", "-f", f)
			if err == nil {
				t.Fatal("kubectl apply accepted the wrong MIG profile")
			}
			t.Logf("kubectl apply: %s", stderr)
			for _, fe := range fes {
				if !strings.Contains(stderr, fe.Error()) {
					t.Errorf("kubectl's error lacks capstan apply's %q:\n%s", fe.Error(), stderr)
				}
			}
			if !strings.Contains(stderr, tc.path+": ") {
				t.Errorf("no field path %s in:\n%s", tc.path, stderr)
			}
			var name string
			for l := range strings.Lines(bad) {
				if n, ok := strings.CutPrefix(strings.TrimSpace(l), "name: wrong-"); ok {
					name = "wrong-" + n
					break
				}
			}
			if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, tc.kind); err == nil || client.IgnoreNotFound(err) != nil {
				t.Errorf("the refused object %s: get = %v, want not found", name, err)
			}
		})
	}

	t.Run("the operator leaves objects it does not own alone", func(t *testing.T) {
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "default"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}}},
		}
		if err := e.client.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		bad, err := os.ReadFile(iecMIGExample)
		if err != nil {
			t.Fatal(err)
		}
		f := t.TempDir() + "/taken.yaml"
		if err := os.WriteFile(f, []byte(strings.ReplaceAll(string(bad), "name: qwen-mig", "name: taken")), 0o600); err != nil {
			t.Fatal(err)
		}
		e.mustKubectl(t, "apply", "-f", f)
		iec := &apiv1.InferenceEndpointConfig{}
		eventually(t, "NameConflict", func() error {
			if err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "taken"}, iec); err != nil {
				return err
			}
			if iec.Status.State != manifest.StateDeploymentFailed || iec.Status.DeploymentStatus == nil || iec.Status.DeploymentStatus.Reason != operator.ReasonNameConflict {
				return errorf("status %+v", iec.Status)
			}
			return nil
		})
		got := &corev1.Service{}
		if err := e.client.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil {
			t.Fatal(err)
		}
		if len(got.OwnerReferences) != 0 || len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 1 {
			t.Errorf("the foreign Service was changed: %+v", got)
		}
	})

	t.Run("kubectl delete", func(t *testing.T) {
		e.mustKubectl(t, "delete", "-f", jsmExample)
		eventually(t, "JumpStartModel deepseek gone", func() error {
			err := e.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "deepseek"}, &apiv1.JumpStartModel{})
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			if err == nil {
				return errorf("still there")
			}
			return nil
		})
		// Without kube-controller-manager's garbage collector the children
		// stay; their controller owner reference (checked above) is what
		// the collector deletes them by.
	})
}

func (e *env) deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	eventually(t, "Deployment "+name, func() error {
		return e.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)
	})
	return d
}

func (e *env) service(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	s := &corev1.Service{}
	eventually(t, "Service "+name, func() error {
		return e.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
	})
	return s
}

func assertQuantity(t *testing.T, side string, l corev1.ResourceList, name corev1.ResourceName, want string) {
	t.Helper()
	got, ok := l[name]
	if !ok || got.Cmp(resource.MustParse(want)) != 0 {
		t.Errorf("%s[%s] = %v (set: %t), want %s", side, name, got.String(), ok, want)
	}
}

func assertOwned(t *testing.T, refs []metav1.OwnerReference, kind, name string) {
	t.Helper()
	for _, r := range refs {
		if r.Kind == kind && r.Name == name && r.APIVersion == apiv1.GroupVersion.String() && r.Controller != nil && *r.Controller &&
			r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			return
		}
	}
	t.Errorf("owner references %+v lack the controller %s/%s", refs, kind, name)
}
