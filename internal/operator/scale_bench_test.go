package operator_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/operator"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// BenchmarkSteadyState500 measures the bar: 500 resources created
// at once (half JumpStartModels on A100 MIG slices, half MIG
// InferenceEndpointConfigs on H200 slices) reach DeploymentComplete, with
// their pods scheduled onto kwok nodes, within 60 s, and the operator (the
// real `capstan operator` binary, webhook included, in its own process)
// uses at most 0.5 CPU on average meanwhile. It reports both as metrics:
//
//	go test -run '^$' -bench SteadyState500 -benchtime 1x ./internal/operator/
//
// (bench/operator.sh runs it and prints RESULT lines; CAPSTAN_BIN names a
// built capstan, else one is built.) N changes the count via
// CAPSTAN_OPERATOR_BENCH_N.
func BenchmarkSteadyState500(b *testing.B) {
	n := 500
	if v := os.Getenv("CAPSTAN_OPERATOR_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			b.Fatalf("CAPSTAN_OPERATOR_BENCH_N=%q", v)
		}
	}
	e := startEnvWith(b, envOptions{})
	bin := capstanBinary(b)
	e.run(b, "kube-controller-manager", "--kubeconfig", e.kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,serviceaccount-controller,node-lifecycle-controller",
		"--kube-api-qps=200", "--kube-api-burst=400")
	e.run(b, "kube-scheduler", "--kubeconfig", e.kubeconfig, "--leader-elect=false", "--secure-port=0", "--kube-api-qps=200", "--kube-api-burst=400")
	e.run(b, "kwok", "--kubeconfig", e.kubeconfig, "--config", filepath.Join(e.bin, "kwok-stages.yaml"), "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--server-address=127.0.0.1:0",
		// Fake pods get loopback addresses; nothing dials them.
		"--cidr=127.240.0.1/16", "--node-ip=127.0.0.1")
	ctx := context.Background()
	// Eight slices per node, as an 8-GPU instance cut into one slice per GPU.
	perNode := 8
	for i := range (n/2 + perNode - 1) / perNode {
		for _, nd := range []struct{ prefix, it, res string }{
			{"p4d", "ml.p4d.24xlarge", "nvidia.com/mig-7g.40gb"},
			{"p5en", "ml.p5en.48xlarge", "nvidia.com/mig-4g.71gb"},
		} {
			alloc := corev1.ResourceList{"cpu": resource.MustParse("192"), "memory": resource.MustParse("2000Gi"), "pods": resource.MustParse("110"),
				corev1.ResourceName(nd.res): *resource.NewQuantity(int64(perNode), resource.DecimalSI)}
			name := fmt.Sprintf("%s-%d", nd.prefix, i)
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
					Labels: map[string]string{operator.LabelInstanceType: nd.it, "kubernetes.io/hostname": name}},
				Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc},
			}
			if err := e.client.Create(ctx, node); err != nil {
				b.Fatal(err)
			}
		}
	}
	op := e.run(b, bin, "operator", "--kubeconfig", e.kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-host", e.webhook.LocalServingHost, "--webhook-port", strconv.Itoa(e.webhook.LocalServingPort),
		"--webhook-cert-dir", e.webhook.LocalServingCertDir, "--model-image=capstan:bench", "--log-level=warn")
	objs := benchObjects(b, n)
	// The operator is up once its webhook admits the first object.
	eventually(b, "the operator's webhook serves", func() error { return e.client.Create(ctx, objs[0]) })

	cpu0 := cpuSeconds(b, op.Process.Pid)
	b.ResetTimer()
	start := time.Now()
	work := make(chan client.Object)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for o := range work {
				if err := e.client.Create(ctx, o); err != nil {
					b.Errorf("create %s: %v", o.GetName(), err)
				}
			}
		})
	}
	for _, o := range objs[1:] {
		work <- o
	}
	close(work)
	wg.Wait()
	applied := time.Since(start)
	testutil.EventuallyErr(b, 5*time.Minute, fmt.Sprintf("%d resources DeploymentComplete", n), func() error {
		done := 0
		var iecs apiv1.InferenceEndpointConfigList
		var jsms apiv1.JumpStartModelList
		if err := e.client.List(ctx, &iecs); err != nil {
			return err
		}
		if err := e.client.List(ctx, &jsms); err != nil {
			return err
		}
		for _, o := range iecs.Items {
			if o.Status.State == manifest.StateDeploymentComplete {
				done++
			}
		}
		for _, o := range jsms.Items {
			if o.Status.State == manifest.StateDeploymentComplete {
				done++
			}
		}
		if done != n {
			return errorf("%d of %d complete", done, n)
		}
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuSeconds(b, op.Process.Pid) - cpu0
	b.ReportMetric(elapsed.Seconds(), "s-to-steady")
	b.ReportMetric(applied.Seconds(), "s-to-create")
	b.ReportMetric(cpu/elapsed.Seconds(), "operator-cpu")
	b.ReportMetric(float64(n), "resources")
	fmt.Printf("RESULT operator_steady_state resources=%d create_s=%.1f steady_s=%.1f operator_cpu_avg=%.3f operator_cpu_s=%.1f\n",
		n, applied.Seconds(), elapsed.Seconds(), cpu/elapsed.Seconds(), cpu)
	if elapsed > 60*time.Second || cpu/elapsed.Seconds() > 0.5 {
		b.Errorf("steady state after %s with %.2f CPU on average; the bar is 60 s and 0.5 CPU", elapsed.Round(time.Second), cpu/elapsed.Seconds())
	}
}

// benchObjects makes n manifests, alternating the two published MIG
// examples under numbered names.
func benchObjects(b *testing.B, n int) []client.Object {
	b.Helper()
	jsm := loadAPI(b, jsmExample)
	iec := loadAPI(b, iecMIGExample)
	out := make([]client.Object, 0, n)
	for i := range n {
		var o client.Object
		if i%2 == 0 {
			c := jsm.(*apiv1.JumpStartModel).DeepCopy()
			c.Name, c.Namespace = fmt.Sprintf("jsm-%d", i), "default"
			c.Spec.SageMakerEndpoint = nil
			o = c
		} else {
			c := iec.(*apiv1.InferenceEndpointConfig).DeepCopy()
			c.Name = fmt.Sprintf("iec-%d", i)
			o = c
		}
		out = append(out, o)
	}
	return out
}

func loadAPI(b *testing.B, file string) client.Object {
	b.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	objs, err := manifest.Decode(src)
	if err != nil {
		b.Fatal(err)
	}
	switch m := objs[0].(type) {
	case *manifest.JumpStartModel:
		return &apiv1.JumpStartModel{TypeMeta: metav1.TypeMeta{APIVersion: manifest.APIVersion, Kind: m.Kind}, ObjectMeta: metav1.ObjectMeta{Name: m.Metadata.Name, Namespace: m.Metadata.Namespace}, Spec: m.Spec}
	case *manifest.InferenceEndpointConfig:
		return &apiv1.InferenceEndpointConfig{TypeMeta: metav1.TypeMeta{APIVersion: manifest.APIVersion, Kind: m.Kind}, ObjectMeta: metav1.ObjectMeta{Name: m.Metadata.Name, Namespace: m.Metadata.Namespace}, Spec: m.Spec}
	}
	b.Fatalf("%s: unexpected %T", file, objs[0])
	return nil
}

// capstanBinary is $CAPSTAN_BIN or a fresh build of ./cmd/capstan.
func capstanBinary(b testing.TB) string {
	b.Helper()
	if p := os.Getenv("CAPSTAN_BIN"); p != "" {
		return p
	}
	out := filepath.Join(b.TempDir(), "capstan")
	cmd := exec.Command("go", "build", "-o", out, "../../cmd/capstan")
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/capstan: %v\n%s", err, o)
	}
	return out
}

// cpuSeconds is the user+system CPU time of a process, from /proc.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line, in clock ticks (100 per second
	// on Linux).
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}
