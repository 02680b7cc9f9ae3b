package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	smrtypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/testutil"
)

var sigv4Creds = []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: "s3cret"}}

func hexSHA(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// signedRequest is a control API call for target with body, signed by the AWS
// SDK's own signer with the configured key, now (the verifier runs on the
// wall clock, as clients sign with theirs). hashHeader, when set, is sent and
// signed as X-Amz-Content-Sha256 and is the payload hash signed.
func signedRequest(t *testing.T, url, target string, body []byte, hashHeader, region, service string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	payloadHash := hexSHA(body)
	if hashHeader != "" {
		req.Header.Set("X-Amz-Content-Sha256", hashHeader)
		payloadHash = hashHeader
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDREAL", SecretAccessKey: "s3cret"},
		req, payloadHash, service, region, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// awsError sends req and returns the status and the AWS error code and
// message (readAWSError).
func awsError(t *testing.T, req *http.Request) (int, string, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	code, msg := readAWSError(t, resp)
	return resp.StatusCode, code, msg
}

// readAWSError reads an AWS error in either of the shapes the AWS APIs
// answer: AWS JSON 1.1 for the control APIs, where body (__type) and header
// agree on the code, or the runtime's application/json, whose code is only
// in the header.
func readAWSError(t *testing.T, resp *http.Response) (string, string) {
	t.Helper()
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"` // or "Message": JSON field names match either case
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	hdr := resp.Header.Get("X-Amzn-ErrorType")
	switch ct := resp.Header.Get("Content-Type"); {
	case ct == "application/json" && e.Type == "":
	case ct == "application/x-amz-json-1.1" && e.Type == hdr:
	default:
		t.Fatalf("Content-Type %q, body __type %q, header %q", ct, e.Type, hdr)
	}
	return hdr, e.Message
}

// A captured, correctly signed DeleteModel for one name cannot be replayed
// with another name in the body: the body is hashed by the server, whatever
// X-Amz-Content-Sha256 claims, and UNSIGNED-PAYLOAD is not accepted.
func TestSigV4SignedBodyCannotBeSwapped(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: sigv4Creds})
	ctx := context.Background()
	if _, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("victim"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}}); err != nil {
		t.Fatal(err)
	}
	captured := []byte(`{"ModelName":"does-not-exist"}`)
	// Same length as the captured body (JSON allows the trailing blanks), so
	// the signed Content-Length still holds.
	swapped := []byte(fmt.Sprintf("%-*s", len(captured), `{"ModelName":"victim"}`))
	tests := []struct {
		name, hashHeader, msg string
	}{
		{"original hash header kept", hexSHA(captured), "x-amz-content-sha256"},
		{"no hash header", "", "signature we calculated does not match"},
		{"UNSIGNED-PAYLOAD", "UNSIGNED-PAYLOAD", "UNSIGNED-PAYLOAD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := signedRequest(t, h.url, "SageMaker.DeleteModel", captured, tc.hashHeader, "us-east-1", "sagemaker")
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(swapped)), int64(len(swapped))
			status, code, msg := awsError(t, req)
			if status != http.StatusForbidden || code != "InvalidSignatureException" || !strings.Contains(msg, tc.msg) {
				t.Fatalf("swapped body: %d %s %q, want 403 InvalidSignatureException with %q", status, code, msg, tc.msg)
			}
			if _, err := h.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String("victim")}); err != nil {
				t.Fatalf("victim after the replay: %v", err)
			}
		})
	}
	// The captured request itself, unmodified, is still valid: the refusals
	// above are about the swap, not the signer.
	status, code, msg := awsError(t, signedRequest(t, h.url, "SageMaker.DeleteModel", captured, hexSHA(captured), "us-east-1", "sagemaker"))
	if status != http.StatusBadRequest || code != "ValidationException" || !strings.Contains(msg, "does-not-exist") {
		t.Fatalf("unmodified captured request: %d %s %q, want the API's ValidationException", status, code, msg)
	}
}

