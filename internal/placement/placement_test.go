package placement_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/capstan-dev/capstan/internal/placement"
)

// TestSourceText: the text form of a source is its stored accounting key and
// metrics label, so it is pinned here, and it reads back as the same source.
func TestSourceText(t *testing.T) {
	tests := []struct {
		src      placement.Source
		text     string
		plan     placement.PlanRef
		isPlan   bool
		instance string
	}{
		{placement.OnDemand("ml.g5.xlarge"), "ml.g5.xlarge", placement.PlanRef{}, false, "ml.g5.xlarge"},
		{placement.OnPlan(placement.PlanRef{Key: "my-plan"}), "trainingplan:my-plan", placement.PlanRef{Key: "my-plan"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := tt.src.String(); got != tt.text {
				t.Fatalf("String = %q, want %q", got, tt.text)
			}
			if p, ok := tt.src.Plan(); p != tt.plan || ok != tt.isPlan {
				t.Fatalf("Plan = %v, %v", p, ok)
			}
			if got := tt.src.InstanceType(); got != tt.instance {
				t.Fatalf("InstanceType = %q", got)
			}
			var back placement.Source
			if err := back.UnmarshalText([]byte(tt.text)); err != nil || back != tt.src {
				t.Fatalf("UnmarshalText(%q) = %+v, %v", tt.text, back, err)
			}
		})
	}
}

// TestWantJSON: a Want marshals as an object keyed by source text and reads
// back equal.
func TestWantJSON(t *testing.T) {
	w := placement.Want{placement.OnDemand("ml.g5.xlarge"): 2, placement.OnPlan(placement.PlanRef{Key: "p"}): 1}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"ml.g5.xlarge":2,"trainingplan:p":1}`; got != want {
		t.Fatalf("JSON %s, want %s", got, want)
	}
	var back placement.Want
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, w) {
		t.Fatalf("read back %v, %v", back, err)
	}
}

// TestPlanRefJSON: a PlanRef is stored as the bare key string, as plan keys
// were before the type existed, and a zero ref is omitted.
func TestPlanRefJSON(t *testing.T) {
	type rec struct {
		Reservation placement.PlanRef `json:"reservation,omitzero"`
	}
	tests := []struct {
		in   rec
		json string
	}{
		{rec{placement.PlanRef{Key: "my-plan"}}, `{"reservation":"my-plan"}`},
		{rec{}, `{}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.in)
		if err != nil || string(b) != tt.json {
			t.Fatalf("Marshal(%+v) = %s, %v; want %s", tt.in, b, err, tt.json)
		}
		var back rec
		if err := json.Unmarshal(b, &back); err != nil || back != tt.in {
			t.Fatalf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	if got := placement.PlanNamed("My-Plan"); got != (placement.PlanRef{Key: "my-plan"}) {
		t.Fatalf("PlanNamed = %+v", got)
	}
}

func TestPlanInfoTargets(t *testing.T) {
	p := placement.PlanInfo{TargetResources: []string{"training-job", placement.TargetHyperPodCluster}}
	if !p.Targets(placement.TargetHyperPodCluster) || p.Targets(placement.TargetEndpoint) {
		t.Fatalf("Targets wrong for %v", p.TargetResources)
	}
}
