package server

// CPU instance types end to end: a real `capstan serve` with its default
// fleet, a real engine replica, driven by aws-sdk-go-v2.

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestE2ECPUEndpoint: a small model on ml.m5.xlarge reaches InService on the
// default fleet, answers InvokeEndpoint, and its engine says it runs on a
// CPU device; a model too big for a CPU instance's memory fails with a
// FailureReason naming the memory.
func TestE2ECPUEndpoint(t *testing.T) {
	dataDir := t.TempDir()
	p := startServe(t, dataDir)
	ctx := context.Background()
	create := func(ep, hf, instanceType string) {
		t.Helper()
		if _, err := p.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(ep + "-model"),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": hf}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(ep + "-cfg"),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(ep + "-model"),
				InstanceType: smtypes.ProductionVariantInstanceType(instanceType), InitialInstanceCount: aws.Int32(1)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(ep), EndpointConfigName: aws.String(ep + "-cfg")}); err != nil {
			t.Fatal(err)
		}
	}

	create("cpu", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "ml.m5.xlarge")
	p.wait(t, "cpu", smtypes.EndpointStatusInService, 60*time.Second)
	out, err := p.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("cpu"), ContentType: aws.String("application/json"),
		Body: []byte(`{"inputs":"Hello from a CPU","parameters":{"max_new_tokens":4}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Body), "generated_text") {
		t.Fatalf("body %s", out.Body)
	}

	// The replica's engine publishes what it runs on.
	labels := placementOf(t, p.url, filepath.Join(dataDir, "replicas"), "cpu.AllTraffic.")
	if labels["device"] != "cpu" || labels["gpu"] != "ml.m5.xlarge" || labels["tensor_parallel"] != "1" {
		t.Fatalf("capstan_engine_placement_info labels %v, want device=cpu gpu=ml.m5.xlarge tensor_parallel=1", labels)
	}

	// llama-3.1-8b (16 GB of BF16 weights) does not fit a 16 GiB ml.m5.xlarge.
	create("big", "meta-llama/Llama-3.1-8B-Instruct", "ml.m5.xlarge")
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := p.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("big")})
		if err != nil {
			t.Fatal(err)
		}
		if d.EndpointStatus == smtypes.EndpointStatusFailed {
			r := aws.ToString(d.FailureReason)
			if !strings.Contains(r, "memory") || !strings.Contains(r, "ml.m5.xlarge") || !strings.Contains(r, "16 GiB") {
				t.Fatalf("FailureReason %q should name the instance's memory", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("big endpoint still %s", d.EndpointStatus)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// placementOf finds the replica whose id starts with prefix by its log and
// returns its capstan_engine_placement_info labels, read through the
// server at url.
func placementOf(t *testing.T, url, replicaDir, prefix string) map[string]string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(replicaDir, prefix+"*.log"))
	if len(logs) == 0 {
		t.Fatalf("no replica log %s*.log in %s", prefix, replicaDir)
	}
	// Through capstan's proxy: the replica's own port wants its API key.
	id := strings.TrimSuffix(filepath.Base(logs[0]), ".log")
	resp, err := http.Get(url + "/_capstan/replicas/" + id + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	fam, ok := fams["capstan_engine_placement_info"]
	if !ok || len(fam.GetMetric()) != 1 {
		t.Fatalf("capstan_engine_placement_info: %v", fam)
	}
	out := map[string]string{}
	for _, l := range fam.GetMetric()[0].GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
