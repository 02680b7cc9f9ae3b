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
	e.mustRun(t, exampleManifest(t, "examples-iec-kv-routing.yaml"), "apply", "-f", "-")
	err := e.store.SetStatus(manifest.KindInferenceEndpointConfig, "default", "demo", func(s *manifest.Status) {
		s.State = manifest.StateDeploymentInProgress
		s.Replicas, s.ReadyReplicas, s.ObservedGeneration = 2, 1, 1
		s.Endpoints = &manifest.EndpointsStatus{URL: "http://127.0.0.1:8080/v1", SageMaker: &manifest.SageMakerEndpointStatus{State: "CreationCompleted"}}
		s.Conditions = []manifest.Condition{
			{Type: manifest.ConditionReady, Status: manifest.ConditionFalse, Reason: manifest.ReasonInsufficientCapacity, LastTransitionTime: t0,
				Message: "1 replica pending: no ml.g5.24xlarge node has 1 free GPU"},
			{Type: manifest.ConditionProgressing, Status: manifest.ConditionTrue, Reason: manifest.ReasonDeploying, LastTransitionTime: t0},
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	e.store.AddEvent(manifest.KindInferenceEndpointConfig, "default", "demo", manifest.Event{Time: t0.Add(time.Minute), Type: manifest.EventWarning,
		Reason: "Unschedulable", Message: "replica demo-1: no ml.g5.24xlarge node has 1 free GPU"})
	e.clk.Step(2 * time.Hour)

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
		"  Replicas:           2 current, 1 ready\n",
		"  Endpoint URL:       http://127.0.0.1:8080/v1\n",
		"  Ready         False    InsufficientCapacity   120m   1 replica pending: no ml.g5.24xlarge node has 1 free GPU\n",
		"  Warning   Unschedulable   119m   replica demo-1: no ml.g5.24xlarge node has 1 free GPU\n",
		"  Normal    Created         120m   manifest stored\n",
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
