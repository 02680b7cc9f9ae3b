package deployment

import (
	"strconv"
	"testing"
	"time"
)

// TestSteadyNoWrites: a reconcile of a deployment that is where it should
// be writes nothing (no resourceVersion churn, no watch storm), however
// much later it runs.
func TestSteadyNoWrites(t *testing.T) {
	h := newHarness(t)
	h.apply(iec("demo", 4, 1, "  endpointName: demo-ep\n"))
	k := kIEC("demo")
	h.reconcile(k)
	v1 := h.get("InferenceEndpointConfig", "demo").GetMeta().ResourceVersion
	puts := h.reg.putCount()
	h.clk.Step(time.Second) // a later reconcile, as the resync makes
	h.reconcile(k)
	v2 := h.get("InferenceEndpointConfig", "demo").GetMeta().ResourceVersion
	if v1 != v2 || h.reg.putCount() != puts {
		t.Fatalf("steady reconcile wrote: resourceVersion %s → %s, %d more registrations", v1, v2, h.reg.putCount()-puts)
	}
}

// Resource versions order every write of every manifest, as a watch from a
// list's version needs: a later write of any object has a higher one.
func TestResourceVersionsOrderAllWrites(t *testing.T) {
	h := newHarness(t)
	rv := func(name string) int {
		n, err := strconv.Atoi(h.get("InferenceEndpointConfig", name).GetMeta().ResourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	h.apply(iec("a", 1, 1, ""))
	h.apply(iec("b", 1, 1, ""))
	a, b := rv("a"), rv("b")
	if b <= a {
		t.Fatalf("b (created after a) has resourceVersion %d, a %d", b, a)
	}
	h.apply(iec("a", 2, 1, ""))
	if a2 := rv("a"); a2 <= b {
		t.Fatalf("a updated after b was created has resourceVersion %d, b %d", a2, b)
	}
	h.reconcile(kIEC("b"))
	if b2 := rv("b"); b2 <= rv("a") && b2 != b {
		t.Fatalf("b's status write has resourceVersion %d, below a's %d", b2, rv("a"))
	}
}
