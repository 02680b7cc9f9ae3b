package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	smrtypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/awsjson/awsjsontest"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// fakeEngine answers /invocations like an engine: JSON, or a few flushed
// chunks when the body asks to stream.
func fakeEngine(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "data: chunk%d\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"echo":%q}`, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// failureLog keeps the server's warnings and prints them if the test
// fails: a failure that happens once in a CI run then says why.
func failureLog(t testing.TB) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("server warnings:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if buf.Len() < 1<<20 {
			buf.Write(p)
		}
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type harness struct {
	srv *Server
	rt  *fake.Runtime
	sm  *sm.Client
	smr *smr.Client
	url string
}

func startHarness(t testing.TB, cfg config.Config, rtOpts ...fake.Option) *harness {
	t.Helper()
	eng := fakeEngine(t)
	rt := fake.New(rtOpts...)
	rt.SetDefaultAddr(strings.TrimPrefix(eng.URL, "http://"))
	return startHarnessOn(t, cfg, rt, rt)
}

// startHarnessOn starts the server on run, a runtime built around rt.
func startHarnessOn(t testing.TB, cfg config.Config, rt *fake.Runtime, run runtime.Runtime) *harness {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(t.TempDir(), "data")
	}
	cfg.Default()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, Options{Config: cfg, Logger: failureLog(t),
		Runtime:    func(clock.Clock, *slog.Logger, string) (runtime.Runtime, error) { return run, nil },
		RuntimeAPI: RuntimeAPI(cfg), Resync: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Stop(context.Background()) })
	url := "http://" + srv.Addr
	key, secret := "AKIDTEST", "secret"
	if len(cfg.Credentials) > 0 {
		key, secret = cfg.Credentials[0].AccessKeyID, cfg.Credentials[0].SecretAccessKey
	}
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""), Retryer: testutil.AWSRetryer}
	return &harness{srv: srv, rt: rt, url: url,
		sm:  sm.NewFromConfig(awsCfg, func(o *sm.Options) { o.BaseEndpoint = aws.String(url) }),
		smr: smr.NewFromConfig(awsCfg, func(o *smr.Options) { o.BaseEndpoint = aws.String(url) })}
}

func (h *harness) setup(t testing.TB, model, cfgName string, count int32) {
	t.Helper()
	ctx := context.Background()
	if model != "" {
		if _, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(model),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(cfgName),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m1"),
			InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(count), InitialVariantWeight: aws.Float32(1)}}}); err != nil {
		t.Fatal(err)
	}
}

// serving creates model m1, config c1 (one ml.g5.xlarge) and endpoint name,
// and waits until the endpoint is InService.
func (h *harness) serving(t *testing.T, name string) {
	t.Helper()
	h.setup(t, "m1", "c1", 1)
	if _, err := h.sm.CreateEndpoint(context.Background(), &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String("c1")}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(t, name, smtypes.EndpointStatusInService)
}

