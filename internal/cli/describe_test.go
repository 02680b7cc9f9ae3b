package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/manifest"
)

func TestDescribe(t *testing.T) {
	e := newCLIEnv(t)
	// filler takes 7 of the default cluster's 8 ml.g5.24xlarge GPUs, so
	// demo gets one of its two replicas placed and one pending: the
	// controller reports InsufficientCapacity and a FailedScheduling warning.
	filler := strings.NewReplacer("name: small", "name: filler", "replicas: 2", "replicas: 7").Replace(smallIEC)
	e.mustRun(t, filler, "apply", "-f", "-")
	e.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "filler")
	e.mustRun(t, exampleManifest(t, "examples-iec-kv-routing.yaml"), "apply", "-f", "-")
	e.clk.Step(time.Minute) // the controller acts a minute after the apply
	e.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "demo")
	e.clk.Step(time.Hour + 59*time.Minute)

	const noGPU = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu (want 1, most free 0)"
	out := squeeze(e.mustRun(t, "", "describe", "iec", "demo"))
	for _, want := range []string{
		"Name:                 demo\n",
		"Namespace:            default\n",
		"Kind:                 InferenceEndpointConfig\n",
		"Created:              2026-01-02T03:04:05Z (120m ago)\n",
		"Generation:           1 (observed 1)\n",
		"  Model:              Llama-3.1-8B-Instruct\n",
		"  Instance Type:      ml.g5.24xlarge\n",
		"  Model Source:       s3://models/llama-3.1-8b-instruct (us-east-1)\n",
		"  Resources:          requests cpu=6 memory=30Gi nvidia.com/gpu=1; limits nvidia.com/gpu=1\n",
		"  Invocation Path:    /v1/chat/completions\n",
		"  Autoscaling:        min 0, max 4, polling 15s, cooldown 60s",
		`    Trigger:          prometheus "sum(vllm:num_requests_waiting)" at http://127.0.0.1:9090 target 4 activation 1`,
		"  KV Cache:           L1 on, L2 redis\n",
		"  State:              DeploymentInProgress\n",
		"  Replicas:           1 current, 1 ready\n",
		"  Endpoint URL:       http://127.0.0.1:8080/v1/chat/completions\n",
		"  Deployment:         InsufficientCapacity: 1 replica(s) pending: " + noGPU + "\n",
		"  Ready         False    InsufficientCapacity   119m   1 replica(s) pending: " + noGPU + "\n",
		"  Normal    Applied            120m   manifest created\n",
		"  Normal    Started            119m   replica iec.default.demo.r1.0 started on node ",
		"  Warning   FailedScheduling   119m   replica iec.default.demo.r1.1: " + noGPU + "\n",
	} {
		if !strings.Contains(out, squeeze(want)) {
			t.Errorf("describe output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}

	t.Run("jumpstart model", func(t *testing.T) {
		e.mustRun(t, deepseekJSM, "apply", "-f", "-")
		out := squeeze(e.mustRun(t, "", "describe", "jsm", "deepseek", "-n", "team-a"))
		for _, want := range []string{"Model Source: jumpstart SageMakerPublicHub/deepseek-llm-r1-distill-qwen-1-5b\n",
			"SageMaker Endpoint: deepseek\n", "Replicas: 1\n", "Conditions:\n <none>\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("not found", func(t *testing.T) {
		if _, _, err := e.run(t, "", "describe", "iec", "nope"); err == nil || !strings.Contains(err.Error(), "(NotFound)") {
			t.Errorf("err = %v", err)
		}
	})
}

// squeeze collapses runs of spaces, so checks do not depend on column
// widths (which follow the longest key of each section).
func squeeze(s string) string { return reSpaces.ReplaceAllString(s, " ") }

var reSpaces = regexp.MustCompile(` {2,}`)
