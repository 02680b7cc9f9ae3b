package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/asyncinference"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// asyncHarness is a server whose S3 settings point at a moto S3 server,
// with bucket "async" made and model m1 created.
func asyncHarness(t *testing.T) (*harness, *s3.Client) {
	t.Helper()
	motoURL := testutil.StartMotoS3(t)
	var cfg config.Config
	cfg.ModelSources.S3.Endpoint = motoURL
	cfg.ModelSources.S3.AccessKeyID, cfg.ModelSources.S3.SecretAccessKey = "test", "test"
	h := startHarness(t, cfg)
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(motoURL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	ctx := context.Background()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("async")}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("m1"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}}); err != nil {
		t.Fatal(err)
	}
	return h, s3c
}

func asyncVariant() []smtypes.ProductionVariant {
	return []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m1"),
		InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(1)}}
}

// waitObject polls S3 until s3://bucket/key exists and returns its body.
func waitObject(t *testing.T, c *s3.Client, uri string) string {
	t.Helper()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			b, _ := io.ReadAll(out.Body)
			out.Body.Close()
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear: %v", uri, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAsyncInference(t *testing.T) {
	h, s3c := asyncHarness(t)
	ctx := context.Background()
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("async-cfg"),
		ProductionVariants: asyncVariant(),
		AsyncInferenceConfig: &smtypes.AsyncInferenceConfig{
			ClientConfig: &smtypes.AsyncInferenceClientConfig{MaxConcurrentInvocationsPerInstance: aws.Int32(2)},
			OutputConfig: &smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://async/out/"), S3FailurePath: aws.String("s3://async/fail")},
		}}); err != nil {
		t.Fatal(err)
	}
	d, err := h.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String("async-cfg")})
	if err != nil {
		t.Fatal(err)
	}
	if d.AsyncInferenceConfig == nil || aws.ToString(d.AsyncInferenceConfig.OutputConfig.S3OutputPath) != "s3://async/out/" ||
		aws.ToInt32(d.AsyncInferenceConfig.ClientConfig.MaxConcurrentInvocationsPerInstance) != 2 {
		t.Fatalf("describe AsyncInferenceConfig: %+v", d.AsyncInferenceConfig)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("async-ep"), EndpointConfigName: aws.String("async-cfg")}); err != nil {
		t.Fatal(err)
	}
	de := h.waitStatus(t, "async-ep", smtypes.EndpointStatusInService)
	if de.AsyncInferenceConfig == nil || aws.ToString(de.AsyncInferenceConfig.OutputConfig.S3FailurePath) != "s3://async/fail" {
		t.Fatalf("DescribeEndpoint AsyncInferenceConfig: %+v", de.AsyncInferenceConfig)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("async"), Key: aws.String("in/req.json"),
		Body: bytes.NewReader([]byte(`{"inputs":"hello async"}`))}); err != nil {
		t.Fatal(err)
	}

	t.Run("output", func(t *testing.T) {
		out, err := h.smr.InvokeEndpointAsync(ctx, &smr.InvokeEndpointAsyncInput{EndpointName: aws.String("async-ep"),
			InputLocation: aws.String("s3://async/in/req.json"), ContentType: aws.String("application/json"),
			InferenceId: aws.String("inf-1"), RequestTTLSeconds: aws.Int32(600)})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.InferenceId) != "inf-1" || aws.ToString(out.OutputLocation) != "s3://async/out/inf-1.out" ||
			aws.ToString(out.FailureLocation) != "s3://async/fail/inf-1-error.out" {
			t.Fatalf("answer: id %q output %q failure %q", aws.ToString(out.InferenceId), aws.ToString(out.OutputLocation), aws.ToString(out.FailureLocation))
		}
		// The fake engine echoes the body it was sent: the model's answer.
		if got := waitObject(t, s3c, aws.ToString(out.OutputLocation)); !strings.Contains(got, `hello async`) {
			t.Fatalf("output object: %s", got)
		}
	})

	t.Run("generated id", func(t *testing.T) {
		out, err := h.smr.InvokeEndpointAsync(ctx, &smr.InvokeEndpointAsyncInput{EndpointName: aws.String("async-ep"),
			InputLocation: aws.String("s3://async/in/req.json")})
		if err != nil {
			t.Fatal(err)
		}
		id := aws.ToString(out.InferenceId)
		if len(id) != 36 || aws.ToString(out.OutputLocation) != "s3://async/out/"+id+".out" {
			t.Fatalf("generated id %q, output %q", id, aws.ToString(out.OutputLocation))
		}
		waitObject(t, s3c, aws.ToString(out.OutputLocation))
	})

	t.Run("missing input", func(t *testing.T) {
		out, err := h.smr.InvokeEndpointAsync(ctx, &smr.InvokeEndpointAsyncInput{EndpointName: aws.String("async-ep"),
			InputLocation: aws.String("s3://async/in/nope.json"), InferenceId: aws.String("inf-missing")})
		if err != nil {
			t.Fatal(err)
		}
		got := waitObject(t, s3c, aws.ToString(out.FailureLocation))
		if !strings.Contains(got, "s3://async/in/nope.json") || !strings.Contains(got, "does not exist") {
			t.Fatalf("failure object: %s", got)
		}
		if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("async"), Key: aws.String("out/inf-missing.out")}); err == nil {
			t.Fatal("an output object was written for a failed request")
		}
	})

	t.Run("metrics", func(t *testing.T) {
		want := []string{`capstan_async_backlog{endpoint="async-ep"} 0`, `capstan_async_invocations_total{endpoint="async-ep",outcome="success"} 2`,
			`capstan_async_invocations_total{endpoint="async-ep",outcome="failure"} 1`,
			// The same gateway path as InvokeEndpoint: its request metrics count async work.
			`endpoint="async-ep"`}
		var missing []string
		// The object is written a moment before the request is counted.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get(h.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			missing = missing[:0]
			for _, w := range want {
				if !strings.Contains(string(b), w) {
					missing = append(missing, w)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(missing) > 0 {
			t.Errorf("metrics lack %q", missing)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		h.setup(t, "", "sync-cfg", 1)
		if _, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("sync-ep"), EndpointConfigName: aws.String("sync-cfg")}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(t, "sync-ep", smtypes.EndpointStatusInService)
		for _, tc := range []struct {
			name string
			in   smr.InvokeEndpointAsyncInput
			want string
		}{
			{"not async", smr.InvokeEndpointAsyncInput{EndpointName: aws.String("sync-ep"), InputLocation: aws.String("s3://async/in/req.json")},
				"Endpoint sync-ep of account 000000000000 is not configured for asynchronous inference"},
			{"unknown endpoint", smr.InvokeEndpointAsyncInput{EndpointName: aws.String("nope"), InputLocation: aws.String("s3://async/in/req.json")},
				"Endpoint nope of account 000000000000 not found."},
			{"ttl", smr.InvokeEndpointAsyncInput{EndpointName: aws.String("async-ep"), InputLocation: aws.String("s3://async/in/req.json"), RequestTTLSeconds: aws.Int32(10)},
				"Value '10' at 'requestTTLSeconds' failed to satisfy constraint: Member must have value greater than or equal to 60"},
			{"timeout", smr.InvokeEndpointAsyncInput{EndpointName: aws.String("async-ep"), InputLocation: aws.String("s3://async/in/req.json"), InvocationTimeoutSeconds: aws.Int32(3601)},
				"Value '3601' at 'invocationTimeoutSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600"},
			{"input uri", smr.InvokeEndpointAsyncInput{EndpointName: aws.String("async-ep"), InputLocation: aws.String("file:///etc/passwd")},
				"at 'inputLocation' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := h.smr.InvokeEndpointAsync(ctx, &tc.in)
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), tc.want) {
					t.Fatalf("got %v, want ValidationError with %q", err, tc.want)
				}
			})
		}
	})
}

