package sagemaker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/tagging"
)

// fuzzEnv is a control API over a real service, capacity calendar and
// endpoint controller (with the fake runtime) on a fresh store.
type fuzzEnv struct {
	api  *API
	st   *store.Store
	svc  *endpoint.Service
	ctrl *endpoint.Controller
	clk  *clock.Fake
	fl   fleet.Capacity
	ops  []string
}

func newFuzzEnv(t *testing.T) *fuzzEnv {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cat := catalog.Default()
	fl := fleet.Capacity{"ml.g5.xlarge": {"a": 2, "b": 2}, "ml.p5.48xlarge": {"a": 4}}
	cal, err := capacity.New(st, cat, clk, fl)
	if err != nil {
		t.Fatal(err)
	}
	svc := endpoint.NewService(st, cal, cat, clk, quiet)
	svc.SetReservations(cal)
	eng := serving.New(serving.Options{Runtime: fake.New(fake.WithClock(clk)), Router: gateway.New(gateway.Options{Clock: clk}), Logger: quiet, DrainTimeout: time.Millisecond})
	ctrl := endpoint.NewController(st, cal, eng, clk, quiet,
		endpoint.Options{StartTimeout: time.Minute, Reservations: cal})
	tags := tagging.New(st, tagging.Options{Region: "eu-west-1", AccountID: "123456789012", Resolvers: tagging.Resolvers()})
	api := NewAPI(svc, Options{AccountID: "123456789012", Region: "eu-west-1", Catalog: cat, Capacity: cal, Logger: quiet, Tags: tags})
	return &fuzzEnv{api: api, st: st, svc: svc, ctrl: ctrl, clk: clk, fl: fl, ops: opNames()}
}

// opNames are the operations the API serves, in order, and one it does not.
func opNames() []string {
	api := NewAPI(nil, Options{})
	ops := make([]string, 0, len(api.h.Ops)+1)
	for op := range api.h.Ops {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return append(ops, "LaunchRocket")
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// call sends body as op and checks the response is AWS JSON 1.1: a JSON
// object, and for an error a 4xx with __type (matching X-Amzn-ErrorType) and
// a message. A 5xx is a failure: every input is either served or refused.
func (e *fuzzEnv) call(t *testing.T, op string, body []byte) int {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "SageMaker."+op)
	req.Header.Set("Content-Type", awsjson.ContentType)
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: response is not a JSON object: %q", op, body, rec.Body.Bytes())
	}
	if rec.Header().Get("Content-Type") != awsjson.ContentType {
		t.Fatalf("%s: Content-Type %q", op, rec.Header().Get("Content-Type"))
	}
	switch {
	case rec.Code == http.StatusOK:
	case rec.Code >= 400 && rec.Code < 500:
		code, _ := out["__type"].(string)
		msg, _ := out["message"].(string)
		if code == "" || msg == "" || rec.Header().Get("X-Amzn-ErrorType") != code {
			t.Fatalf("%s %s: error shape %v (header %q)", op, body, out, rec.Header().Get("X-Amzn-ErrorType"))
		}
	default:
		t.Fatalf("%s %s: status %d: %v", op, body, rec.Code, out)
	}
	return rec.Code
}

// reconcile drives every endpoint as the controller's loop would.
func (e *fuzzEnv) reconcile(t *testing.T) {
	eps, err := e.svc.ListEndpoints(context.Background())
	if err != nil {
		t.Fatalf("list endpoints: %v", err)
	}
	for _, ep := range eps {
		_ = e.ctrl.Reconcile(context.Background(), ep.Name)
	}
}

