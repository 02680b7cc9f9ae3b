package capacity

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

const p5 = "ml.p5.48xlarge"

var t0 = time.Date(2030, 1, 6, 12, 0, 0, 0, time.UTC)

func newCal(t testing.TB, c fleet.Capacity) (*Calendar, *clock.Fake, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "capstan.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(t0)
	cal, err := New(st, catalog.Default(), clk, c)
	if err != nil {
		t.Fatal(err)
	}
	return cal, clk, st
}

// buy searches and buys the first offering.
func buy(t *testing.T, cal *Calendar, name string, q Query) Plan {
	t.Helper()
	offers, err := cal.Search(q)
	if err != nil || len(offers) == 0 {
		t.Fatalf("search %+v: %d offerings, %v", q, len(offers), err)
	}
	p, err := cal.CreatePlan(name, offers[0].ID, nil)
	if err != nil {
		t.Fatalf("buy %s: %v", name, err)
	}
	return p
}

func week(count int) Query {
	return Query{InstanceType: p5, Count: count, Duration: 168 * time.Hour, TargetResources: []string{"endpoint"},
		StartAfter: t0.Add(time.Hour), EndBefore: t0.Add(60 * 24 * time.Hour)}
}

func TestSearch(t *testing.T) {
	tests := []struct {
		name  string
		fleet fleet.Capacity
		pre   []Query // bought first, in order
		q     Query
		check func(t *testing.T, offers []Offering)
	}{
		{"window shorter than duration gives none", fleet.Capacity{p5: {"a": 4}}, nil,
			Query{InstanceType: p5, Count: 1, Duration: 168 * time.Hour, StartAfter: t0, EndBefore: t0.Add(96 * time.Hour)},
			func(t *testing.T, o []Offering) {
				if len(o) != 0 {
					t.Fatalf("got %d offerings", len(o))
				}
			}},
		{"earliest start, fee and shape", fleet.Capacity{p5: {"a": 4}}, nil, week(2),
			func(t *testing.T, o []Offering) {
				if len(o) != OfferingsPerZone {
					t.Fatalf("got %d offerings, want %d", len(o), OfferingsPerZone)
				}
				first := o[0]
				if !first.Start.Equal(t0.Add(time.Hour)) || !first.End.Equal(first.Start.Add(168*time.Hour)) {
					t.Fatalf("first offering %v..%v", first.Start, first.End)
				}
				if want := fmt.Sprintf("%.2f", 113.068*168*2); first.UpfrontFee != want || first.CurrencyCode != "USD" {
					t.Fatalf("fee %s %s, want %s USD", first.UpfrontFee, first.CurrencyCode, want)
				}
				if len(first.Capacities) != 1 || first.Capacities[0] != (Reserved{"a", 2}) {
					t.Fatalf("capacities %+v", first.Capacities)
				}
				if o[1].Start.Sub(o[0].Start) != OfferingStep || len(first.ID) != 4+64 || first.ID[:4] != "tpo-" {
					t.Fatalf("second start %v, id %s", o[1].Start, first.ID)
				}
			}},
		{"no capacity until the booking ends", fleet.Capacity{p5: {"a": 2}}, []Query{week(2)}, week(1),
			func(t *testing.T, o []Offering) {
				if len(o) == 0 || !o[0].Start.Equal(t0.Add(time.Hour+168*time.Hour)) {
					t.Fatalf("offerings %+v, want first at the end of the booking", o)
				}
			}},
		{"no capacity at all in the window", fleet.Capacity{p5: {"a": 1}},
			[]Query{{InstanceType: p5, Count: 1, Duration: 1000 * time.Hour, StartAfter: t0}},
			Query{InstanceType: p5, Count: 1, Duration: 24 * time.Hour, StartAfter: t0, EndBefore: t0.Add(500 * time.Hour)},
			func(t *testing.T, o []Offering) {
				if len(o) != 0 {
					t.Fatalf("got %+v", o)
				}
			}},
		{"zone split when no zone alone has the count", fleet.Capacity{p5: {"a": 2, "b": 2}}, nil, week(3),
			func(t *testing.T, o []Offering) {
				if len(o) == 0 || len(o[0].Capacities) != 2 || o[0].Capacities[0] != (Reserved{"a", 2}) || o[0].Capacities[1] != (Reserved{"b", 1}) {
					t.Fatalf("offerings %+v, want a:2 b:1", o)
				}
			}},
		{"per zone offerings, best first", fleet.Capacity{p5: {"a": 1, "b": 1}}, nil, week(1),
			func(t *testing.T, o []Offering) {
				if len(o) != 2*OfferingsPerZone || o[0].Capacities[0].Zone != "a" || o[1].Capacities[0].Zone != "b" || !o[0].Start.Equal(o[1].Start) {
					t.Fatalf("offerings %+v", o)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cal, _, _ := newCal(t, tc.fleet)
			for i, q := range tc.pre {
				buy(t, cal, fmt.Sprintf("pre-%d", i), q)
			}
			offers, err := cal.Search(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, offers)
		})
	}
}

func TestPlanLifecycleAndErrors(t *testing.T) {
	cal, clk, st := newCal(t, fleet.Capacity{p5: {"a": 2}})
	p := buy(t, cal, "My-Plan", week(1))
	if p.Key != "my-plan" || p.Total() != 1 {
		t.Fatalf("plan %+v", p)
	}
	offers, _ := cal.Search(week(1))
	_, err := cal.CreatePlan("my-plan", offers[0].ID, nil)
	if e, ok := AsError(err); !ok || e.Kind != ErrPlanExists {
		t.Fatalf("duplicate name: %v", err)
	}
	for _, id := range []string{"tpo-nope", p.OfferingID} { // unknown; already bought
		_, err = cal.CreatePlan("other", id, nil)
		if e, ok := AsError(err); !ok || e.Kind != ErrOfferingNotFound {
			t.Fatalf("offering %s: %v", id, err)
		}
	}
	clk.Step(OfferingTTL + time.Second)
	if _, err := cal.CreatePlan("late", offers[0].ID, nil); err == nil {
		t.Fatal("expired offering was accepted")
	}
	if _, err := cal.GetPlan("missing"); err == nil {
		t.Fatal("missing plan found")
	}
	for _, step := range []struct {
		at   time.Time
		want string
	}{{p.Start.Add(-time.Minute), StatusScheduled}, {p.Start, StatusActive}, {p.End.Add(-time.Second), StatusActive}, {p.End, StatusExpired}} {
		clk.Set(step.at)
		v, err := cal.GetPlan("MY-PLAN")
		if err != nil || v.Status != step.want {
			t.Fatalf("at %v: %s %v, want %s", step.at, v.Status, err, step.want)
		}
	}
	// A restarted calendar knows the plan.
	cal2, err := New(st, catalog.Default(), clk, fleet.Capacity{p5: {"a": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := cal2.Plan(placement.PlanRef{Key: "my-plan"}); !ok || info.Total != 1 || !info.End.Equal(p.End) {
		t.Fatalf("after reload: %+v %v", info, ok)
	}
}

func TestOnDemandAndPlansShareTheFleet(t *testing.T) {
	cal, clk, st := newCal(t, fleet.Capacity{p5: {"a": 2}})
	set := func(owner string, want placement.Want) error {
		return st.Update(func(tx *store.Tx) error { return cal.Set(tx, owner, want) })
	}
	// A plan next week for 1 instance leaves 1 for on-demand (held forever).
	p := buy(t, cal, "plan", week(1))
	if err := set("od", placement.Want{placement.OnDemand(p5): 2}); !fleet.IsLimit(err) {
		t.Fatalf("on-demand beyond plan-free capacity: %v", err)
	}
	if err := set("od", placement.Want{placement.OnDemand(p5): 1}); err != nil {
		t.Fatal(err)
	}
	// Nothing is left while the plan runs; once it ends its instance is free.
	during := Query{InstanceType: p5, Count: 1, Duration: 24 * time.Hour, StartAfter: t0, EndBefore: p.End}
	if offers, _ := cal.Search(during); len(offers) != 0 {
		t.Fatalf("offerings despite a full fleet: %+v", offers)
	}
	if offers, _ := cal.Search(week(1)); len(offers) == 0 || !offers[0].Start.Equal(p.End) {
		t.Fatalf("after the plan: %+v", offers)
	}
	// Reserved-only use draws on the plan, up to its size.
	key := placement.OnPlan(placement.PlanRef{Key: "plan"})
	var ple *placement.LimitError
	if err := set("ep1", placement.Want{key: 2}); !errors.As(err, &ple) || ple.Total != 1 || ple.Requested != 2 {
		t.Fatalf("over the plan: %v", err)
	}
	if err := set("ep1", placement.Want{key: 1}); err != nil {
		t.Fatal(err)
	}
	if err := set("ep2", placement.Want{key: 1}); !errors.As(err, &ple) || ple.Available != 0 {
		t.Fatalf("second user of a full plan: %v", err)
	}
	clk.Set(p.Start.Add(10 * time.Hour))
	v, _ := cal.GetPlan("plan")
	if v.InUse != 1 || v.Available != 0 {
		t.Fatalf("counts %+v", v)
	}
	// Releasing at the end accrues instance-hours inside the plan window only.
	clk.Set(p.End.Add(48 * time.Hour))
	if err := set("ep1", nil); err != nil {
		t.Fatal(err)
	}
	v, _ = cal.GetPlan("plan")
	if h := v.Usage.InstanceHours["plan"]; h != 168 {
		t.Fatalf("plan instance-hours %v, want 168", h)
	}
	if v.Status != StatusExpired || v.Available != 0 {
		t.Fatalf("expired plan %+v", v)
	}
	u, _ := cal.EndpointUsage("od")
	wantHours := clk.Now().Sub(t0).Hours()
	if h := u.InstanceHours[p5]; h < wantHours-0.01 || h > wantHours+0.01 || u.CostUSD < 113*wantHours {
		t.Fatalf("on-demand usage %+v, want %v hours", u, wantHours)
	}
}

// TestConcurrentPurchaseOfLastCapacity: two buyers of the same last instance
// get one plan and one clear error.
func TestConcurrentPurchaseOfLastCapacity(t *testing.T) {
	for round := 0; round < 5; round++ {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			cal, _, _ := newCal(t, fleet.Capacity{p5: {"a": 1}})
			o1, _ := cal.Search(week(1))
			o2, _ := cal.Search(week(1))
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, id := range []string{o1[0].ID, o2[0].ID} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = cal.CreatePlan(fmt.Sprintf("buyer-%d", i), id, nil)
				}()
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				if err == nil {
					ok++
				} else if e, is := AsError(err); !is || e.Kind != ErrCapacityGone {
					t.Fatalf("loser error %v, want ErrCapacityGone", err)
				}
			}
			if ok != 1 {
				t.Fatalf("%d purchases succeeded: %v", ok, errs)
			}
		})
	}
}