// The credential scope must name the server's region and the signing name of
// the API the request addresses; the real SDK clients, which sign each API
// with its own name, pass.
func TestSigV4CredentialScope(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: sigv4Creds, Region: "eu-west-1"})
	ctx := context.Background()
	creds := credentials.NewStaticCredentialsProvider("AKIDREAL", "s3cret", "")
	smIn := func(region string) *sm.Client {
		return sm.New(sm.Options{Region: region, BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(), Credentials: creds})
	}
	smrIn := func(region string) *smr.Client {
		return smr.New(smr.Options{Region: region, BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(), Credentials: creds})
	}
	aasIn := func(region string) *aas.Client {
		return aas.New(aas.Options{Region: region, BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(), Credentials: creds})
	}
	sdk := []struct {
		name, code, msg string
		call            func() error
	}{
		{"sagemaker in the server's region", "", "", func() error { _, err := smIn("eu-west-1").ListModels(ctx, nil); return err }},
		{"application-autoscaling in the server's region", "", "", func() error {
			_, err := aasIn("eu-west-1").DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker})
			return err
		}},
		{"runtime in the server's region reaches the API", "ValidationError", "not found", func() error {
			_, err := smrIn("eu-west-1").InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("nope"), Body: []byte("{}")})
			return err
		}},
		{"sagemaker in another region", "InvalidSignatureException", "Credential should be scoped to a valid region, not 'us-east-1'. ",
			func() error { _, err := smIn("us-east-1").ListModels(ctx, nil); return err }},
		{"runtime in another region", "InvalidSignatureException", "not 'us-west-2'", func() error {
			_, err := smrIn("us-west-2").InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("nope"), Body: []byte("{}")})
			return err
		}},
		{"application-autoscaling in another region", "InvalidSignatureException", "not 'us-east-1'", func() error {
			_, err := aasIn("us-east-1").DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker})
			return err
		}},
	}
	for _, tc := range sdk {
		t.Run("sdk/"+tc.name, func(t *testing.T) {
			err := tc.call()
			code, msg := apiCode(err)
			if tc.code == "" && err != nil || tc.code != "" && (code != tc.code || !strings.Contains(msg, tc.msg)) {
				t.Fatalf("got %v, want %q with %q", err, tc.code, tc.msg)
			}
		})
	}
	// Right key and region, signed for another API's signing name.
	forged := []struct {
		name, path, target, service, want string
	}{
		{"SageMaker call signed for application-autoscaling", "/", "SageMaker.ListModels", "application-autoscaling", "sagemaker"},
		{"Application Auto Scaling call signed for sagemaker", "/", "AnyScaleFrontendService.DescribeScalableTargets", "sagemaker", "application-autoscaling"},
		{"runtime call signed for sagemaker-runtime", "/endpoints/nope/invocations", "", "sagemaker-runtime", "sagemaker"},
	}
	for _, tc := range forged {
		t.Run("forged/"+tc.name, func(t *testing.T) {
			status, code, msg := awsError(t, signedRequest(t, h.url+tc.path, tc.target, []byte(`{"ServiceNamespace":"sagemaker"}`), "", "eu-west-1", tc.service))
			want := fmt.Sprintf("Credential should be scoped to correct service: '%s'. ", tc.want)
			if status != http.StatusForbidden || code != "InvalidSignatureException" || msg != want {
				t.Fatalf("%d %s %q, want 403 InvalidSignatureException %q", status, code, msg, want)
			}
		})
	}
}

// rawPost writes a signed request's head on its own connection, then body (a
// func so it can stream, or send nothing), and returns the response, which
// must come within a few seconds: the server answers without waiting for a
// body it will refuse.
func rawPost(t *testing.T, addr string, req *http.Request, header map[string]string, body func(io.Writer)) (int, string, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\n", req.URL.RequestURI(), req.Host)
	for k, v := range header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	_ = req.Header.Write(&head)
	head.WriteString("\r\n")
	if _, err := conn.Write(head.Bytes()); err != nil {
		t.Fatal(err)
	}
	go body(conn) // write errors once the server closes are expected
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response while the body was pending: %v", err)
	}
	defer resp.Body.Close()
	code, msg := readAWSError(t, resp)
	return resp.StatusCode, code, msg
}

