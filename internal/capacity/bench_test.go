package capacity

import (
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/store"
)

// seedYear books n plans over a year on cal in one transaction (setting up
// through CreatePlan would fsync n times).
func seedYear(b *testing.B, cal *Calendar, st *store.Store, zones []string, n int) {
	r := rand.New(rand.NewSource(1))
	err := st.Update(func(tx *store.Tx) error {
		for i := 0; i < n; i++ {
			start := t0.Add(time.Duration(r.Intn(365*24)) * time.Hour)
			p := Plan{Key: fmt.Sprintf("seed-%d", i), Name: fmt.Sprintf("seed-%d", i), InstanceType: p5,
				Capacities: []Reserved{{zones[r.Intn(len(zones))], 1 + r.Intn(4)}},
				Start:      start, End: start.Add(time.Duration(24*(1+r.Intn(14))) * time.Hour), TargetResources: []string{"endpoint"}}
			if err := tx.Put(KindPlans, p.Key, p); err != nil {
				return err
			}
			cal.index(p)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSearch: a fleet of 2,000 instances (4 zones × 500) with 10,000
// bookings over a year; each op searches a year-wide window for 8 instances
// for a week. Reports p99 latency (target ≤ 10 ms).
func BenchmarkSearch(b *testing.B) {
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"}
	fl := fleet.Capacity{p5: {}}
	for _, z := range zones {
		fl[p5][z] = 500
	}
	cal, _, st := newCal(b, fl)
	seedYear(b, cal, st, zones, 10000)
	q := Query{InstanceType: p5, Count: 8, Duration: 168 * time.Hour, StartAfter: t0, EndBefore: t0.Add(365 * 24 * time.Hour)}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		offers, err := cal.Search(q)
		lat = append(lat, time.Since(s))
		if err != nil || len(offers) == 0 {
			b.Fatalf("search: %d offerings, %v", len(offers), err)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkCreatePlan: 16 concurrent buyers search and buy 1-instance plans
// (each op is one purchase, fsynced). Reports plans/s (target ≥ 500).
func BenchmarkCreatePlan(b *testing.B) {
	cal, _, _ := newCal(b, fleet.Capacity{p5: {"a": 1 << 20}})
	var seq atomic.Int64
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			offers, err := cal.Search(Query{InstanceType: p5, Count: 1, Duration: 24 * time.Hour,
				StartAfter: t0.Add(time.Duration(i%1000) * time.Hour)})
			if err != nil || len(offers) == 0 {
				b.Errorf("search: %v", err)
				return
			}
			if _, err := cal.CreatePlan(fmt.Sprintf("p%d", i), offers[0].ID, nil); err != nil {
				b.Errorf("buy: %v", err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "plans/s")
}
