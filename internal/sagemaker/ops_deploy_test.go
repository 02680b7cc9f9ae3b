package sagemaker

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/alarm"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// knownAlarms is the alarm check UpdateEndpoint makes, over a real
// evaluator defining one alarm, "high-errors".
type knownAlarms struct{ ev *alarm.Evaluator }

func (k knownAlarms) Known(names []string) error { return k.ev.Known(names) }
func (k knownAlarms) Arm(string, []string) (endpoint.AlarmWatch, error) {
	return nil, errors.New("not armed in this test")
}

func newDeployAPI(t *testing.T) *httptest.Server {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cat := catalog.Default()
	svc := endpoint.NewService(st, fleet.New(fleet.Default(cat)), cat, clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), nil)
	ev, err := alarm.NewEvaluator(prometheus.NewRegistry(), []alarm.Alarm{{Name: "high-errors",
		Metric: "capstan_gateway_requests_total", Comparison: "GreaterThanThreshold", Threshold: 5}})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetAlarms(knownAlarms{ev})
	srv := httptest.NewServer(NewAPI(svc, Options{AccountID: "123456789012", Region: "eu-west-1", Catalog: cat}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDeploymentConfigValidation: UpdateEndpoint checks DeploymentConfig
// as SageMaker does, naming each member by its wire path; a valid config
// gets as far as the (missing) endpoint.
func TestDeploymentConfigValidation(t *testing.T) {
	srv := newDeployAPI(t)
	const passed = `Could not find endpoint "arn:aws:sagemaker:eu-west-1:123456789012:endpoint/ep"`
	const rolling = `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0}}`
	tests := []struct {
		name, config string
		code, want   string // want: the whole message when it starts with "1 validation", else a part of it
	}{
		{"rolling", rolling, CodeValidation, passed},
		{"null", `null`, CodeValidation, passed},
		{"alarms only", `{"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"high-errors"}]}}`, CodeValidation, passed},
		{"canary", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"CANARY","WaitIntervalInSeconds":600,"CanarySize":{"Type":"CAPACITY_PERCENT","Value":10}},"TerminationWaitInSeconds":120,"MaximumExecutionTimeoutInSeconds":1800}}`, CodeValidation, passed},
		{"batch type", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"BATCH","Value":1},"WaitIntervalInSeconds":0}}`, CodeValidation,
			"1 validation error detected: Value 'BATCH' at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.type' failed to satisfy constraint: Member must satisfy enum value set: [INSTANCE_COUNT, CAPACITY_PERCENT]"},
		{"rolling requires", `{"RollingUpdatePolicy":{}}`, CodeValidation,
			"2 validation errors detected: Value null at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize' failed to satisfy constraint: Member must not be null; Value null at 'deploymentConfig.rollingUpdatePolicy.waitIntervalInSeconds' failed to satisfy constraint: Member must not be null"},
		{"size requires", `{"RollingUpdatePolicy":{"MaximumBatchSize":{},"WaitIntervalInSeconds":0}}`, CodeValidation,
			"Value null at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.type' failed to satisfy constraint: Member must not be null; Value null at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.value'"},
		{"rolling wait", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":3601}}`, CodeValidation,
			"1 validation error detected: Value '3601' at 'deploymentConfig.rollingUpdatePolicy.waitIntervalInSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600"},
		{"rolling timeout low", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0,"MaximumExecutionTimeoutInSeconds":599}}`, CodeValidation,
			"1 validation error detected: Value '599' at 'deploymentConfig.rollingUpdatePolicy.maximumExecutionTimeoutInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 600"},
		{"rolling timeout high", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0,"MaximumExecutionTimeoutInSeconds":28801}}`, CodeValidation,
			"at 'deploymentConfig.rollingUpdatePolicy.maximumExecutionTimeoutInSeconds' failed to satisfy constraint: Member must have value less than or equal to 28800"},
		{"rollback batch", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0,"RollbackMaximumBatchSize":{"Type":"CAPACITY_PERCENT","Value":101}}}`, CodeValidation,
			"1 validation error detected: Value '101' at 'deploymentConfig.rollingUpdatePolicy.rollbackMaximumBatchSize.value' failed to satisfy constraint: Member must have value less than or equal to 100"},
		{"size zero", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":0},"WaitIntervalInSeconds":0}}`, CodeValidation,
			"1 validation error detected: Value '0' at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.value' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"both policies", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":0}},"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0}}`, CodeValidation,
			"1 validation error detected: Value 'BlueGreenUpdatePolicy, RollingUpdatePolicy' at 'deploymentConfig' failed to satisfy constraint: Only one update policy may be set: BlueGreenUpdatePolicy or RollingUpdatePolicy"},
		{"blue/green requires routing", `{"BlueGreenUpdatePolicy":{}}`, CodeValidation,
			"1 validation error detected: Value null at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration' failed to satisfy constraint: Member must not be null"},
		{"traffic type", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"BLUE","WaitIntervalInSeconds":0}}}`, CodeValidation,
			"1 validation error detected: Value 'BLUE' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.type' failed to satisfy constraint: Member must satisfy enum value set: [ALL_AT_ONCE, CANARY, LINEAR]"},
		{"routing wait required", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"ALL_AT_ONCE"}}}`, CodeValidation,
			"1 validation error detected: Value null at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.waitIntervalInSeconds' failed to satisfy constraint: Member must not be null"},
		{"canary needs size", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"CANARY","WaitIntervalInSeconds":0}}}`, CodeValidation,
			"1 validation error detected: Value 'null' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.canarySize' failed to satisfy constraint: Member must be set when Type is CANARY"},
		{"linear needs step", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"LINEAR","WaitIntervalInSeconds":0}}}`, CodeValidation,
			"at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.linearStepSize' failed to satisfy constraint: Member must be set when Type is LINEAR"},
		{"step without linear", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":0,"LinearStepSize":{"Type":"INSTANCE_COUNT","Value":1}}}}`, CodeValidation,
			"1 validation error detected: Value 'ALL_AT_ONCE' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.linearStepSize' failed to satisfy constraint: Member may be set only when Type is LINEAR"},
		{"canary size on linear", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"LINEAR","WaitIntervalInSeconds":0,"LinearStepSize":{"Type":"INSTANCE_COUNT","Value":1},"CanarySize":{"Type":"INSTANCE_COUNT","Value":1}}}}`, CodeValidation,
			"at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.canarySize' failed to satisfy constraint: Member may be set only when Type is CANARY"},
		{"termination wait", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":0},"TerminationWaitInSeconds":3601}}`, CodeValidation,
			"1 validation error detected: Value '3601' at 'deploymentConfig.blueGreenUpdatePolicy.terminationWaitInSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600"},
		{"blue/green timeout", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":0},"MaximumExecutionTimeoutInSeconds":14401}}`, CodeValidation,
			"1 validation error detected: Value '14401' at 'deploymentConfig.blueGreenUpdatePolicy.maximumExecutionTimeoutInSeconds' failed to satisfy constraint: Member must have value less than or equal to 14400"},
		{"no alarms", `{"AutoRollbackConfiguration":{"Alarms":[]}}`, CodeValidation,
			"1 validation error detected: Value '[0 items]' at 'deploymentConfig.autoRollbackConfiguration.alarms' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"eleven alarms", `{"AutoRollbackConfiguration":{"Alarms":[` + strings.Repeat(`{"AlarmName":"a"},`, 10) + `{"AlarmName":"a"}]}}`, CodeValidation,
			"at 'deploymentConfig.autoRollbackConfiguration.alarms' failed to satisfy constraint: Member must have length less than or equal to 10"},
		{"blank alarm name", `{"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"high-errors"},{"AlarmName":"  "}]}}`, CodeValidation,
			"1 validation error detected: Value '  ' at 'deploymentConfig.autoRollbackConfiguration.alarms.2.member.alarmName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^(?!\\s*$).+"},
		{"unknown alarm", `{"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"high-errors"},{"AlarmName":"nope"}]}}`, CodeValidation,
			"1 validation error detected: Value 'nope' at 'deploymentConfig.autoRollbackConfiguration.alarms' failed to satisfy constraint: Member must name alarms defined in the server's configuration (the alarms list of capstan.yaml); not defined: nope"},
		{"unknown top member", `{"Strategy":"rolling"}`, CodeValidation,
			`1 validation error detected: Value '"rolling"' at 'deploymentConfig.Strategy' failed to satisfy constraint: Member is not recognized; the members here are BlueGreenUpdatePolicy, RollingUpdatePolicy, AutoRollbackConfiguration`},
		{"unknown nested member", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1,"Unit":"x"},"WaitIntervalInSeconds":0}}`, CodeValidation,
			`1 validation error detected: Value '"x"' at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.Unit' failed to satisfy constraint: Member is not recognized; the members here are Type, Value`},
		{"unknown member in a list", `{"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"high-errors"},{"Name":"x"}]}}`, CodeValidation,
			`at 'deploymentConfig.autoRollbackConfiguration.alarms.2.member.Name' failed to satisfy constraint: Member is not recognized; the members here are AlarmName`},
		{"wrong type", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":"1"},"WaitIntervalInSeconds":0}}`, CodeSerialization, "Could not parse the request body"},
		// Past the wire's bounds, the domain's: capstan caps a batch at 1000
		// instances, and a linear step at half the capacity.
		{"domain batch cap", `{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":2000},"WaitIntervalInSeconds":0}}`, CodeValidation,
			"1 validation error detected: Value at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.value' failed to satisfy constraint: must be between 1 and 1000 instances, got 2000"},
		{"domain linear step", `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"LINEAR","WaitIntervalInSeconds":0,"LinearStepSize":{"Type":"CAPACITY_PERCENT","Value":60}}}}`, CodeValidation,
			"1 validation error detected: Value at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.linearStepSize.value' failed to satisfy constraint: a linear step may be at most 50 percent, got 60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, raw := call(t, srv.URL, "UpdateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"cfg","DeploymentConfig":`+tt.config+`}`)
			var e struct {
				Type    string `json:"__type"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(raw, &e); err != nil || status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", status, raw)
			}
			if e.Type != tt.code || hdr.Get("X-Amzn-ErrorType") != tt.code {
				t.Fatalf("code %s, want %s: %s", e.Type, tt.code, e.Message)
			}
			if strings.HasPrefix(tt.want, "1 validation") && e.Message != tt.want || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("message\n got %s\nwant %s", e.Message, tt.want)
			}
		})
	}
	t.Run("with the request's other violations", func(t *testing.T) {
		_, _, raw := call(t, srv.URL, "UpdateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"x_y","DeploymentConfig":`+
			`{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":-1}}}`)
		want := "2 validation errors detected: Value 'x_y' at 'endpointConfigName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}; " +
			"Value '-1' at 'deploymentConfig.rollingUpdatePolicy.waitIntervalInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 0"
		if !strings.Contains(string(raw), want) {
			t.Fatalf("%s\nwant %s", raw, want)
		}
	})
}

