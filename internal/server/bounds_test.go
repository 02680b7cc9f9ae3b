package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/awsjson/awsjsontest"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// startWithRuntime starts a server over rt (which the test controls) and
// returns it with a SageMaker client. The caller stops it.
func startWithRuntime(t *testing.T, rt runtime.Runtime) (*Server, *sm.Client, string) {
	t.Helper()
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"),
		Fleet: map[string]map[string]int{"ml.g5.xlarge": {"us-east-1a": 4}}}
	cfg.Default()
	srv, err := Start(context.Background(), Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Runtime: func(clock.Clock, *slog.Logger, string) (runtime.Runtime, error) { return rt, nil }, Resync: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + srv.Addr
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), Retryer: testutil.AWSRetryer}
	return srv, sm.NewFromConfig(awsCfg, func(o *sm.Options) { o.BaseEndpoint = aws.String(url) }), url
}

// rawCall posts body as SageMaker operation op and returns the status and
// the decoded AWS JSON body.
func rawCall(t *testing.T, url, op, body string) (int, map[string]any) {
	t.Helper()
	status, _, raw := awsjsontest.Call(t, url, "SageMaker."+op, body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return status, out
}

// TestCountLimitsAtTheAPI: counts past capstan's caps, and timestamps past
// any calendar, are refused in AWS's words before anything is stored, through
// the AWS SDK (which sends int32 counts) and raw JSON (which can carry the
// int64 counts that used to wrap the fleet sum negative).
func TestCountLimitsAtTheAPI(t *testing.T) {
	h := startHarness(t, config.Config{Fleet: map[string]map[string]int{"ml.g5.xlarge": {"us-east-1a": 2}}})
	ctx := context.Background()
	h.serving(t, "ep")

	variant := func(name string, n int32) smtypes.ProductionVariant {
		return smtypes.ProductionVariant{VariantName: aws.String(name), ModelName: aws.String("m1"),
			InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(n)}
	}
	sdk := []struct {
		name      string
		call      func() error
		wantParts []string
	}{
		{"two MaxInt32 variants", func() error {
			_, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("big"),
				ProductionVariants: []smtypes.ProductionVariant{variant("a", math.MaxInt32), variant("b", math.MaxInt32)}})
			return err
		}, []string{"2 validation errors detected", "Value '2147483647' at 'productionVariants.1.member.initialInstanceCount' failed to satisfy constraint: Member must have value less than or equal to 1000",
			"productionVariants.2.member.initialInstanceCount"}},
		{"desired count MaxInt32", func() error {
			_, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("ep"),
				DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(math.MaxInt32)}}})
			return err
		}, []string{"at 'desiredWeightsAndCapacities.1.member.desiredInstanceCount' failed to satisfy constraint: Member must have value less than or equal to 1000"}},
		{"eleven variants", func() error {
			vs := make([]smtypes.ProductionVariant, 11)
			for i := range vs {
				vs[i] = variant(string(rune('a'+i)), 1)
			}
			_, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("many"), ProductionVariants: vs})
			return err
		}, []string{"1 validation error detected", "at 'productionVariants' failed to satisfy constraint: Member must have length less than or equal to 10"}},
	}
	for _, tc := range sdk {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := apiCode(tc.call())
			if code != "ValidationException" {
				t.Fatalf("code %q (%s), want ValidationException", code, msg)
			}
			for _, p := range tc.wantParts {
				if !strings.Contains(msg, p) {
					t.Fatalf("message %q lacks %q", msg, p)
				}
			}
		})
	}

	maxInt64 := "9223372036854775807"
	raw := []struct {
		name, op, body, code, want string
	}{
		{"two MaxInt64 variants", "CreateEndpointConfig", `{"EndpointConfigName":"wrap","ProductionVariants":[` +
			`{"VariantName":"a","ModelName":"m1","InstanceType":"ml.g5.xlarge","InitialInstanceCount":` + maxInt64 + `},` +
			`{"VariantName":"b","ModelName":"m1","InstanceType":"ml.g5.xlarge","InitialInstanceCount":` + maxInt64 + `}]}`,
			"ValidationException", "Value '9223372036854775807' at 'productionVariants.1.member.initialInstanceCount'"},
		{"desired count MaxInt64", "UpdateEndpointWeightsAndCapacities", `{"EndpointName":"ep","DesiredWeightsAndCapacities":` +
			`[{"VariantName":"AllTraffic","DesiredInstanceCount":` + maxInt64 + `}]}`,
			"ValidationException", "desiredWeightsAndCapacities.1.member.desiredInstanceCount"},
		{"count past int64", "CreateEndpointConfig", `{"EndpointConfigName":"x","ProductionVariants":[` +
			`{"VariantName":"a","ModelName":"m1","InstanceType":"ml.g5.xlarge","InitialInstanceCount":1e30}]}`, "SerializationException", ""},
		{"timestamp 1e300", "ListEndpoints", `{"CreationTimeAfter":1e300}`, "SerializationException", "out of range"},
		{"timestamp NaN", "ListEndpointConfigs", `{"CreationTimeBefore":"NaN"}`, "SerializationException", "out of range"},
		{"timestamp -Inf", "ListModels", `{"CreationTimeAfter":"-Inf"}`, "SerializationException", "out of range"},
		{"offering search in year 10000", "SearchTrainingPlanOfferings", `{"InstanceType":"ml.p5.48xlarge","InstanceCount":1,"DurationHours":24,"StartTimeAfter":253402300800}`,
			"SerializationException", "out of range"},
		{"MaxResults 0", "ListEndpoints", `{"MaxResults":0}`, "ValidationException", "at 'maxResults'"},
		{"NextToken too long", "ListEndpoints", `{"NextToken":"` + strings.Repeat("a", 8193) + `"}`, "ValidationException", "at 'nextToken'"},
	}
	for _, tc := range raw {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawCall(t, h.url, tc.op, tc.body)
			msg, _ := body["message"].(string)
			if status != http.StatusBadRequest || body["__type"] != tc.code || !strings.Contains(msg, tc.want) {
				t.Fatalf("status %d body %v, want %s containing %q", status, body, tc.code, tc.want)
			}
		})
	}

	// Nothing refused was stored, and the endpoint is untouched and deletable.
	cfgs, err := h.sm.ListEndpointConfigs(ctx, &sm.ListEndpointConfigsInput{})
	if err != nil || len(cfgs.EndpointConfigs) != 1 {
		t.Fatalf("configs after refusals: %+v, %v", cfgs, err)
	}
	out := h.waitStatus(t, "ep", smtypes.EndpointStatusInService)
	if n := aws.ToInt32(out.ProductionVariants[0].DesiredInstanceCount); n != 1 {
		t.Fatalf("desired count %d after refusals", n)
	}
	if _, err := h.sm.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String("ep")}); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteStuckEndpointWithAWSSDK: an endpoint whose replicas never become
