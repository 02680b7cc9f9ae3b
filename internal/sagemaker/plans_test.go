package sagemaker

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson/awsjsontest"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/store"
)

func newPlansAPI(t *testing.T) (*httptest.Server, *clock.Fake) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cat := catalog.Default()
	cal, err := capacity.New(st, cat, clk, fleet.Default(cat))
	if err != nil {
		t.Fatal(err)
	}
	svc := endpoint.NewService(st, cal, cat, clk, nil)
	svc.SetReservations(cal)
	srv := httptest.NewServer(NewAPI(svc, Options{AccountID: "123456789012", Region: "eu-west-1", Catalog: cat, Capacity: cal}))
	t.Cleanup(srv.Close)
	return srv, clk
}

// TestTrainingPlanWireGolden pins the training-plan operations' JSON.
func TestTrainingPlanWireGolden(t *testing.T) {
	srv, clk := newPlansAPI(t)
	now := clk.Now()
	search := fmt.Sprintf(`{"TargetResources":["endpoint"],"InstanceType":"ml.p5.48xlarge","InstanceCount":1,"DurationHours":168,"StartTimeAfter":%s,"EndTimeBefore":%s}`,
		jsonEpoch(now.Add(time.Hour)), jsonEpoch(now.Add(10*24*time.Hour)))
	st, _, raw := call(t, srv.URL, "SearchTrainingPlanOfferings", search)
	if st != 200 {
		t.Fatalf("search: %s", raw)
	}
	awsjsontest.Golden(t, "search_training_plan_offerings", raw, *update)
	var offers struct {
		TrainingPlanOfferings []struct{ TrainingPlanOfferingId string }
	}
	_ = json.Unmarshal(raw, &offers)
	id := offers.TrainingPlanOfferings[0].TrainingPlanOfferingId
	steps := []struct {
		name, op, body string
		status         int
	}{
		{"create_training_plan", "CreateTrainingPlan", `{"TrainingPlanName":"P4-For-Inference","TrainingPlanOfferingId":"` + id + `"}`, 200},
		{"describe_training_plan", "DescribeTrainingPlan", `{"TrainingPlanName":"P4-For-Inference"}`, 200},
		{"list_training_plans", "ListTrainingPlans", `{"Filters":[{"Name":"Status","Value":"Scheduled"}]}`, 200},
		{"error_plan_in_use", "CreateTrainingPlan", `{"TrainingPlanName":"p4-for-inference","TrainingPlanOfferingId":"` + id + `"}`, 400},
		{"error_plan_not_found", "DescribeTrainingPlan", `{"TrainingPlanName":"nope"}`, 400},
		{"error_offering_unknown", "CreateTrainingPlan", `{"TrainingPlanName":"x","TrainingPlanOfferingId":"tpo-123"}`, 400},
		{"error_search_validation", "SearchTrainingPlanOfferings", `{"InstanceType":"ml.g5.xlarge","InstanceCount":300,"DurationHours":87601,"TargetResources":["inference"]}`, 400},
		{"create_model_for_plan", "CreateModel", `{"ModelName":"m","PrimaryContainer":{"Environment":{"SM_MODEL_ID":"llama-3.1-8b"}}}`, 200},
		{"error_reserved_over_plan", "CreateEndpointConfig", `{"EndpointConfigName":"c2","ProductionVariants":[{"VariantName":"v","ModelName":"m","InstanceType":"ml.p5.48xlarge","InitialInstanceCount":2,"CapacityReservationConfig":{"CapacityReservationPreference":"capacity-reservations-only","MlReservationArn":"arn:aws:sagemaker:eu-west-1:123456789012:training-plan/p4-for-inference"}}]}`, 400},
		{"create_reserved_config", "CreateEndpointConfig", `{"EndpointConfigName":"c1","ProductionVariants":[{"VariantName":"v","ModelName":"m","InstanceType":"ml.p5.48xlarge","InitialInstanceCount":1,"CapacityReservationConfig":{"CapacityReservationPreference":"capacity-reservations-only","MlReservationArn":"arn:aws:sagemaker:eu-west-1:123456789012:training-plan/p4-for-inference"}}]}`, 200},
		{"create_reserved_endpoint", "CreateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"c1"}`, 200},
		{"describe_reserved_endpoint", "DescribeEndpoint", `{"EndpointName":"ep"}`, 200},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			goldenCall(t, srv.URL, s.op, s.body, s.status, s.name)
		})
	}
}