func (h *harness) waitStatus(t *testing.T, name string, want smtypes.EndpointStatus) *sm.DescribeEndpointOutput {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := h.sm.DescribeEndpoint(context.Background(), &sm.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err == nil && out.EndpointStatus == want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s not %s: %+v %v", name, want, out, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFlowWithAWSSDK(t *testing.T) {
	h := startHarness(t, config.Config{})
	ctx := context.Background()
	h.setup(t, "m1", "c1", 2)
	out, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("My-Endpoint"), EndpointConfigName: aws.String("c1")})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(out.EndpointArn); got != "arn:aws:sagemaker:us-east-1:000000000000:endpoint/my-endpoint" {
		t.Fatalf("arn %s", got)
	}
	d := h.waitStatus(t, "My-Endpoint", smtypes.EndpointStatusInService)
	if len(d.ProductionVariants) != 1 || aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount) != 2 ||
		aws.ToFloat32(d.ProductionVariants[0].CurrentWeight) != 1 || aws.ToString(d.EndpointConfigName) != "c1" || d.CreationTime == nil {
		t.Fatalf("describe: %+v", d)
	}

	inv, err := h.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("My-Endpoint"), ContentType: aws.String("application/json"), Body: []byte(`{"inputs":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(inv.Body), "hi") || aws.ToString(inv.InvokedProductionVariant) != "AllTraffic" {
		t.Fatalf("invoke: %s %v", inv.Body, aws.ToString(inv.InvokedProductionVariant))
	}
	st, err := h.smr.InvokeEndpointWithResponseStream(ctx, &smr.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String("My-Endpoint"), ContentType: aws.String("application/json"), Body: []byte(`{"inputs":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	for ev := range st.GetStream().Events() {
		if p, ok := ev.(*smrtypes.ResponseStreamMemberPayloadPart); ok {
			streamed.Write(p.Value.Bytes)
		}
	}
	st.GetStream().Close()
	if !strings.Contains(streamed.String(), "chunk2") {
		t.Fatalf("stream: %q (err %v)", streamed.String(), st.GetStream().Err())
	}

	// Blue/green update while invoking continuously.
	h.setup(t, "", "c2", 1)
	var stop atomic.Bool
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, err := h.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("My-Endpoint"), Body: []byte(`{"inputs":"x"}`), ContentType: aws.String("application/json")})
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	if _, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("My-Endpoint"), EndpointConfigName: aws.String("c2")}); err != nil {
		t.Fatal(err)
	}
	d = h.waitStatus(t, "My-Endpoint", smtypes.EndpointStatusInService)
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("during update: %d ok, %d failed (first: %v)", ok.Load(), failed.Load(), firstErr.Load())
	}
	if aws.ToString(d.EndpointConfigName) != "c2" || aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount) != 1 {
		t.Fatalf("after update: %+v", d)
	}

	if _, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("My-Endpoint"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredWeight: aws.Float32(0.5), DesiredInstanceCount: aws.Int32(3)}}}); err != nil {
		t.Fatal(err)
	}
	d = h.waitStatus(t, "My-Endpoint", smtypes.EndpointStatusInService)
	pv := d.ProductionVariants[0]
	if aws.ToInt32(pv.CurrentInstanceCount) != 3 || aws.ToInt32(pv.DesiredInstanceCount) != 3 || aws.ToFloat32(pv.CurrentWeight) != 0.5 {
		t.Fatalf("after weights: %+v", pv)
	}

	list, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{StatusEquals: smtypes.EndpointStatusInService, NameContains: aws.String("my-end")})
	if err != nil || len(list.Endpoints) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}

	if _, err := h.sm.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String("My-Endpoint")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("My-Endpoint")})
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not deleted: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(h.rt.Running()); n != 0 {
		t.Fatalf("%d replicas still running after delete", n)
	}
}

func apiCode(err error) (string, string) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode(), ae.ErrorMessage()
	}
	return "", fmt.Sprint(err)
}

