package capacity

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// TestEndpointHoursSourceLabel: users see the source label of endpoint
// instance-hours, so its values stay the instance type and
// "trainingplan:<plan key>", for hours already accrued and hours still held.
func TestEndpointHoursSourceLabel(t *testing.T) {
	cal, clk, st := newCal(t, fleet.Capacity{p5: {"a": 2}})
	p := buy(t, cal, "My-Plan", week(1))
	want := placement.Want{placement.OnDemand(p5): 1, placement.OnPlan(placement.PlanRef{Key: p.Key}): 1}
	if err := st.Update(func(tx *store.Tx) error { return cal.Set(tx, "ep", want) }); err != nil {
		t.Fatal(err)
	}
	clk.Set(p.Start.Add(2 * time.Hour))
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(cal))
	wantHours := map[string]float64{"ep " + p5: clk.Now().Sub(t0).Hours(), "ep trainingplan:my-plan": 2}
	check := func(when string) {
		t.Helper()
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "capstan_endpoint_instance_hours_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				got[labels["endpoint"]+" "+labels["source"]] = m.GetCounter().GetValue()
			}
		}
		if len(got) != len(wantHours) {
			t.Fatalf("%s: series %v, want %v", when, got, wantHours)
		}
		for k, h := range wantHours {
			if g, ok := got[k]; !ok || g < h-0.01 || g > h+0.01 {
				t.Fatalf("%s: series %v, want %v", when, got, wantHours)
			}
		}
	}
	check("held")
	if err := st.Update(func(tx *store.Tx) error { return cal.Set(tx, "ep", nil) }); err != nil {
		t.Fatal(err)
	}
	check("accrued on release")
}

// TestAddCostJoinsEndpointCost: per-request charges add to the endpoint's
// instance-hour cost in one series, and an endpoint with charges only (a
// serverless one, holding no instance) gets its own.
func TestAddCostJoinsEndpointCost(t *testing.T) {
	cal, clk, st := newCal(t, fleet.Capacity{p5: {"a": 2}})
	if err := st.Update(func(tx *store.Tx) error { return cal.Set(tx, "ep", placement.Want{placement.OnDemand(p5): 1}) }); err != nil {
		t.Fatal(err)
	}
	clk.Set(clk.Now().Add(time.Hour))
	c := NewCollector(cal)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	cost := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == "capstan_endpoint_cost_usd_total" {
				for _, m := range mf.GetMetric() {
					got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		return got
	}
	base := cost()["ep"]
	if base <= 0 {
		t.Fatalf("no instance-hour cost: %v", cost())
	}
	c.AddCost("ep", 0.5)
	c.AddCost("serverless", 0.25)
	c.AddCost("serverless", 0.25)
	c.AddCost("serverless", -1) // ignored
	got := cost()
	if d := got["ep"] - base; d < 0.49 || d > 0.51 {
		t.Fatalf("ep cost %v, want %v + 0.5", got["ep"], base)
	}
	if got["serverless"] != 0.5 {
		t.Fatalf("serverless cost %v, want 0.5", got["serverless"])
	}
}

// gatherPlans returns the training-plan gauges of c, keyed by metric name
// and label value (plan or status).
func gatherPlans(t *testing.T, c *Collector) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "capstan_training_plan") {
			continue
		}
		got[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			got[mf.GetName()][m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return got
}

// TestTrainingPlanGauges: the Reservations dashboard's gauges follow the
// injected clock: plans by status with zeros, reserved instance-hours
// (instances × duration), seconds until the end (0 after it) and the
// upfront fee.
func TestTrainingPlanGauges(t *testing.T) {
	cal, clk, _ := newCal(t, fleet.Capacity{p5: {"a": 4}})
	a := buy(t, cal, "Plan-A", week(1))
	later := week(2)
	later.StartAfter = t0.Add(30 * 24 * time.Hour)
	b := buy(t, cal, "Plan-B", later)
	if !b.Start.After(a.End) {
		t.Fatalf("plan B starts %s, before plan A ends %s", b.Start, a.End)
	}
	fee := func(p Plan) float64 {
		f, err := strconv.ParseFloat(p.UpfrontFee, 64)
		if err != nil || f <= 0 {
			t.Fatalf("plan %s fee %q", p.Name, p.UpfrontFee)
		}
		return f
	}
	c := NewCollector(cal)
	for _, tt := range []struct {
		name     string
		at       time.Time
		statuses map[string]float64
		aLeft    float64
	}{
		{"both scheduled", t0, map[string]float64{StatusScheduled: 2, StatusActive: 0, StatusExpired: 0}, a.End.Sub(t0).Seconds()},
		{"A active", a.Start.Add(time.Hour), map[string]float64{StatusScheduled: 1, StatusActive: 1, StatusExpired: 0}, (167 * time.Hour).Seconds()},
		{"A ended", a.End.Add(time.Hour), map[string]float64{StatusScheduled: 1, StatusActive: 0, StatusExpired: 1}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk.Set(tt.at)
			got := gatherPlans(t, c)
			want := map[string]map[string]float64{
				"capstan_training_plans":                        tt.statuses,
				"capstan_training_plan_reserved_instance_hours": {"Plan-A": 168, "Plan-B": 2 * 168},
				"capstan_training_plan_remaining_seconds":       {"Plan-A": tt.aLeft, "Plan-B": b.End.Sub(tt.at).Seconds()},
				"capstan_training_plan_upfront_fee_usd":         {"Plan-A": fee(a), "Plan-B": fee(b)},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("gauges\n got %v\nwant %v", got, want)
			}
		})
	}
}
