package appautoscaling

import (
	"math"
	"testing"
)

// TestHugeMetricScalesOutToMax: a metric so far above the target that
// current × metric / target overflows an int scales out to MaxCapacity;
// converted unchecked, the proposal was a negative int and scaled in.
func TestHugeMetricScalesOutToMax(t *testing.T) {
	for _, v := range []float64{1e300, math.MaxFloat64} {
		e := setup(t, 2, 0, 1, 8)
		e.src.set("my-ep", "AllTraffic", ipi, "Sum", v)
		e.tick()
		e.tick()
		e.tick()
		if d := e.desired(); d != 8 {
			t.Fatalf("metric %g: desired %d, want MaxCapacity 8", v, d)
		}
	}
}
