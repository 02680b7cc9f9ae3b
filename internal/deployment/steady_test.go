package deployment

import (
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