// healthy (a ten-minute start timeout) can be deleted while Creating, and is
// gone soon after, as the EndpointDeleted waiter sees it.
func TestDeleteStuckEndpointWithAWSSDK(t *testing.T) {
	rt := fake.New(fake.Manual())
	srv, client, _ := startWithRuntime(t, rt)
	t.Cleanup(func() { srv.Stop(context.Background()) })
	ctx := context.Background()
	h := &harness{sm: client}
	h.setup(t, "m1", "c1", 2)
	if _, err := client.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("stuck"), EndpointConfigName: aws.String("c1")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(rt.Starts()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("replicas never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.waitStatus(t, "stuck", smtypes.EndpointStatusCreating)
	if _, err := client.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String("stuck")}); err != nil {
		t.Fatalf("DeleteEndpoint while Creating: %v", err)
	}
	for {
		_, err := client.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("stuck")})
		if code, _ := apiCode(err); code == "ValidationException" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint still there: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if running := rt.Running(); len(running) != 0 {
		t.Fatalf("replicas still running: %v", running)
	}
}

// blockingRuntime's Start never returns until released, ignoring its
// context: a runtime call stuck in a way the controller cannot interrupt.
type blockingRuntime struct {
	*fake.Runtime
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (r *blockingRuntime) Start(_ context.Context, spec runtime.ReplicaSpec) error {
	r.once.Do(func() { close(r.started) })
	<-r.release
	return nil
}

// TestStopIsBoundedWhileAControllerIsStuck: Stop returns within its bound
// (here the caller's shorter deadline) even though the endpoint controller
// is blocked inside a runtime call.
func TestStopIsBoundedWhileAControllerIsStuck(t *testing.T) {
	rt := &blockingRuntime{Runtime: fake.New(), started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(rt.release) })
	srv, client, _ := startWithRuntime(t, rt)
	h := &harness{sm: client}
	h.setup(t, "m1", "c1", 1)
	if _, err := client.CreateEndpoint(context.Background(), &sm.CreateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("c1")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller never called Start")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	begin := time.Now()
	done := make(chan struct{})
	go func() {
		srv.Stop(ctx)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(StopTimeout):
		t.Fatalf("Stop did not return within %s", StopTimeout)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("Stop took %s with a 1 s deadline", d)
	}
}
