package fleet

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

func TestSetAllocatesAcrossZonesAndEnforcesLimit(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := New(Capacity{"ml.g5.xlarge": {"z-a": 2, "z-b": 1}})
	tests := []struct {
		name    string
		owner   string
		want    int
		wantErr bool
		avail   int
	}{
		{"first owner takes two", "ep1", 2, false, 0},
		{"second owner takes the last", "ep2", 1, false, 0},
		{"third owner finds none", "ep3", 1, true, 0},
		{"first owner grows past total", "ep1", 3, true, 2},
		{"first owner shrinks", "ep1", 1, false, 0},
		{"third owner now fits", "ep3", 1, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Update(func(tx *store.Tx) error {
				return f.Set(tx, tc.owner, placement.Want{placement.OnDemand("ml.g5.xlarge"): tc.want})
			})
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				le := err.(*LimitError)
				if !IsLimit(err) || le.Requested != tc.want || le.Available != tc.avail || le.Total != 3 {
					t.Fatalf("LimitError = %+v", le)
				}
			}
		})
	}
	for owner, want := range map[string]int{"ep1": 0, "ep4": 0} {
		var free int
		_ = s.View(func(tx *store.Tx) error {
			free, err = f.Free(tx, owner, placement.OnDemand("ml.g5.xlarge"))
			return err
		})
		if err != nil || free != want {
			t.Fatalf("Free(%s) = %d, %v; want %d", owner, free, err, want)
		}
	}
	plan := placement.OnPlan(placement.PlanRef{Key: "p"})
	if err := s.Update(func(tx *store.Tx) error { return f.Set(tx, "ep4", placement.Want{plan: 1}) }); err == nil {
		t.Fatal("a flat fleet granted a training plan")
	}
	var usage map[string]int
	_ = s.View(func(tx *store.Tx) error { usage, err = f.Usage(tx); return err })
	if usage["ml.g5.xlarge"] != 3 {
		t.Fatalf("usage = %v", usage)
	}
	if err := s.Update(func(tx *store.Tx) error { return f.Set(tx, "ep1", nil) }); err != nil {
		t.Fatal(err)
	}
	_ = s.View(func(tx *store.Tx) error { usage, err = f.Usage(tx); return err })
	if usage["ml.g5.xlarge"] != 2 {
		t.Fatalf("after release usage = %v", usage)
	}
	var free int
	_ = s.View(func(tx *store.Tx) error {
		free, err = f.Free(tx, "ep3", placement.OnDemand("ml.g5.xlarge"))
		return err
	})
	if free != 1 {
		t.Fatalf("Free(ep3) after a release = %d, want 1", free)
	}
}

func TestDefaultCoversEveryCatalogType(t *testing.T) {
	cat := catalog.Default()
	f := New(Default(cat))
	for _, typ := range cat.InstanceTypeNames() {
		if got := f.Total(typ); got != DefaultPerZone*len(DefaultZones) {
			t.Errorf("%s: total %d", typ, got)
		}
	}
}

// TestDefaultHasCPUCapacity: a fresh default fleet holds CPU-only types too,
// so a CPU endpoint starts on a default `capstan serve`; the fleet counts
// instances, not GPUs, so a CPU instance takes one unit like any other.
func TestDefaultHasCPUCapacity(t *testing.T) {
	c := Default(catalog.Default())
	for _, typ := range []string{"ml.t2.medium", "ml.m5.xlarge", "ml.c5.2xlarge", "ml.c6i.xlarge", "ml.m6i.large", "ml.r5.large", "ml.inf2.xlarge"} {
		n := 0
		for _, z := range DefaultZones {
			n += c[typ][z]
		}
		if n != DefaultPerZone*len(DefaultZones) {
			t.Errorf("%s: %d instances in the default fleet, want %d", typ, n, DefaultPerZone*len(DefaultZones))
		}
	}
}
