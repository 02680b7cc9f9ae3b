package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// With credentials configured, the manifests API wants one of the
// adminTokens as a bearer token and answers a Kubernetes Status otherwise.
func TestManifestsAPIRequiresTokenWhenCredentialsConfigured(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: testSecret}},
		AdminTokens: []string{testAdmin}})
	path := h.url + "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs"
	tests := []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", http.StatusUnauthorized},
		{"the SigV4 secret", "Bearer " + testSecret, http.StatusUnauthorized},
		{"configured admin token", "Bearer " + testAdmin, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			var body struct{ Kind, Reason string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if tt.want == http.StatusUnauthorized && (body.Kind != "Status" || body.Reason != "Unauthorized") {
				t.Fatalf("refusal body %+v, want a Status with reason Unauthorized", body)
			}
			if tt.want == http.StatusOK && !strings.HasSuffix(body.Kind, "List") {
				t.Fatalf("list body kind %q", body.Kind)
			}
		})
	}
}

// Application Auto Scaling shares the SageMaker API's listener and SigV4
// check: the SDK's signed calls reach it, a wrong secret is refused, and a
// variant that does not exist is its own ValidationException.
func TestApplicationAutoScalingMounted(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: "s3cret"}}})
	ctx := context.Background()
	client := func(secret string) *aas.Client {
		return aas.New(aas.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(),
			Credentials: credentials.NewStaticCredentialsProvider("AKIDREAL", secret, "")})
	}
	out, err := client("s3cret").DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker})
	if err != nil || len(out.ScalableTargets) != 0 {
		t.Fatalf("DescribeScalableTargets = %+v, %v; want none", out, err)
	}
	_, err = client("s3cret").RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{
		ServiceNamespace: aastypes.ServiceNamespaceSagemaker, ResourceId: aws.String("endpoint/nope/variant/AllTraffic"),
		ScalableDimension: aastypes.ScalableDimensionSageMakerVariantDesiredInstanceCount,
		MinCapacity:       aws.Int32(1), MaxCapacity: aws.Int32(2)})
	if code, _ := apiCode(err); code != "ValidationException" {
		t.Fatalf("register on a missing endpoint: %v, want ValidationException", err)
	}
	_, err = client("wrong").DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker})
	if code, _ := apiCode(err); code != "InvalidSignatureException" {
		t.Fatalf("wrong secret: %v, want InvalidSignatureException", err)
	}
	// SageMaker calls still reach SageMaker.
	if _, err := h.sm.ListEndpoints(ctx, nil); err != nil {
		t.Fatalf("ListEndpoints beside Application Auto Scaling: %v", err)
	}
}
