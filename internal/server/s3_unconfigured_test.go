package server

// Without an S3 endpoint, s3 model sources are refused through both doors
// before anything is contacted: CreateModel answers a ValidationException
// naming the settings, capstan apply of a manifest with an s3Storage source
// is refused naming the field, and no credential source off this machine
// (EC2 instance metadata, container credentials) is asked.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// s3SettingNames are what an s3 source without an endpoint asks for.
var s3SettingNames = []string{"modelSources.s3.endpoint", "--s3-endpoint", "modelSources.s3.accessKeyId", "modelSources.s3.secretAccessKey"}

func TestS3ModelSourceWithoutEndpoint(t *testing.T) {
	conns := testutil.AWSCredentialTrap(t, true)
	h := startHarness(t, config.Config{})
	ctx := context.Background()

	t.Run("CreateModel", func(t *testing.T) {
		for _, tt := range []struct {
			name  string
			c     smtypes.ContainerDefinition
			field string
		}{
			{"ModelDataUrl archive", smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://my-bucket/model.tar.gz")},
				"PrimaryContainer.ModelDataUrl: could not use the model data at s3://my-bucket/model.tar.gz: no S3 endpoint is configured"},
			{"S3DataSource prefix", smtypes.ContainerDefinition{ModelDataSource: &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{
				S3Uri: aws.String("s3://my-bucket/custom/"), S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}},
				"PrimaryContainer.ModelDataSource.S3DataSource.S3Uri: could not use the model data at s3://my-bucket/custom/: no S3 endpoint is configured"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				name := strings.ReplaceAll(strings.ToLower(tt.name), " ", "-")
				tt.c.Image = aws.String("capstan/sim")
				_, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name), PrimaryContainer: &tt.c})
				wantValidation(t, err, append([]string{tt.field}, s3SettingNames...)...)
				if _, err := h.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String(name)}); err == nil {
					t.Fatalf("model %s was stored after a refused CreateModel", name)
				}
			})
		}
	})

	t.Run("InferenceEndpointConfig s3Storage", func(t *testing.T) {
		// Applied as a user does, with capstan apply: refused at the door,
		// naming the field and the settings, and nothing stored.
		file := filepath.Join(t.TempDir(), "tiny-s3.yaml")
		if err := os.WriteFile(file, []byte(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: tiny-s3, namespace: default}
spec:
  modelName: tinyllama
  instanceType: ml.g5.24xlarge
  replicas: 1
  invocationEndpoint: v1/chat/completions
  modelSourceConfig:
    modelSourceType: s3
    s3Storage: {bucketName: my-bucket, region: us-east-1}
    modelLocation: tinyllama
  worker:
    image: capstan/sim
    modelInvocationPort: {containerPort: 8000, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
`), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(testutil.CapstanBinary(t), "apply", "-f", file, "--server", h.url).CombinedOutput()
		if err == nil {
			t.Fatalf("capstan apply of an s3 source without an S3 endpoint succeeded:\n%s", out)
		}
		for _, m := range append([]string{"spec.modelSourceConfig.s3Storage: s3://my-bucket/tinyllama/: no S3 endpoint is configured"}, s3SettingNames...) {
			if !strings.Contains(string(out), m) {
				t.Fatalf("capstan apply said %q, which does not mention %q", out, m)
			}
		}
		if _, err := h.srv.Deployments.Get(ctx, manifest.KindInferenceEndpointConfig, "default", "tiny-s3"); err == nil {
			t.Fatal("the refused manifest was stored")
		}
	})

	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to the credential endpoints; want none", n)
	}
}

// TestAsyncInferenceWithoutS3: without an S3 endpoint an asynchronous
// request, whose input and answer live in S3, is refused at
// InvokeEndpointAsync naming the settings, before it is queued, and
// nothing is contacted.
func TestAsyncInferenceWithoutS3(t *testing.T) {
	conns := testutil.AWSCredentialTrap(t, true)
	h := startHarness(t, config.Config{})
	ctx := context.Background()
	h.setup(t, "m1", "base", 1)
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("async-cfg"),
		ProductionVariants: asyncVariant(),
		AsyncInferenceConfig: &smtypes.AsyncInferenceConfig{
			OutputConfig: &smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://async/out/")}}}); err != nil {
		t.Fatal(err)
	}
	h.createEP(t, "async-ep", "async-cfg")
	_, err := h.smr.InvokeEndpointAsync(ctx, &smr.InvokeEndpointAsyncInput{EndpointName: aws.String("async-ep"),
		InputLocation: aws.String("s3://async/in/req.json"), ContentType: aws.String("application/json")})
	// The runtime API's code for bad input is ValidationError.
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		t.Fatalf("InvokeEndpointAsync without S3: %v, want a ValidationError", err)
	}
	for _, m := range append([]string{"Endpoint async-ep of account 000000000000 cannot take asynchronous requests: " +
		"asynchronous inference reads its input from and writes its answer to S3: no S3 endpoint is configured"}, s3SettingNames...) {
		if !strings.Contains(ae.ErrorMessage(), m) {
			t.Fatalf("InvokeEndpointAsync said %q, which does not mention %q", ae.ErrorMessage(), m)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to the credential endpoints; want none", n)
	}
}