// checkedDeploymentConfig decodes and checks raw as UpdateEndpoint does.
func checkedDeploymentConfig(raw []byte) (*deploymentConfig, error) {
	var ve validationError
	c, err := decodeDeploymentConfig(raw, &ve)
	if err == nil {
		err = ve.Err()
	}
	return c, err
}

// TestDeploymentConfigRoundTrip: a policy shown as LastDeploymentConfig
// reads back as the same policy, and a complete DeploymentConfig is shown
// as it was given.
func TestDeploymentConfigRoundTrip(t *testing.T) {
	pct := serving.Size{Unit: serving.Percent, Value: 25}
	policies := []serving.Policy{
		{BlueGreen: &serving.BlueGreen{Traffic: serving.AllAtOnce}},
		{BlueGreen: &serving.BlueGreen{Traffic: serving.Canary, Step: serving.Size{Unit: serving.Instances, Value: 1}, Wait: 10 * time.Minute,
			TerminationWait: time.Minute}, MaxDuration: 30 * time.Minute, Alarms: []string{"high-errors", "slow-p99"}},
		{BlueGreen: &serving.BlueGreen{Traffic: serving.Linear, Step: pct, Wait: time.Second}},
		{Rolling: &serving.Rolling{Batch: serving.Size{Unit: serving.Instances, Value: 1}}},
		{Rolling: &serving.Rolling{Batch: pct, Wait: 5 * time.Minute, RollbackBatch: &serving.Size{Unit: serving.Percent, Value: 100}},
			MaxDuration: 8 * time.Hour, Alarms: []string{"high-errors"}},
		{Alarms: []string{"high-errors"}},
	}
	for _, p := range policies {
		raw, err := json.Marshal(wireDeploymentConfig(&p))
		if err != nil {
			t.Fatal(err)
		}
		c, err := checkedDeploymentConfig(raw)
		if err != nil {
			t.Fatalf("%s does not read back: %v", raw, err)
		}
		if got := c.policy(); !reflect.DeepEqual(got, p) {
			t.Fatalf("%s reads back as %+v, want %+v", raw, got, p)
		}
	}
	if c := wireDeploymentConfig(&serving.Policy{}); c != nil {
		t.Fatalf("the zero policy (an update without DeploymentConfig) is shown as %+v", c)
	}
	for _, in := range []string{
		`{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"LINEAR","WaitIntervalInSeconds":60,"LinearStepSize":{"Type":"CAPACITY_PERCENT","Value":20}},"TerminationWaitInSeconds":300,"MaximumExecutionTimeoutInSeconds":3600},"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"high-errors"}]}}`,
		`{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0,"MaximumExecutionTimeoutInSeconds":1800,"RollbackMaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":2}}}`,
	} {
		c, err := checkedDeploymentConfig(json.RawMessage(in))
		if err != nil {
			t.Fatal(err)
		}
		p := c.policy()
		out, _ := json.Marshal(wireDeploymentConfig(&p))
		if string(out) != in {
			t.Fatalf("shown as\n%s\nwant\n%s", out, in)
		}
	}
}

