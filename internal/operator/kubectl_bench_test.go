package operator_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkKubectl500 times the same kubectl commands against `capstan
// serve` and against the operator's kube-apiserver (etcd, the CRDs, the
// webhook and the operator in this process), in one run: `kubectl apply
// -f` of one file of N JumpStartModels (created), the same again
// (unchanged), and `kubectl get jsm -A` over them. The models ask for 0
// replicas, so neither side starts engines and the figures are the API's.
// N (CAPSTAN_KUBECTL_BENCH_N, default 500) bounds the work. Prints one
// RESULT line per command with both times and their ratio; bench/kubectl.sh
// runs it.
func BenchmarkKubectl500(b *testing.B) {
	n := 500
	if s := os.Getenv("CAPSTAN_KUBECTL_BENCH_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 1000 {
			b.Fatalf("CAPSTAN_KUBECTL_BENCH_N=%q: want 1..1000", s)
		}
		n = v
	}
	capstanBin := os.Getenv("CAPSTAN_BIN")
	if capstanBin == "" {
		b.Fatal("CAPSTAN_BIN is not set: bench/kubectl.sh builds capstan and sets it")
	}
	dir := b.TempDir()
	file := filepath.Join(dir, "models.yaml")
	var doc strings.Builder
	for i := range n {
		fmt.Fprintf(&doc, `---
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: model-%03d, namespace: default}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
  replicas: 0
`, i)
	}
	if err := os.WriteFile(file, []byte(doc.String()), 0o644); err != nil {
		b.Fatal(err)
	}

	e := startEnvWith(b, envOptions{inProcess: true})
	capstanConfig := startCapstanServe(b, capstanBin, dir)

	run := func(kubeconfig string, args ...string) time.Duration {
		start := time.Now()
		cmd := exec.Command(e.kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return time.Since(start)
	}
	type figure struct{ name, args string }
	figures := []figure{
		{"apply_created", "apply -f " + file},
		{"apply_unchanged", "apply -f " + file},
		{"get_all_namespaces", "get jsm -A"},
	}
	b.ResetTimer()
	for range b.N {
		for _, f := range figures {
			real := run(e.kubeconfig, strings.Fields(f.args)...)
			capstan := run(capstanConfig, strings.Fields(f.args)...)
			fmt.Printf("RESULT kubectl %s n=%d capstan_s=%.2f kube_apiserver_s=%.2f capstan_over_apiserver=%.2f\n",
				f.name, n, capstan.Seconds(), real.Seconds(), capstan.Seconds()/real.Seconds())
		}
	}
}

// startCapstanServe runs `capstan serve` on a free loopback port with its
// data under dir and returns a kubeconfig for it.
func startCapstanServe(b testing.TB, bin, dir string) string {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "capstan-data"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "capstan.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); _ = cmd.Wait(); log.Close() })
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "capstan serving on "); ok {
				url <- u
			}
		}
	}()
	var server string
	select {
	case server = <-url:
	case <-time.After(60 * time.Second):
		b.Fatal("capstan serve did not start within 60 s")
	}
	out, err := exec.Command(bin, "kubeconfig", "--server", server).Output()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "capstan.kubeconfig")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}