func TestSearchValidation(t *testing.T) {
	srv, clk := newPlansAPI(t)
	now := clk.Now()
	base := map[string]any{"TargetResources": []string{"endpoint"}, "InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "DurationHours": 24}
	tests := []struct {
		name   string
		change map[string]any
		want   string // "" = 200
	}{
		{"valid", nil, ""},
		{"g5 is not reservable", map[string]any{"InstanceType": "ml.g5.xlarge"}, "Member must satisfy enum value set"},
		// Training plans stay GPU-only: CPU types and Inferentia2 are refused naming the field.
		{"CPU m5 is not reservable", map[string]any{"InstanceType": "ml.m5.xlarge"}, "Value 'ml.m5.xlarge' at 'instanceType' failed to satisfy constraint: Member must satisfy enum value set"},
		{"CPU c5 is not reservable", map[string]any{"InstanceType": "ml.c5.2xlarge"}, "Value 'ml.c5.2xlarge' at 'instanceType'"},
		{"CPU t2 is not reservable", map[string]any{"InstanceType": "ml.t2.medium"}, "Value 'ml.t2.medium' at 'instanceType'"},
		{"inf2 is not reservable", map[string]any{"InstanceType": "ml.inf2.xlarge"}, "Value 'ml.inf2.xlarge' at 'instanceType'"},
		{"count over 256", map[string]any{"InstanceCount": 257}, "Member must have value less than or equal to 256"},
		{"zero count", map[string]any{"InstanceCount": 0}, "InstanceCount must be at least 1"},
		{"duration 0", map[string]any{"DurationHours": 0}, "Member must have value greater than or equal to 1"},
		{"duration over 87600", map[string]any{"DurationHours": 87601}, "less than or equal to 87600"},
		{"bad target", map[string]any{"TargetResources": []string{"inference"}}, "targetResources.1.member"},
		{"window reversed", map[string]any{"StartTimeAfter": now.Add(48 * time.Hour).Unix(), "EndTimeBefore": now.Unix()}, "must be before EndTimeBefore"},
		{"missing duration", map[string]any{"DurationHours": nil}, "DurationHours is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := map[string]any{}
			for k, v := range base {
				req[k] = v
			}
			for k, v := range tc.change {
				if v == nil {
					delete(req, k)
				} else {
					req[k] = v
				}
			}
			b, _ := json.Marshal(req)
			st, _, raw := call(t, srv.URL, "SearchTrainingPlanOfferings", string(b))
			if tc.want == "" {
				if st != 200 {
					t.Fatalf("%d %s", st, raw)
				}
				return
			}
			if st != 400 || !strings.Contains(string(raw), "ValidationException") || !strings.Contains(string(raw), tc.want) {
				t.Fatalf("%d %s, want ValidationException with %q", st, raw, tc.want)
			}
		})
	}
}

func TestListTrainingPlansPagination(t *testing.T) {
	srv, clk := newPlansAPI(t)
	for i, name := range []string{"p1", "p2", "p3"} {
		now := clk.Now()
		q := fmt.Sprintf(`{"InstanceType":"ml.p5.48xlarge","InstanceCount":1,"DurationHours":24,"StartTimeAfter":%s}`, jsonEpoch(now.Add(time.Duration(i+1)*time.Hour)))
		_, _, raw := call(t, srv.URL, "SearchTrainingPlanOfferings", q)
		var offers struct {
			TrainingPlanOfferings []struct{ TrainingPlanOfferingId string }
		}
		_ = json.Unmarshal(raw, &offers)
		if st, _, raw := call(t, srv.URL, "CreateTrainingPlan", `{"TrainingPlanName":"`+name+`","TrainingPlanOfferingId":"`+offers.TrainingPlanOfferings[0].TrainingPlanOfferingId+`"}`); st != 200 {
			t.Fatalf("%s: %s", name, raw)
		}
	}
	tests := []struct {
		name string
		req  string
		want [][]string
	}{
		{"default newest start first", `{"MaxResults":2}`, [][]string{{"p3", "p2"}, {"p1"}}},
		{"name ascending", `{"SortBy":"TrainingPlanName","SortOrder":"Ascending"}`, [][]string{{"p1", "p2", "p3"}}},
		{"start time after", `{"StartTimeAfter":` + jsonEpoch(clk.Now().Add(90*time.Minute)) + `,"SortOrder":"Ascending"}`, [][]string{{"p2", "p3"}}},
		{"status filter", `{"Filters":[{"Name":"Status","Value":"Active"}]}`, [][]string{{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkPages(t, srv.URL, "ListTrainingPlans", tc.req, "TrainingPlanSummaries", "TrainingPlanName", tc.want)
		})
	}
}
