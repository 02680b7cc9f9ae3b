package operator_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/operator"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// TestEndToEnd adds kube-controller-manager (Deployments, ReplicaSets,
// garbage collection, service accounts), kube-scheduler and kwok (which
// plays the kubelet of fake GPU nodes) to the control plane: pods of the
// published manifests are scheduled onto the nodes of their instance type
// with their MIG slices, kwok runs them, `kubectl get jsm,iec` shows
// DeploymentComplete, scaling adds pods, restarting the operator writes
// nothing, and kubectl delete removes everything the operator made.
func TestEndToEnd(t *testing.T) {
	e := startEnv(t)
	for _, b := range []string{"kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(e.bin, b)); err != nil {
			t.Fatalf("%s missing (run test/k8s/binaries.sh): %v", b, err)
		}
	}
	e.run(t, "kube-controller-manager", "--kubeconfig", e.kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,serviceaccount-controller,node-lifecycle-controller",
		"--concurrent-deployment-syncs=2", "--concurrent-replicaset-syncs=2")
	e.run(t, "kube-scheduler", "--kubeconfig", e.kubeconfig, "--leader-elect=false", "--secure-port=0")
	e.run(t, "kwok", "--kubeconfig", e.kubeconfig, "--config", filepath.Join(e.bin, "kwok-stages.yaml"), "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--server-address=127.0.0.1:0",
		// Fake pods get loopback addresses; nothing dials them.
		"--cidr=127.240.0.1/16", "--node-ip=127.0.0.1")
	ctx := context.Background()
	nodes := []struct {
		name, instanceType string
		extra              corev1.ResourceList
	}{
		{"p4d-0", "ml.p4d.24xlarge", corev1.ResourceList{"nvidia.com/mig-7g.40gb": resource.MustParse("8")}},
		{"p5en-0", "ml.p5en.48xlarge", corev1.ResourceList{"nvidia.com/mig-4g.71gb": resource.MustParse("8")}},
		{"g5-0", "ml.g5.24xlarge", corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}},
	}
	for _, n := range nodes {
		alloc := corev1.ResourceList{"cpu": resource.MustParse("96"), "memory": resource.MustParse("1000Gi"), "pods": resource.MustParse("110")}
		for k, v := range n.extra {
			alloc[k] = v
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{operator.LabelInstanceType: n.instanceType, "kubernetes.io/hostname": n.name, "type": "kwok"}},
			Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc},
		}
		if err := e.client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
	}

	e.mustKubectl(t, "apply", "-f", jsmExample)
	e.mustKubectl(t, "apply", "-f", iecMIGExample)
	e.waitRunning(t, "deepseek", "jsm", "p4d-0", 1)
	e.waitRunning(t, "qwen-mig", "iec", "p5en-0", 1)
	eventually(t, "kubectl get jsm,iec shows DeploymentComplete", func() error {
		out, _, err := e.kubectl("get", "jsm,iec", "--no-headers")
		if err != nil {
			return err
		}
		if strings.Count(out, "DeploymentComplete") != 2 {
			return errorf("%s", out)
		}
		return nil
	})
	t.Log("kubectl get jsm,iec:\n" + e.mustKubectl(t, "get", "jsm,iec"))

	e.mustKubectl(t, "scale", "iec/qwen-mig", "--replicas=2")
	e.waitRunning(t, "qwen-mig", "iec", "p5en-0", 2)
	eventually(t, "qwen-mig DeploymentComplete at 2", func() error {
		out, _, err := e.kubectl("get", "iec", "qwen-mig", "-o", "jsonpath={.status.state} {.status.readyReplicas}")
		if err != nil || out != "DeploymentComplete 2" {
			return errorf("%q %v", out, err)
		}
		return nil
	})

	// Restarting the operator changes nothing: no child or status is
	// written again.
	before := e.versions(t)
	e.stopOperator()
	e.stopOperator = startOperator(t, e.cfg, e.webhook)
	// A new object after the restart: once its Deployment exists, the new
	// operator has been through its initial list of the old ones.
	src, err := os.ReadFile(iecMIGExample)
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(t.TempDir(), "probe.yaml")
	if err := os.WriteFile(probe, []byte(strings.ReplaceAll(string(src), "name: qwen-mig", "name: probe")), 0o600); err != nil {
		t.Fatal(err)
	}
	e.mustKubectl(t, "apply", "-f", probe)
	e.deployment(t, "default", "probe")
	after := e.versions(t)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s was written by the restarted operator (resourceVersion %s → %s)", k, v, after[k])
		}
	}

	e.mustKubectl(t, "delete", "-f", jsmExample, "-f", iecMIGExample, "-f", probe, "--wait=true")
	eventually(t, "garbage collection of the children", func() error {
		var ds appsv1.DeploymentList
		var ps corev1.PodList
		var ss corev1.ServiceList
		if err := e.client.List(ctx, &ds, client.InNamespace("default")); err != nil {
			return err
		}
		if err := e.client.List(ctx, &ps, client.InNamespace("default")); err != nil {
			return err
		}
		if err := e.client.List(ctx, &ss, client.InNamespace("default"), client.HasLabels{apiv1.LabelName}); err != nil {
			return err
		}
		if len(ds.Items)+len(ps.Items)+len(ss.Items) != 0 {
			return errorf("%d deployments, %d pods, %d services left", len(ds.Items), len(ps.Items), len(ss.Items))
		}
		return nil
	})
}

