package fleet

import (
	"errors"
	"fmt"
	"sort"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// Kind is the store bucket holding allocations, one value per owner.
const Kind = "allocations"

// DefaultZones and DefaultPerZone define the default fleet: DefaultPerZone
// instances of every catalog instance type in each default zone. That is enough
// for every README example, including a blue/green update of a 4-instance
// variant (which briefly holds old and new instances together).
var DefaultZones = []string{"us-east-1a", "us-east-1b"}

// DefaultPerZone is the default count per type per zone.
const DefaultPerZone = 4

// Capacity is instance type → zone → count.
type Capacity map[string]map[string]int

// Default returns the default capacity for every type in cat.
func Default(cat *catalog.Catalog) Capacity {
	c := Capacity{}
	for _, t := range cat.InstanceTypeNames() {
		c[t] = map[string]int{}
		for _, z := range DefaultZones {
			c[t][z] = DefaultPerZone
		}
	}
	return c
}

// Allocation is what one owner holds: instance type → zone → count.
type Allocation struct {
	Owner     string                    `json:"owner"`
	Instances map[string]map[string]int `json:"instances"`
}

// LimitError says a request asked for more instances than the fleet has free.
type LimitError struct {
	InstanceType string
	Requested    int // what the owner would hold in total
	Available    int // free for this owner (total minus what others hold)
	Total        int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the account-level service limit for %s is %d instances; %d are requested and %d are available",
		e.InstanceType, e.Total, e.Requested, e.Available)
}

// IsLimit reports whether err is (or wraps) a *LimitError.
func IsLimit(err error) bool {
	var le *LimitError
	return errors.As(err, &le)
}

// Fleet is a fixed capacity. It is stateless apart from the store.
type Fleet struct {
	capacity Capacity
}

// New returns a fleet with the given capacity (copied).
func New(c Capacity) *Fleet {
	cp := Capacity{}
	for t, zs := range c {
		cp[t] = map[string]int{}
		for z, n := range zs {
			cp[t][z] = n
		}
	}
	return &Fleet{capacity: cp}
}

// Total is the number of instances of typ across zones.
func (f *Fleet) Total(typ string) int {
	n := 0
	for _, c := range f.capacity[typ] {
		n += c
	}
	return n
}

var _ placement.Allocator = (*Fleet)(nil)

// Set implements placement.Allocator: owner's allocation becomes want,
// placing instances zone by zone in name order. It fails with *LimitError,
// writing nothing, when a type lacks free instances, and with
// *placement.LimitError for a training plan (a flat fleet has none). An
// empty want releases everything.
func (f *Fleet) Set(tx *store.Tx, owner string, want placement.Want) error {
	used, err := f.used(tx, owner)
	if err != nil {
		return err
	}
	alloc := Allocation{Owner: owner, Instances: map[string]map[string]int{}}
	srcs := make([]placement.Source, 0, len(want))
	for src := range want {
		srcs = append(srcs, src)
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].String() < srcs[j].String() })
	for _, src := range srcs {
		n := want[src]
		if n <= 0 {
			continue
		}
		if ref, ok := src.Plan(); ok {
			return &placement.LimitError{Plan: ref, Name: ref.Key, Requested: n}
		}
		t := src.InstanceType()
		free, left := 0, n
		placed := map[string]int{}
		for _, z := range f.zones(t) {
			fz := max(f.capacity[t][z]-used[t][z], 0)
			free += fz
			take := min(fz, left)
			if take > 0 {
				placed[z] = take
				left -= take
			}
		}
		if left > 0 {
			return &LimitError{InstanceType: t, Requested: n, Available: free, Total: f.Total(t)}
		}
		alloc.Instances[t] = placed
	}
	if len(alloc.Instances) == 0 {
		return tx.Delete(Kind, owner)
	}
	return tx.Put(Kind, owner, alloc)
}

// Free implements placement.Allocator: the instances of src's type nobody
// holds, which Set would add to owner's (0 for a training plan).
func (f *Fleet) Free(tx *store.Tx, owner string, src placement.Source) (int, error) {
	if _, ok := src.Plan(); ok {
		return 0, nil
	}
	used, err := f.used(tx, owner)
	if err != nil {
		return 0, err
	}
	var own Allocation
	if _, err := tx.Get(Kind, owner, &own); err != nil {
		return 0, fmt.Errorf("fleet: read allocation: %w", err)
	}
	t, free := src.InstanceType(), 0
	for _, z := range f.zones(t) {
		free += max(f.capacity[t][z]-used[t][z], 0) - own.Instances[t][z]
	}
	return max(free, 0), nil
}

// used sums what owners other than except hold, per type and zone.
func (f *Fleet) used(tx *store.Tx, except string) (map[string]map[string]int, error) {
	used := map[string]map[string]int{}
	err := tx.Each(Kind, func(name string, _ []byte) error {
		if name == except {
			return nil
		}
		var a Allocation
		if _, err := tx.Get(Kind, name, &a); err != nil {
			return err
		}
		for t, zs := range a.Instances {
			if used[t] == nil {
				used[t] = map[string]int{}
			}
			for z, n := range zs {
				used[t][z] += n
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: read allocations: %w", err)
	}
	return used, nil
}

// zones lists typ's zones in name order.
func (f *Fleet) zones(typ string) []string {
	zones := make([]string, 0, len(f.capacity[typ]))
	for z := range f.capacity[typ] {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	return zones
}

// Usage returns instance type → instances held by anyone.
func (f *Fleet) Usage(tx *store.Tx) (map[string]int, error) {
	out := map[string]int{}
	allocs, err := store.List[Allocation](tx, Kind)
	for _, a := range allocs {
		for t, zs := range a.Instances {
			for _, n := range zs {
				out[t] += n
			}
		}
	}
	return out, err
}
