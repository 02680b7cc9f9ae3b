package server

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	cw "github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// refusalShape checks that a refusal is in one door's error shape and
// returns the error code it carries.
type refusalShape func(t *testing.T, resp *http.Response, body []byte) string

// awsJSON11 is the SageMaker control API's (and Application Auto
// Scaling's) shape: AWS JSON 1.1, __type in the body and X-Amzn-ErrorType.
func awsJSON11(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	wantContentType(t, resp, "application/x-amz-json-1.1")
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Message == "" || e.Type != resp.Header.Get("X-Amzn-ErrorType") {
		t.Errorf("not an AWS JSON 1.1 error (header %q): %v %s", resp.Header.Get("X-Amzn-ErrorType"), err, body)
	}
	return e.Type
}

// runtimeJSON is the SageMaker runtime's shape (restJson1): the code in
// X-Amzn-ErrorType, {"Message": ...} in an application/json body.
func runtimeJSON(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	wantContentType(t, resp, "application/json")
	var e map[string]any
	if err := json.Unmarshal(body, &e); err != nil || e["Message"] == nil || e["__type"] != nil {
		t.Errorf("not a SageMaker runtime error: %v %s", err, body)
	}
	return resp.Header.Get("X-Amzn-ErrorType")
}

// cloudwatchQuery is CloudWatch's query protocol: an XML ErrorResponse.
func cloudwatchQuery(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	wantContentType(t, resp, "text/xml")
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	if err := xml.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
		t.Errorf("not a query-protocol error: %v %s", err, body)
	}
	return e.Error.Code
}

// cloudwatchJSON10 is CloudWatch's awsJson1_0: the shape's full name in __type.
func cloudwatchJSON10(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	wantContentType(t, resp, "application/x-amz-json-1.0")
	var e struct {
		Type string `json:"__type"`
	}
	if err := json.Unmarshal(body, &e); err != nil || !strings.HasPrefix(e.Type, "com.amazonaws.cloudwatch#") {
		t.Errorf("not a CloudWatch JSON 1.0 error: %v %s", err, body)
	}
	return strings.TrimPrefix(e.Type, "com.amazonaws.cloudwatch#")
}

// openAIJSON is OpenAI's {"error": {message, type, param, code}}.
func openAIJSON(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	wantContentType(t, resp, "application/json")
	var e struct {
		Error *struct{ Message, Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("not an OpenAI error: %v %s", err, body)
		return ""
	}
	return e.Error.Code
}

// k8sStatus is the manifests API's Kubernetes Status; its code is the reason.
func k8sStatus(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	wantContentType(t, resp, "application/json")
	var s struct {
		Kind, APIVersion, Status, Message, Reason string
		Code                                      int
	}
	if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Status" || s.APIVersion != "v1" || s.Status != "Failure" ||
		s.Code != resp.StatusCode || s.Message == "" {
		t.Errorf("not a Kubernetes Status: %v %s", err, body)
	}
	return s.Reason
}

// adminJSON is the admin surfaces' {"message": ...}.
func adminJSON(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	wantContentType(t, resp, "application/json")
	var e struct{ Message string }
	if err := json.Unmarshal(body, &e); err != nil || e.Message == "" {
		t.Errorf("not an admin error: %v %s", err, body)
	}
	return ""
}

func wantContentType(t *testing.T, resp *http.Response, want string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, want) {
		t.Errorf("Content-Type %q, want %q", ct, want)
	}
}