// check asserts the stored state's invariants: records decode, counts and
// weights are within the caps, and no capacity allocation is negative or
// beyond what the fleet or a plan has.
func (e *fuzzEnv) check(t *testing.T) {
	err := e.st.View(func(tx *store.Tx) error {
		if _, err := store.List[endpoint.Model](tx, endpoint.KindModel); err != nil {
			return fmt.Errorf("models: %w", err)
		}
		cfgs, err := store.List[endpoint.EndpointConfig](tx, endpoint.KindConfig)
		if err != nil {
			return fmt.Errorf("configs: %w", err)
		}
		for _, c := range cfgs {
			if n := len(c.ProductionVariants); n < 1 || n > endpoint.MaxVariants {
				return fmt.Errorf("config %s has %d variants", c.Name, n)
			}
			for _, v := range c.ProductionVariants {
				if v.InitialInstanceCount < 1 || v.InitialInstanceCount > endpoint.MaxInstancesPerVariant {
					return fmt.Errorf("config %s variant %s count %d", c.Name, v.VariantName, v.InitialInstanceCount)
				}
				if w := v.Weight(); !(w >= 0) || math.IsInf(w, 0) {
					return fmt.Errorf("config %s variant %s weight %v", c.Name, v.VariantName, w)
				}
			}
		}
		eps, err := store.List[endpoint.Endpoint](tx, endpoint.KindEndpoint)
		if err != nil {
			return fmt.Errorf("endpoints: %w", err)
		}
		for _, ep := range eps {
			for _, d := range []*endpoint.Deployment{ep.Current, ep.Pending} {
				if d == nil {
					continue
				}
				for _, v := range d.Variants {
					if v.DesiredCount < 0 || v.DesiredCount > endpoint.MaxInstancesPerVariant || len(v.Replicas) > endpoint.MaxInstancesPerVariant {
						return fmt.Errorf("endpoint %s variant %s desired %d replicas %d", ep.Name, v.Name, v.DesiredCount, len(v.Replicas))
					}
					if !(v.DesiredWeight >= 0) || math.IsInf(v.DesiredWeight, 0) || !(v.Weight >= 0) || math.IsInf(v.Weight, 0) {
						return fmt.Errorf("endpoint %s variant %s weights %v/%v", ep.Name, v.Name, v.Weight, v.DesiredWeight)
					}
				}
			}
		}
		plans, err := store.List[capacity.Plan](tx, capacity.KindPlans)
		if err != nil {
			return fmt.Errorf("plans: %w", err)
		}
		total := map[string]int{}
		for _, p := range plans {
			total[p.Key] = p.Total()
			if p.Total() < 0 || p.Total() > capacity.MaxPlanInstances {
				return fmt.Errorf("plan %s has %d instances", p.Name, p.Total())
			}
		}
		hs, err := store.List[capacity.Holding](tx, capacity.KindHoldings)
		if err != nil {
			return fmt.Errorf("holdings: %w", err)
		}
		onDemand, reserved := map[string]map[string]int{}, map[string]int{}
		for _, h := range hs {
			for typ, zs := range h.Instances {
				for z, n := range zs {
					if n < 0 {
						return fmt.Errorf("%s holds %d of %s in %s", h.Owner, n, typ, z)
					}
					if onDemand[typ] == nil {
						onDemand[typ] = map[string]int{}
					}
					onDemand[typ][z] += n
				}
			}
			for k, n := range h.Plans {
				if n < 0 {
					return fmt.Errorf("%s holds %d of plan %s", h.Owner, n, k)
				}
				reserved[k] += n
			}
		}
		for typ, zs := range onDemand {
			for z, n := range zs {
				if n > e.fl[typ][z] {
					return fmt.Errorf("%d of %s held in %s, the fleet has %d", n, typ, z, e.fl[typ][z])
				}
			}
		}
		for k, n := range reserved {
			if n > total[k] {
				return fmt.Errorf("%d of plan %s held, it has %d", n, k, total[k])
			}
		}
		// Every changed tag set belongs to a record that exists and is
		// within the limit.
		return tx.Each(tagging.KindTags, func(id string, raw []byte) error {
			var set struct{ Tags []tagging.Tag }
			if err := json.Unmarshal(raw, &set); err != nil || len(set.Tags) > tagging.MaxTags {
				return fmt.Errorf("tag set %s: %d tags, %v", id, len(set.Tags), err)
			}
			bucket, key, _ := strings.Cut(id, "/")
			if !tx.Exists(bucket, key) {
				return fmt.Errorf("tag set %s outlived its resource", id)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deleteAll checks that every endpoint, whatever its state, can be deleted
// and is gone after a reconcile, with all its capacity released.
func (e *fuzzEnv) deleteAll(t *testing.T) {
	eps, err := e.svc.ListEndpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		body, _ := json.Marshal(map[string]string{"EndpointName": ep.Name})
		if code := e.call(t, "DeleteEndpoint", body); code != http.StatusOK {
			t.Fatalf("DeleteEndpoint %s in state %s: status %d", ep.Name, ep.Status, code)
		}
	}
	e.reconcile(t)
	if eps, _ := e.svc.ListEndpoints(context.Background()); len(eps) != 0 {
		t.Fatalf("%d endpoints survive deletion (first: %s, %s)", len(eps), eps[0].Name, eps[0].Status)
	}
	_ = e.st.View(func(tx *store.Tx) error {
		if hs, _ := store.List[capacity.Holding](tx, capacity.KindHoldings); len(hs) != 0 {
			t.Fatalf("capacity still held after every endpoint was deleted: %+v", hs)
		}
		return nil
	})
}

// fuzzPrelude leaves a model, a config and an InService endpoint for the
// fuzzed operations to act on.
var fuzzPrelude = []struct{ op, body string }{
	{"CreateModel", `{"ModelName":"m","PrimaryContainer":{"Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}}`},
	{"CreateEndpointConfig", `{"EndpointConfigName":"c","ProductionVariants":[{"VariantName":"v","ModelName":"m","InstanceType":"ml.g5.xlarge","InitialInstanceCount":1}]}`},
	{"CreateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"c"}`},
}

// FuzzDispatch feeds fuzzed operations and bodies to the SageMaker JSON 1.1
// dispatcher, three per input after a fixed prelude, reconciling after each,
// and checks the response shape and the stored state's invariants.
func FuzzDispatch(f *testing.F) {
	var seeds [][2]string
	for _, p := range fuzzPrelude {
		seeds = append(seeds, [2]string{p.op, p.body})
	}
	seeds = append(seeds,
		[2]string{"CreateEndpointConfig", `{"EndpointConfigName":"wrap","ProductionVariants":[{"VariantName":"a","ModelName":"m","InstanceType":"ml.g5.xlarge","InitialInstanceCount":9223372036854775807},{"VariantName":"b","ModelName":"m","InstanceType":"ml.g5.xlarge","InitialInstanceCount":9223372036854775807}]}`},
		[2]string{"UpdateEndpointWeightsAndCapacities", `{"EndpointName":"ep","DesiredWeightsAndCapacities":[{"VariantName":"v","DesiredInstanceCount":9223372036854775807}]}`},
		[2]string{"UpdateEndpointWeightsAndCapacities", `{"EndpointName":"ep","DesiredWeightsAndCapacities":[{"VariantName":"v","DesiredWeight":1e308,"DesiredInstanceCount":2}]}`},
		[2]string{"UpdateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"c"}`},
		[2]string{"UpdateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"c","DeploymentConfig":{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"CAPACITY_PERCENT","Value":50},"WaitIntervalInSeconds":0,"RollbackMaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1}}}}`},
		[2]string{"UpdateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"c","RetainDeploymentConfig":true,"DeploymentConfig":{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"CANARY","WaitIntervalInSeconds":60,"CanarySize":{"Type":"INSTANCE_COUNT","Value":1}},"TerminationWaitInSeconds":0}}}`},
		[2]string{"DeleteEndpoint", `{"EndpointName":"ep"}`},
		[2]string{"ListEndpoints", `{"CreationTimeAfter":1e300}`},
		[2]string{"ListEndpointConfigs", `{"CreationTimeBefore":"NaN","MaxResults":100,"NextToken":"eyJvIjo1fQ"}`},
		[2]string{"SearchTrainingPlanOfferings", `{"InstanceType":"ml.p5.48xlarge","InstanceCount":2,"DurationHours":24,"TargetResources":["endpoint"]}`},
		[2]string{"SearchTrainingPlanOfferings", `{"InstanceType":"ml.p5.48xlarge","InstanceCount":256,"DurationHours":87600,"StartTimeAfter":253402300799}`},
		[2]string{"ListTrainingPlans", `{"MaxResults":1,"Filters":[{"Name":"Status","Value":"Active"}]}`},
		[2]string{"AddTags", `{"ResourceArn":"arn:aws:sagemaker:eu-west-1:123456789012:model/m","Tags":[{"Key":"k","Value":"v"},{"Key":"é:/=+-@_. ","Value":""}]}`},
		[2]string{"AddTags", `{"ResourceArn":"arn:aws:sagemaker:eu-west-1:123456789012:endpoint/ep","Tags":[{"Key":"aws:k","Value":"v"}]}`},
		[2]string{"ListTags", `{"ResourceArn":"arn:aws:sagemaker:eu-west-1:123456789012:endpoint-config/c","MaxResults":9223372036854775807,"NextToken":"eyJvIjo1fQ"}`},
		[2]string{"DeleteTags", `{"ResourceArn":"arn:aws:sagemaker:eu-west-1:123456789012:endpoint/ep","TagKeys":["k"]}`},
	)
	// Valid requests of the golden tests, and their error cases.
	seeds = append(seeds,
		[2]string{"CreateModel", `{"ModelName":"My-Model","PrimaryContainer":{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}},"ExecutionRoleArn":"arn:aws:iam::123456789012:role/r"}`},
		[2]string{"CreateEndpointConfig", `{"EndpointConfigName":"cfg","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.g5.xlarge","InitialInstanceCount":2,"InitialVariantWeight":0.5,"RoutingConfig":{"RoutingStrategy":"RANDOM"}}]}`},
		[2]string{"CreateEndpointConfig", `{"EndpointConfigName":"x_y","ProductionVariants":[{"VariantName":"v","ModelName":"My-Model","InstanceType":"ml.nope","InitialInstanceCount":0,"InitialVariantWeight":-1}]}`},
		[2]string{"CreateEndpoint", `{"EndpointName":"Ep-1","EndpointConfigName":"cfg","Tags":[{"Key":"k","Value":"v"}]}`},
		[2]string{"DescribeEndpoint", `{"EndpointName":"ep"}`},
		[2]string{"DescribeEndpointConfig", `{"EndpointConfigName":"c"}`},
		[2]string{"ListEndpoints", `{"MaxResults":5,"SortBy":"Name","SortOrder":"Ascending","NameContains":"e","StatusEquals":"InService"}`},
		[2]string{"ListModels", `{}`},
		[2]string{"DeleteEndpointConfig", `{"EndpointConfigName":"c"}`},
		[2]string{"DeleteModel", `{"ModelName":"m"}`},
		[2]string{"CreateTrainingPlan", `{"TrainingPlanName":"plan","TrainingPlanOfferingId":"tpo-0"}`},
		[2]string{"DescribeTrainingPlan", `{"TrainingPlanName":"plan"}`},
		[2]string{"CreateEndpointConfig", `{"EndpointConfigName":"r","ProductionVariants":[{"VariantName":"v","ModelName":"m","InstanceType":"ml.p5.48xlarge","InitialInstanceCount":1,"CapacityReservationConfig":{"CapacityReservationPreference":"capacity-reservations-only","MlReservationArn":"arn:aws:sagemaker:eu-west-1:123456789012:training-plan/plan"}}]}`},
	)
	opIndex := func(ops []string, op string) uint8 {
		if i := slices.Index(ops, op); i >= 0 {
			return uint8(i)
		}
		return uint8(len(ops) - 1)
	}
	ops := opNames()
	for i, s := range seeds {
		n := seeds[(i+1)%len(seeds)]
		m := seeds[(i+2)%len(seeds)]
		f.Add(opIndex(ops, s[0]), []byte(s[1]), opIndex(ops, n[0]), []byte(n[1]), opIndex(ops, m[0]), []byte(m[1]))
	}
	f.Fuzz(func(t *testing.T, op1 uint8, body1 []byte, op2 uint8, body2 []byte, op3 uint8, body3 []byte) {
		e := newFuzzEnv(t)
		for _, p := range fuzzPrelude {
			if code := e.call(t, p.op, []byte(p.body)); code != http.StatusOK {
				t.Fatalf("prelude %s: %d", p.op, code)
			}
		}
		e.reconcile(t)
		for _, step := range []struct {
			op   uint8
			body []byte
		}{{op1, body1}, {op2, body2}, {op3, body3}} {
			e.call(t, e.ops[int(step.op)%len(e.ops)], step.body)
			e.clk.Step(time.Minute)
			e.reconcile(t)
			e.check(t)
		}
		e.deleteAll(t)
	})
}