// run starts a control-plane binary for the rest of the test, its output in
// the test log on failure.
func (e *env) run(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	path := name
	if !filepath.IsAbs(name) {
		path = filepath.Join(e.bin, name)
	}
	name = filepath.Base(name)
	cmd := exec.Command(path, args...)
	log, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (tail):\n%s", name, b)
		}
	})
	return cmd
}

// waitRunning waits for n running pods of a manifest, all on node.
func (e *env) waitRunning(t *testing.T, name, kind, node string, n int) {
	t.Helper()
	eventually(t, "pods of "+name+" running on "+node, func() error {
		var ps corev1.PodList
		if err := e.client.List(context.Background(), &ps, client.InNamespace("default"),
			client.MatchingLabels(apiv1.SelectorLabels(map[string]string{"jsm": "JumpStartModel", "iec": "InferenceEndpointConfig"}[kind], name))); err != nil {
			return err
		}
		running, states := 0, []string{}
		for _, p := range ps.Items {
			st := p.Name + " " + string(p.Status.Phase) + " on " + p.Spec.NodeName
			for _, c := range p.Status.Conditions {
				if c.Status != corev1.ConditionTrue {
					st += " " + string(c.Type) + ": " + c.Message
				}
			}
			states = append(states, st)
			if p.Spec.NodeName != "" && p.Spec.NodeName != node {
				t.Fatalf("pod %s scheduled on %s, want %s", p.Name, p.Spec.NodeName, node)
			}
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node {
				running++
			}
		}
		if running != n {
			return errorf("%d of %d pods running: %v", running, n, states)
		}
		return nil
	})
}

// versions maps kind/name to resourceVersion for everything in default.
func (e *env) versions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	lists := []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}}
	for _, l := range lists {
		if err := e.client.List(context.Background(), l, client.InNamespace("default"), client.HasLabels{apiv1.LabelName}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range lists[0].(*appsv1.DeploymentList).Items {
		out["Deployment/"+d.Name] = d.ResourceVersion
	}
	for _, s := range lists[1].(*corev1.ServiceList).Items {
		out["Service/"+s.Name] = s.ResourceVersion
	}
	for _, k := range []string{"jsm/deepseek", "iec/qwen-mig"} {
		rv := e.mustKubectl(t, "get", k, "-o", "jsonpath={.metadata.resourceVersion}")
		out[k] = rv
	}
	return out
}