// TestRefusalsInTheirDoorsShape: a request refused before its API sees it
// (no or a wrong signature or key, a body over the server's budget) is
// answered in the error shape of the API it is addressed to, as the server
// routes it. CloudWatch's shapes (CBOR, JSON 1.0, query XML) are only for
// CloudWatch's requests: a runtime invocation whose body is a form, or
// whose URL carries ?Action=, is refused in the runtime's JSON. Before,
// every such refusal came back as CloudWatch XML, and the runtime's
// refusals were AWS JSON 1.1 rather than the runtime's own shape.
func TestRefusalsInTheirDoorsShape(t *testing.T) {
	cfg := config.Config{Credentials: sigv4Creds, APIKeys: []string{testAPIKey}, AdminTokens: []string{testAdmin}}
	cfg.Limits.MaxInflightBodyBytes = 64 << 10
	h := startHarness(t, cfg)
	big := strings.Repeat("x", 128<<10)
	const (
		form   = "application/x-www-form-urlencoded"
		json11 = "application/x-amz-json-1.1"
		query  = "Action=ListMetrics&Version=2010-08-01"
	)
	tests := []struct {
		name, method, path        string
		contentType, target, auth string
		body                      string
		status                    int
		shape                     refusalShape
		code                      string
	}{
		// Authentication.
		{"runtime unsigned", "POST", "/endpoints/x/invocations", "application/json", "", "", "{}",
			403, runtimeJSON, "MissingAuthenticationTokenException"},
		{"runtime ?Action= unsigned", "POST", "/endpoints/x/invocations?Action=GetMetricData", "application/json", "", "", "{}",
			403, runtimeJSON, "MissingAuthenticationTokenException"},
		{"runtime form body unsigned", "POST", "/endpoints/x/invocations", form, "", "", "a=1",
			403, runtimeJSON, "MissingAuthenticationTokenException"},
		{"runtime ?Action= form body bad signature", "POST", "/endpoints/x/invocations?Action=GetMetricData&Version=2010-08-01", form, "",
			"AWS4-HMAC-SHA256 Credential=AKIDREAL", query, 403, runtimeJSON, "IncompleteSignatureException"},
		{"runtime stream unsigned", "POST", "/endpoints/x/invocations-response-stream?Action=GetMetricData", form, "", "", query,
			403, runtimeJSON, "MissingAuthenticationTokenException"},
		{"control unsigned", "POST", "/", json11, "SageMaker.ListEndpoints", "", "{}",
			403, awsJSON11, "MissingAuthenticationTokenException"},
		{"control ?Action= unsigned", "POST", "/?Action=GetMetricData", json11, "SageMaker.ListEndpoints", "", "{}",
			403, awsJSON11, "MissingAuthenticationTokenException"},
		{"auto scaling unsigned", "POST", "/", json11, "AnyScaleFrontendService.DescribeScalableTargets", "", "{}",
			403, awsJSON11, "MissingAuthenticationTokenException"},
		{"cloudwatch query unsigned", "POST", "/", form, "", "", query,
			403, cloudwatchQuery, "MissingAuthenticationTokenException"},
		{"cloudwatch json 1.0 unsigned", "POST", "/", "application/x-amz-json-1.0", "GraniteServiceVersion20100801.ListMetrics", "", "{}",
			403, cloudwatchJSON10, "MissingAuthenticationTokenException"},
		{"openai ?Action= form body wrong key", "POST", "/v1/chat/completions?Action=GetMetricData", form, "", "Bearer " + testAdmin, query,
			401, openAIJSON, "invalid_api_key"},
		{"manifests ?Action= wrong key", "GET", manifests + "?Action=ListMetrics", "", "", "Bearer " + testAPIKey, "",
			401, k8sStatus, "Unauthorized"},
		{"admin ?Action= no key", "GET", "/metrics?Action=ListMetrics", "", "", "", "",
			401, adminJSON, ""},
		// The server's body budget, before any authentication.
		{"runtime ?Action= too large", "POST", "/endpoints/x/invocations?Action=GetMetricData", form, "", "", big,
			413, runtimeJSON, "ValidationError"},
		{"control too large", "POST", "/", json11, "SageMaker.ListEndpoints", "", big,
			413, awsJSON11, "ValidationException"},
		{"cloudwatch query too large", "POST", "/", form, "", "", query + "&x=" + big,
			413, cloudwatchQuery, "RequestEntityTooLarge"},
		{"openai too large", "POST", "/v1/completions?Action=GetMetricData", form, "", "", big,
			413, openAIJSON, "request_too_large"},
		{"manifests too large", "POST", manifests + "?Action=GetMetricData", form, "", "", big,
			413, k8sStatus, "RequestEntityTooLarge"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, h.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range map[string]string{"Content-Type": tc.contentType, "X-Amz-Target": tc.target, "Authorization": tc.auth} {
				if v != "" {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if code := tc.shape(t, resp, body); code != tc.code {
				t.Errorf("code %q, want %q", code, tc.code)
			}
			if t.Failed() {
				t.Logf("%s %v\n%s", resp.Status, resp.Header, body)
			}
		})
	}
}

// TestRefusalsReadBySDKs: the AWS SDK clients read each door's refusals as
// the typed errors they are, the runtime client included: a form-encoded
// invocation with a wrong secret, one larger than the server's body
// budget, and one to a server whose AWS APIs are closed (API keys but no
// credentials configured).
func TestRefusalsReadBySDKs(t *testing.T) {
	cfg := config.Config{Credentials: sigv4Creds}
	cfg.Limits.MaxInflightBodyBytes = 64 << 10
	h := startHarness(t, cfg)
	closed := startHarness(t, config.Config{APIKeys: []string{testAPIKey}})
	ctx := context.Background()
	wrong := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDREAL", "wrong", ""), Retryer: testutil.AWSRetryer}
	smWrong := sm.NewFromConfig(wrong, func(o *sm.Options) { o.BaseEndpoint = aws.String(h.url) })
	smrWrong := smr.NewFromConfig(wrong, func(o *smr.Options) { o.BaseEndpoint = aws.String(h.url) })
	invoke := func(c *smr.Client, body string) error {
		_, err := c.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("x"), ContentType: aws.String("application/x-www-form-urlencoded"),
			Body: []byte(body)})
		return err
	}
	tests := []struct {
		name string
		call func() error
		code string
	}{
		{"control wrong secret", func() error { _, err := smWrong.ListEndpoints(ctx, &sm.ListEndpointsInput{}); return err },
			"InvalidSignatureException"},
		{"runtime wrong secret", func() error { return invoke(smrWrong, "Action=GetMetricData&Version=2010-08-01") },
			"InvalidSignatureException"},
		{"runtime too large", func() error { return invoke(h.smr, strings.Repeat("x", 128<<10)) }, "ValidationError"},
		{"runtime closed", func() error { return invoke(closed.smr, "a=1") }, "UnrecognizedClientException"},
		{"cloudwatch wrong secret", func() error {
			_, err := h.cloudwatch("AKIDREAL", "wrong").ListMetrics(ctx, &cw.ListMetricsInput{})
			return err
		}, "InvalidSignatureException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != tc.code || ae.ErrorMessage() == "" {
				t.Fatalf("%v, want %s with a message", err, tc.code)
			}
		})
	}
}