func TestControlAPIErrors(t *testing.T) {
	h := startHarness(t, config.Config{Fleet: map[string]map[string]int{"ml.g5.xlarge": {"us-east-1a": 2}}})
	ctx := context.Background()
	h.serving(t, "ep")
	arn := func(kind, name string) string { return "arn:aws:sagemaker:us-east-1:000000000000:" + kind + "/" + name }
	tests := []struct {
		name string
		call func() error
		code string
		msg  string
	}{
		{"describe missing endpoint", func() error {
			_, err := h.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("Nope")})
			return err
		}, "ValidationException", `Could not find endpoint "` + arn("endpoint", "nope") + `".`},
		{"describe missing config", func() error {
			_, err := h.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String("nope")})
			return err
		}, "ValidationException", `Could not find endpoint configuration "` + arn("endpoint-config", "nope") + `".`},
		{"describe missing model", func() error {
			_, err := h.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String("nope")})
			return err
		}, "ValidationException", `Could not find model "` + arn("model", "nope") + `".`},
		{"duplicate endpoint", func() error {
			_, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("c1")})
			return err
		}, "ValidationException", `Cannot create already existing endpoint "` + arn("endpoint", "ep") + `".`},
		{"duplicate config", func() error { h2 := h; return h2.createConfig("c1", "m1", "ml.g5.xlarge", 1) }, "ValidationException",
			`Cannot create already existing endpoint configuration "` + arn("endpoint-config", "c1") + `".`},
		{"duplicate model", func() error {
			_, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("m1")})
			return err
		}, "ValidationException", `Cannot create already existing model "` + arn("model", "m1") + `".`},
		{"endpoint with missing config", func() error {
			_, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("ep2"), EndpointConfigName: aws.String("nope")})
			return err
		}, "ValidationException", `Could not find endpoint configuration "` + arn("endpoint-config", "nope") + `".`},
		{"config with missing model", func() error { return h.createConfig("c9", "ghost", "ml.g5.xlarge", 1) }, "ValidationException",
			`Could not find model "` + arn("model", "ghost") + `".`},
		{"unknown instance type", func() error { return h.createConfig("c9", "m1", "ml.z9.huge", 1) }, "ValidationException",
			"1 validation error detected: Value 'ml.z9.huge' at 'productionVariants.1.member.instanceType' failed to satisfy constraint: Member must satisfy enum value set"},
		{"bad endpoint name", func() error {
			_, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("bad_name"), EndpointConfigName: aws.String("c1")})
			return err
		}, "ValidationException", "1 validation error detected: Value 'bad_name' at 'endpointName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
		{"name too long", func() error {
			_, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(strings.Repeat("a", 64))})
			return err
		}, "ValidationException", "Member must have length less than or equal to 63"},
		{"two violations", func() error {
			_, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("a_b"), EndpointConfigName: aws.String("c_d")})
			return err
		}, "ValidationException", "2 validation errors detected: Value 'a_b' at 'endpointName'"},
		{"negative weight", func() error {
			_, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("ep"),
				DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredWeight: aws.Float32(-1)}}})
			return err
		}, "ValidationException", "at 'desiredWeightsAndCapacities.1.member.desiredWeight' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"bad sort enum", func() error {
			_, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{SortBy: "Size"})
			return err
		}, "ValidationException", "Value 'Size' at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set: [Name, CreationTime, Status]"},
		{"max results too big", func() error {
			_, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{MaxResults: aws.Int32(101)})
			return err
		}, "ValidationException", "Value '101' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 100"},
		{"more than the fleet", func() error {
			if err := h.createConfig("big", "m1", "ml.g5.xlarge", 2); err != nil {
				return err
			}
			_, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("big"), EndpointConfigName: aws.String("big")})
			return err
		}, "ResourceLimitExceeded", "'ml.g5.xlarge for endpoint usage' is 2 Instances, with current utilization of 1 Instances and a request delta of 2 Instances"},
		{"update missing endpoint", func() error {
			_, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("nope"), EndpointConfigName: aws.String("c1")})
			return err
		}, "ValidationException", `Could not find endpoint "` + arn("endpoint", "nope") + `".`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := apiCode(tc.call())
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q\nwant %s containing %q", code, msg, tc.code, tc.msg)
			}
		})
	}
	t.Run("update while updating", func(t *testing.T) {
		if err := h.createConfig("c3", "m1", "ml.g5.xlarge", 1); err != nil {
			t.Fatal(err)
		}
		h.rt.SetStartError("", errors.New("hold")) // keep the green side from coming up
		defer h.rt.SetStartError("", nil)
		if _, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("ep"),
			DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(2)}}}); err != nil {
			t.Fatal(err)
		}
		_, err := h.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("c3")})
		code, msg := apiCode(err)
		if code != "ValidationException" || msg != `Cannot update in-progress endpoint "`+arn("endpoint", "ep")+`".` {
			t.Fatalf("got %s %q", code, msg)
		}
		// Deletion, unlike SageMaker, is accepted in every state.
		if _, err := h.sm.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String("ep")}); err != nil {
			t.Fatalf("delete while updating: %v", err)
		}
	})
}