// TestPendingSummary: PendingDeploymentSummary counts each new variant's
// instances and names the rollout's phase.
func TestPendingSummary(t *testing.T) {
	a := NewAPI(nil, Options{})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	step := start.Add(time.Minute)
	rolling := serving.Policy{Rolling: &serving.Rolling{Batch: serving.Size{Unit: serving.Instances, Value: 1}}}
	tests := []struct {
		name    string
		rollout *endpoint.Rollout
		share   float64
		want    variantStatus
		weight  *float64
	}{
		{"blue/green coming up", &endpoint.Rollout{}, 0, variantStatus{Status: "Creating", StartTime: &Epoch{Time: start}}, ptr(0.0)},
		{"canary baking", &endpoint.Rollout{}, 0.25, variantStatus{Status: "Baking", StartTime: &Epoch{Time: step}}, ptr(0.5)},
		{"rolling", &endpoint.Rollout{Policy: rolling}, 0, variantStatus{Status: "Updating", StartTime: &Epoch{Time: start}}, nil},
		{"rolling back", &endpoint.Rollout{Policy: rolling, RollingBack: true, Reason: "alarm fired"}, 0,
			variantStatus{Status: "Deleting", StatusMessage: "Rolling back: alarm fired"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := endpoint.Endpoint{Status: endpoint.StatusUpdating, Rollout: tt.rollout, Pending: &endpoint.Deployment{ConfigName: "cfg2", StartTime: start,
				Variants: []endpoint.VariantState{{Name: "AllTraffic", InstanceType: "ml.g5.xlarge", DesiredWeight: 2, DesiredCount: 4,
					Replicas: []string{"a", "b"}, Share: tt.share, StepAt: step}}}}
			ps := a.pending(ep)
			if ps.EndpointConfigName != "cfg2" || !ps.StartTime.Equal(start) || len(ps.ProductionVariants) != 1 {
				t.Fatalf("%+v", ps)
			}
			v := ps.ProductionVariants[0]
			if *v.CurrentInstanceCount != 2 || *v.DesiredInstanceCount != 4 || v.InstanceType != "ml.g5.xlarge" || *v.DesiredWeight != 2 {
				t.Fatalf("counts %+v", v)
			}
			if !reflect.DeepEqual(v.VariantStatus, []variantStatus{tt.want}) {
				t.Fatalf("VariantStatus %+v, want %+v", v.VariantStatus, tt.want)
			}
			if !reflect.DeepEqual(v.CurrentWeight, tt.weight) {
				t.Fatalf("CurrentWeight %v, want %v", v.CurrentWeight, tt.weight)
			}
		})
	}
}

