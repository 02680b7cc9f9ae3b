package capacity

import (
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
