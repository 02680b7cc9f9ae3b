package fleet

import (
	"errors"
	"fmt"
	"sort"

	"github.com/capstan-dev/capstan/internal/catalog"
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

// Set replaces owner's allocation with want (type → count), placing instances
// zone by zone in name order. It fails with *LimitError, writing nothing, when
// a type lacks free instances. An empty want releases everything.
func (f *Fleet) Set(tx *store.Tx, owner string, want map[string]int) error {
	used := map[string]map[string]int{} // held by others
	err := tx.Each(Kind, func(name string, _ []byte) error {
		if name == owner {
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
		return fmt.Errorf("fleet: read allocations: %w", err)
	}
	alloc := Allocation{Owner: owner, Instances: map[string]map[string]int{}}
	types := make([]string, 0, len(want))
	for t := range want {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		n := want[t]
		if n <= 0 {
			continue
		}
		zones := make([]string, 0, len(f.capacity[t]))
		for z := range f.capacity[t] {
			zones = append(zones, z)
		}
		sort.Strings(zones)
		free, left := 0, n
		placed := map[string]int{}
		for _, z := range zones {
			fz := f.capacity[t][z] - used[t][z]
			if fz < 0 {
				fz = 0
			}
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