func TestAsyncInferenceConfigValidation(t *testing.T) {
	h := startHarness(t, config.Config{})
	ctx := context.Background()
	h.setup(t, "m1", "base", 1)
	out := func(o *smtypes.AsyncInferenceOutputConfig) *smtypes.AsyncInferenceConfig {
		return &smtypes.AsyncInferenceConfig{OutputConfig: o}
	}
	for _, tc := range []struct {
		name string
		cfg  *smtypes.AsyncInferenceConfig
		want string
	}{
		{"no output path", out(&smtypes.AsyncInferenceOutputConfig{S3FailurePath: aws.String("s3://b/f")}),
			"1 validation error detected: Value null at 'asyncInferenceConfig.outputConfig.s3OutputPath' failed to satisfy constraint: Member must not be null"},
		{"concurrency 0", &smtypes.AsyncInferenceConfig{ClientConfig: &smtypes.AsyncInferenceClientConfig{MaxConcurrentInvocationsPerInstance: aws.Int32(0)},
			OutputConfig: &smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://b/o")}},
			"Value '0' at 'asyncInferenceConfig.clientConfig.maxConcurrentInvocationsPerInstance' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"concurrency 1001", &smtypes.AsyncInferenceConfig{ClientConfig: &smtypes.AsyncInferenceClientConfig{MaxConcurrentInvocationsPerInstance: aws.Int32(1001)},
			OutputConfig: &smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://b/o")}},
			"at 'asyncInferenceConfig.clientConfig.maxConcurrentInvocationsPerInstance' failed to satisfy constraint: Member must have value less than or equal to 1000"},
		{"bad uri", out(&smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("ftp://b/o")}),
			"Value 'ftp://b/o' at 'asyncInferenceConfig.outputConfig.s3OutputPath' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"https uri", out(&smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://b/o"), S3FailurePath: aws.String("https://b.s3.amazonaws.com/f")}),
			"at 'asyncInferenceConfig.outputConfig.s3FailurePath' failed to satisfy constraint: capstan writes asynchronous inference results through its S3 client and needs an s3:// URI"},
		{"sns arn", out(&smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://b/o"),
			NotificationConfig: &smtypes.AsyncInferenceNotificationConfig{SuccessTopic: aws.String("not-an-arn")}}),
			"Value 'not-an-arn' at 'asyncInferenceConfig.outputConfig.notificationConfig.successTopic' failed to satisfy constraint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "v-" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
				ProductionVariants: asyncVariant(), AsyncInferenceConfig: tc.cfg})
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !strings.Contains(ae.ErrorMessage(), tc.want) {
				t.Fatalf("got %v, want ValidationException with %q", err, tc.want)
			}
			// Nothing half-created.
			if _, err := h.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String(name)}); err == nil {
				t.Fatal("a refused config was stored")
			}
		})
	}
	// Notification topics are accepted (with a warning in the log).
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("with-sns"),
		ProductionVariants: asyncVariant(), AsyncInferenceConfig: out(&smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://b/o"),
			NotificationConfig: &smtypes.AsyncInferenceNotificationConfig{SuccessTopic: aws.String("arn:aws:sns:us-east-1:123456789012:done"),
				IncludeInferenceResponseIn: []smtypes.AsyncNotificationTopicTypes{"SUCCESS_NOTIFICATION_TOPIC"}}})}); err != nil {
		t.Fatal(err)
	}
}

