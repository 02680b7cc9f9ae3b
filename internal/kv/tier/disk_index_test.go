package tier

import (
	"math/rand/v2"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
)

// TestDiskIndexAgainstMap drives the heap with random inserts, updates and
// removals and checks every answer against a plain map.
func TestDiskIndexAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := newDiskIndex()
	model := map[idxKey]int64{}
	for step := range 20000 {
		k := idxKey{space: uint32(rng.IntN(3)), h: kv.BlockHash(rng.IntN(200))}
		switch op := rng.IntN(10); {
		case op < 6:
			mt := rng.Int64N(1_000_000) // ties are likely; any minimum is fine
			x.set(k, mt)
			model[k] = mt
		case op < 9:
			x.remove(k)
			delete(model, k)
		default:
			x.reset()
			clear(model)
		}
		if x.len() != len(model) {
			t.Fatalf("step %d: len %d, model %d", step, x.len(), len(model))
		}
		gk, gmt, ok := x.oldest()
		if ok != (len(model) > 0) {
			t.Fatalf("step %d: oldest ok=%v with %d entries", step, ok, len(model))
		}
		if !ok {
			continue
		}
		for mk, mmt := range model {
			if mmt < gmt {
				t.Fatalf("step %d: oldest %v@%d, but %v@%d is older", step, gk, gmt, mk, mmt)
			}
		}
		if model[gk] != gmt {
			t.Fatalf("step %d: oldest %v@%d, model says %d", step, gk, gmt, model[gk])
		}
	}
	// Slots are recycled: the slab never outgrows the most entries held.
	if len(x.slots) > 3*200 {
		t.Fatalf("slab grew to %d slots for at most 600 keys", len(x.slots))
	}
}