// Everything the headers allow is checked before the body is read, and the
// body is read only up to the addressed API's limit: a request that declares
// 32 MiB, or streams without end, is answered at once.
func TestSigV4RefusesBeforeReadingTheBody(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: sigv4Creds})
	addr := strings.TrimPrefix(h.url, "http://")
	nothing := func(io.Writer) {}
	endless := func(w io.Writer) {
		cw := newChunkWriter(w)
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for i := 0; i < 1024; i++ { // 64 MiB at most
			if _, err := cw.Write(chunk); err != nil {
				return
			}
		}
	}
	// Within the claimed key's share of the body budget (limits.
	// maxInflightBodyBytesPerCredential, 64 MiB by default), which refuses
	// more before the API sees it.
	declared := map[string]string{"Content-Length": fmt.Sprint(32 << 20)}
	chunked := map[string]string{"Transfer-Encoding": "chunked"}
	tests := []struct {
		name         string
		path, target string
		region       string
		header       map[string]string
		body         func(io.Writer)
		status       int
		code, msg    string
	}{
		{"control API, Content-Length over 1 MiB", "/", "SageMaker.ListModels", "us-east-1", declared, nothing,
			413, "RequestEntityTooLarge", "limit of 1048576 bytes"},
		{"runtime API, Content-Length over 6291456 bytes", "/endpoints/ep/invocations", "", "us-east-1", declared, nothing,
			413, "ValidationError", "limit of 6291456 bytes"},
		{"Application Auto Scaling, Content-Length over 1 MiB", "/", "AnyScaleFrontendService.DescribeScalableTargets", "us-east-1", declared, nothing,
			413, "RequestEntityTooLargeException", "limit of 1048576 bytes"},
		{"control API, endless chunked body", "/", "SageMaker.ListModels", "us-east-1", chunked, endless,
			413, "RequestEntityTooLarge", "limit of 1048576 bytes"},
		{"runtime API, endless chunked body", "/endpoints/ep/invocations", "", "us-east-1", chunked, endless,
			413, "ValidationError", "limit of 6291456 bytes"},
		{"wrong region, 32 MiB declared", "/", "SageMaker.ListModels", "eu-west-1", declared, nothing,
			403, "InvalidSignatureException", "valid region"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			service := "sagemaker"
			if strings.HasPrefix(tc.target, "AnyScale") {
				service = "application-autoscaling"
			}
			// Signed over an empty body: the refusal must come before the
			// payload hash could be compared.
			req := signedRequest(t, h.url+tc.path, tc.target, nil, "", tc.region, service)
			status, code, msg := rawPost(t, addr, req, tc.header, tc.body)
			if status != tc.status || code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("%d %s %q, want %d %s with %q", status, code, msg, tc.status, tc.code, tc.msg)
			}
		})
	}
}

// chunkWriter frames writes as HTTP/1.1 chunks.
type chunkWriter struct{ w io.Writer }

func newChunkWriter(w io.Writer) *chunkWriter { return &chunkWriter{w} }

func (c *chunkWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(c.w, "%x\r\n", len(p)); err != nil {
		return 0, err
	}
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	_, err := io.WriteString(c.w, "\r\n")
	return len(p), err
}

// The real SDK clients, signing as they always do (payload hash, no
// X-Amz-Content-Sha256), reach all three APIs, including invocations whose
// body the runtime API takes from the verifier.
func TestSigV4SDKClientsAccepted(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: sigv4Creds})
	ctx := context.Background()
	h.serving(t, "ep")
	out, err := h.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("ep"), ContentType: aws.String("application/json"),
		Body: []byte(`{"inputs":"signed"}`)})
	if err != nil {
		t.Fatalf("InvokeEndpoint: %v", err)
	}
	if !strings.Contains(string(out.Body), `signed`) {
		t.Fatalf("InvokeEndpoint body %s: the engine did not get the signed body", out.Body)
	}
	st, err := h.smr.InvokeEndpointWithResponseStream(ctx, &smr.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String("ep"),
		ContentType: aws.String("application/json"), Body: []byte(`{"inputs":"signed"}`)})
	if err != nil {
		t.Fatalf("InvokeEndpointWithResponseStream: %v", err)
	}
	var streamed strings.Builder
	for ev := range st.GetStream().Events() {
		if p, ok := ev.(*smrtypes.ResponseStreamMemberPayloadPart); ok {
			streamed.Write(p.Value.Bytes)
		}
	}
	st.GetStream().Close()
	if !strings.Contains(streamed.String(), "chunk2") {
		t.Fatalf("stream: %q", streamed.String())
	}
	a := aas.New(aas.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDREAL", "s3cret", "")})
	if _, err := a.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{
		ServiceNamespace: aastypes.ServiceNamespaceSagemaker, ResourceId: aws.String("endpoint/ep/variant/AllTraffic"),
		ScalableDimension: aastypes.ScalableDimensionSageMakerVariantDesiredInstanceCount,
		MinCapacity:       aws.Int32(1), MaxCapacity: aws.Int32(2)}); err != nil {
		t.Fatalf("RegisterScalableTarget: %v", err)
	}
	// A session token cannot belong to a capstan key.
	withToken := sm.New(sm.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDREAL", "s3cret", "session")})
	_, err = withToken.ListModels(ctx, nil)
	if code, msg := apiCode(err); code != "UnrecognizedClientException" || !strings.Contains(msg, "AWS_SESSION_TOKEN") {
		t.Fatalf("with a session token: %v", err)
	}
}