// An async endpoint may be registered with MinCapacity 0; at zero instances
// a queued request scales it back to one and is then served.
func TestAsyncScaleFromZero(t *testing.T) {
	h, s3c := asyncHarness(t)
	ctx := context.Background()
	if _, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("zc"),
		ProductionVariants: asyncVariant(), AsyncInferenceConfig: &smtypes.AsyncInferenceConfig{
			OutputConfig: &smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://async/zero")}}}); err != nil {
		t.Fatal(err)
	}
	h.setup(t, "", "sync-cfg", 1)
	for ep, cfgName := range map[string]string{"zero-ep": "zc", "sync-ep": "sync-cfg"} {
		if _, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(ep), EndpointConfigName: aws.String(cfgName)}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(t, ep, smtypes.EndpointStatusInService)
	}
	as := aas.New(aas.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	register := func(ep string) error {
		_, err := as.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker,
			ResourceId: aws.String("endpoint/" + ep + "/variant/AllTraffic"), ScalableDimension: aastypes.ScalableDimensionSageMakerVariantDesiredInstanceCount,
			MinCapacity: aws.Int32(0), MaxCapacity: aws.Int32(2)})
		return err
	}
	if err := register("zero-ep"); err != nil {
		t.Fatalf("MinCapacity 0 on an async endpoint: %v", err)
	}
	if err := register("sync-ep"); err == nil || !strings.Contains(err.Error(), "MinCapacity must be at least 1") {
		t.Fatalf("MinCapacity 0 on a real-time endpoint: %v", err)
	}
	// Scale in to zero, as a target-tracking policy on the backlog would.
	if _, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("zero-ep"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(0)}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for h.srv.Gateway.Snapshot("zero-ep").Replicas != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the endpoint did not scale to zero")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("async"), Key: aws.String("in/z.json"),
		Body: bytes.NewReader([]byte(`{"inputs":"wake up"}`))}); err != nil {
		t.Fatal(err)
	}
	out, err := h.smr.InvokeEndpointAsync(ctx, &smr.InvokeEndpointAsyncInput{EndpointName: aws.String("zero-ep"),
		InputLocation: aws.String("s3://async/in/z.json"), InferenceId: aws.String("z1")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.FailureLocation) != "" {
		t.Fatalf("FailureLocation %q without S3FailurePath", aws.ToString(out.FailureLocation))
	}
	if got := waitObject(t, s3c, aws.ToString(out.OutputLocation)); !strings.Contains(got, "wake up") {
		t.Fatalf("output: %s", got)
	}
	d := h.waitStatus(t, "zero-ep", smtypes.EndpointStatusInService)
	if n := aws.ToInt32(d.ProductionVariants[0].DesiredInstanceCount); n != 1 {
		t.Fatalf("desired instances after the wake: %d", n)
	}
}