// TestUpdateCapacityErrorWire: a blue/green update that does not fit says
// what is free and how to update in place instead.
func TestUpdateCapacityErrorWire(t *testing.T) {
	a := NewAPI(nil, Options{})
	hint := ` Update with --deployment-config '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0}}' to replace instances in place, or use a configuration that fits.`
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"plan", &endpoint.UpdateCapacityError{Endpoint: "Ep", Serving: 1, Needed: 1,
			Err: &placement.LimitError{Plan: placement.PlanNamed("p"), Name: "p", Requested: 2, Available: 1, Total: 1}},
			"Cannot update endpoint arn:aws:sagemaker:us-east-1:000000000000:endpoint/ep with a blue/green deployment: the new configuration needs 1 instance(s) of training plan p beside the 1 serving, and the plan has 0 free (1 in total)." + hint},
		{"plan gone", &endpoint.UpdateCapacityError{Endpoint: "ep", Serving: 1, Needed: 1, Err: &placement.LimitError{Name: "p", Requested: 1}},
			"Training plan p does not exist or has expired."},
		{"fleet", &policyError{err: &endpoint.UpdateCapacityError{Endpoint: "ep", Serving: 2, Needed: 2,
			Err: &fleet.LimitError{InstanceType: "ml.g5.xlarge", Requested: 4, Available: 3, Total: 4}}},
			"Cannot update endpoint arn:aws:sagemaker:us-east-1:000000000000:endpoint/ep with a blue/green deployment: the new configuration needs 2 ml.g5.xlarge instance(s) beside the 2 serving, and the account limit of 4 ml.g5.xlarge instances leaves 1 free." + hint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			we := a.toWire(tt.err)
			if we.Code != CodeValidation || we.Message != tt.want {
				t.Fatalf("%s: %s\nwant %s", we.Code, we.Message, tt.want)
			}
		})
	}
}

// TestDocsDeploymentConfigs: every DeploymentConfig in docs/deployments.md
// (its ```json blocks) is valid.
func TestDocsDeploymentConfigs(t *testing.T) {
	raw, err := os.ReadFile("../../docs/deployments.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(raw, -1)
	if len(blocks) < 4 {
		t.Fatalf("docs/deployments.md has %d json blocks; want one per kind of update", len(blocks))
	}
	for _, b := range blocks {
		if _, err := checkedDeploymentConfig(b[1]); err != nil {
			t.Errorf("%s: %v", b[1], err)
		}
	}
}
