package endpoint

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/capstan-dev/capstan/internal/placement"
)

// TestStoredReservationFormat: a variant's plan is stored as the bare plan
// key, as before it was typed, so existing data dirs load and new records
// read the same to older tools.
func TestStoredReservationFormat(t *testing.T) {
	const stored = `{"name":"v","modelName":"m","instanceType":"ml.p5.48xlarge","weight":1,"desiredWeight":1,"desiredCount":2,` +
		`"replicas":null,"nextIndex":0,"changeStart":"0001-01-01T00:00:00Z","reservation":"my-plan","reservationArn":"arn:aws:sagemaker:us-east-1:123456789012:training-plan/My-Plan"}`
	var v VariantState
	if err := json.Unmarshal([]byte(stored), &v); err != nil {
		t.Fatal(err)
	}
	if v.Reservation != (placement.PlanRef{Key: "my-plan"}) {
		t.Fatalf("Reservation = %+v", v.Reservation)
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) != stored {
		t.Fatalf("re-encoded %s, %v\nwant %s", b, err, stored)
	}
	b, err = json.Marshal(VariantState{Name: "v"})
	var fields map[string]json.RawMessage
	if err != nil || json.Unmarshal(b, &fields) != nil {
		t.Fatalf("on-demand variant: %s, %v", b, err)
	}
	if r, ok := fields["reservation"]; ok {
		t.Fatalf("on-demand variant stores reservation %s", r)
	}
}

// TestInstanceCounts: on-demand variants count against their instance type,
// reserved-only ones against their plan (and only when they hold any), summed
// over both sides of an update.
func TestInstanceCounts(t *testing.T) {
	plan := placement.PlanRef{Key: "p"}
	cur := &Deployment{Variants: []VariantState{
		{Name: "a", InstanceType: "ml.g5.xlarge", DesiredCount: 2},
		{Name: "b", InstanceType: "ml.p5.48xlarge", DesiredCount: 1, Reservation: plan},
		{Name: "idle", InstanceType: "ml.p5.48xlarge", Reservation: placement.PlanRef{Key: "q"}},
	}}
	next := &Deployment{Variants: []VariantState{
		{Name: "a", InstanceType: "ml.g5.xlarge", DesiredCount: 1, Replicas: []string{"r1", "r2", "r3"}},
		{Name: "b", InstanceType: "ml.p5.48xlarge", DesiredCount: 2, Reservation: plan},
	}}
	got, err := instanceCounts(cur, nil, next)
	if err != nil {
		t.Fatal(err)
	}
	want := placement.Want{placement.OnDemand("ml.g5.xlarge"): 5, placement.OnPlan(plan): 3}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("instanceCounts = %v, want %v", got, want)
	}
}