type stubReader struct{}

func (stubReader) Read(context.Context, string, string, string, time.Duration) (float64, error) {
	return 42, nil
}

type oneAsyncConfig struct{}

func (oneAsyncConfig) AsyncConfig(context.Context, string) (json.RawMessage, error) {
	return json.RawMessage(`{"OutputConfig":{"S3OutputPath":"s3://b/o"}}`), nil
}

func TestBacklogReader(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gw := gateway.New(gateway.Options{})
	q, err := asyncinference.New(asyncinference.Options{Store: st, Gateway: gw, Configs: oneAsyncConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := q.Submit(context.Background(), asyncinference.Request{Endpoint: "ep", InputLocation: "s3://b/in"}); err != nil {
			t.Fatal(err)
		}
	}
	r := backlogReader{Reader: stubReader{}, q: q, gw: gw, ep: "ep"}
	check := func(want map[string]float64) {
		t.Helper()
		for m, w := range want {
			v, err := r.Read(context.Background(), "", m, "Average", time.Minute)
			if err != nil || v != w {
				t.Errorf("%s = %v, %v; want %v", m, v, err, w)
			}
		}
	}
	// No instance: the whole backlog per "instance", and a backlog without capacity.
	check(map[string]float64{MetricApproximateBacklogSize: 3, MetricApproximateBacklogSizePerInstance: 3,
		MetricHasBacklogWithoutCapacity: 1, "InvocationsPerInstance": 42})
	gw.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1,
		Backends: []gateway.Backend{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "b", Addr: "127.0.0.1:2"}}}}})
	check(map[string]float64{MetricApproximateBacklogSize: 3, MetricApproximateBacklogSizePerInstance: 1.5,
		MetricHasBacklogWithoutCapacity: 0})
}