// TestStressNoDoubleBooking: 16 buyers race for random slots; afterwards no
// instant of any zone is booked beyond the fleet.
func TestStressNoDoubleBooking(t *testing.T) {
	fl := fleet.Capacity{p5: {"a": 3, "b": 2}}
	cal, _, st := newCal(t, fl)
	var wg sync.WaitGroup
	var mu sync.Mutex
	bought := 0
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				q := Query{InstanceType: p5, Count: 1 + (w+i)%3, Duration: time.Duration(24*(1+(w*7+i)%5)) * time.Hour,
					StartAfter: t0.Add(time.Duration((w*13+i*5)%20) * 24 * time.Hour), EndBefore: t0.Add(90 * 24 * time.Hour)}
				offers, err := cal.Search(q)
				if err != nil || len(offers) == 0 {
					continue
				}
				if _, err := cal.CreatePlan(fmt.Sprintf("w%d-%d", w, i), offers[0].ID, nil); err == nil {
					mu.Lock()
					bought++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if bought == 0 {
		t.Fatal("nothing bought")
	}
	// Check the stored plans, not the index, against the fleet.
	var plans []Plan
	_ = st.View(func(tx *store.Tx) error { var err error; plans, err = store.List[Plan](tx, KindPlans); return err })
	if len(plans) != bought {
		t.Fatalf("%d plans stored, %d purchases succeeded", len(plans), bought)
	}
	for z, n := range fl[p5] {
		var bs []booking
		for _, p := range plans {
			for _, r := range p.Capacities {
				if r.Zone == z {
					bs = append(bs, booking{p.Start.UnixNano(), p.End.UnixNano(), r.Count})
				}
			}
		}
		if pk := peak(profile(bs, 0), 0, 1<<62); pk > n {
			t.Fatalf("zone %s booked %d at once, fleet has %d", z, pk, n)
		}
	}
	t.Logf("%d plans bought by 16 buyers", bought)
}

// TestIncrementalProfile: adding bookings one by one to a cached profile
// gives the same step function as building it from all of them.
func TestIncrementalProfile(t *testing.T) {
	var bs []booking
	var inc []segment
	for i := 0; i < 300; i++ {
		b := booking{int64((i * 37) % 101), int64((i*37)%101 + 1 + (i*13)%40), 1 + i%3}
		bs = append(bs, b)
		inc = withBooking(inc, b)
		full := profile(bs, -1<<63)
		if fmt.Sprint(full) != fmt.Sprint(inc) {
			t.Fatalf("after %d bookings:\nincremental %v\nfull        %v", i+1, inc, full)
		}
	}
}