func (h *harness) createConfig(name, model, typ string, count int32) error {
	_, err := h.sm.CreateEndpointConfig(context.Background(), &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(model),
			InstanceType: smtypes.ProductionVariantInstanceType(typ), InitialInstanceCount: aws.Int32(count)}}})
	return err
}

// TestRawProtocol checks what SDKs do not let us send: unknown operations,
// malformed JSON, oversized bodies, and the error wire shape itself.
func TestRawProtocol(t *testing.T) {
	h := startHarness(t, config.Config{})
	tests := []struct {
		name   string
		target string
		body   string
		status int
		code   string
	}{
		{"unknown operation", "SageMaker.LaunchRocket", `{}`, 400, "UnknownOperationException"},
		{"malformed json", "SageMaker.CreateModel", `{"ModelName":`, 400, "SerializationException"},
		{"wrong type", "SageMaker.CreateModel", `{"ModelName":5}`, 400, "SerializationException"},
		{"missing member", "SageMaker.DescribeEndpoint", `{}`, 400, "ValidationException"},
		{"oversized body", "SageMaker.CreateModel", `{"ModelName":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "RequestEntityTooLarge"},
		{"list on empty store", "SageMaker.ListEndpoints", `{}`, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, raw := awsjsontest.Call(t, h.url, tc.target, tc.body)
			var body map[string]any
			_ = json.Unmarshal(raw, &body)
			if status != tc.status || hdr.Get("x-amzn-RequestId") == "" {
				t.Fatalf("status %d (request id %q), body %v", status, hdr.Get("x-amzn-RequestId"), body)
			}
			if tc.code != "" && (body["__type"] != tc.code || hdr.Get("X-Amzn-ErrorType") != tc.code || body["message"] == "") {
				t.Fatalf("body %v header %q, want %s", body, hdr.Get("X-Amzn-ErrorType"), tc.code)
			}
		})
	}
}

func TestSigV4RequiredWhenCredentialsConfigured(t *testing.T) {
	creds := []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: "s3cret"}}
	h := startHarness(t, config.Config{Credentials: creds})
	ctx := context.Background()
	if _, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{}); err != nil {
		t.Fatalf("signed call: %v", err)
	}
	bad := sm.New(sm.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDREAL", "wrong", "")})
	_, err := bad.ListEndpoints(ctx, &sm.ListEndpointsInput{})
	if code, _ := apiCode(err); code != "InvalidSignatureException" {
		t.Fatalf("wrong secret: %v", err)
	}
	badRT := smr.New(smr.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDOTHER", "x", "")})
	_, err = badRT.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("x"), Body: []byte("{}")})
	if code, _ := apiCode(err); code != "UnrecognizedClientException" {
		t.Fatalf("unknown key on runtime API: %v", err)
	}
}

func TestDevClock(t *testing.T) {
	tests := []struct {
		name   string
		dev    bool
		body   string
		status int
	}{
		{"advance", true, `{"advance":"168h"}`, 200},
		{"bad duration", true, `{"advance":"soon"}`, 400},
		{"past the bound", true, `{"advance":"2562047h"}`, 400},
		{"off", false, `{"advance":"1h"}`, 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, config.Config{DevClock: tc.dev})
			before := h.srv.Clock.Now()
			resp, err := http.Post(h.url+"/_capstan/clock", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&out)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %v", resp.StatusCode, out)
			}
			if tc.status == 200 {
				now, err := time.Parse(time.RFC3339, out["now"])
				if err != nil || now.Sub(before) < 168*time.Hour-time.Second || h.srv.Clock.Now().Sub(before) < 168*time.Hour {
					t.Fatalf("now %v (before %v) %v", out["now"], before, err)
				}
			} else if out["message"] == "" {
				t.Fatal("no message")
			}
		})
	}
}
