package catalog

import (
	"math"
	"testing"
)

// TestServerlessCost: SageMaker's published per-second prices (us-east-1)
// for each memory size, and per-millisecond billing.
func TestServerlessCost(t *testing.T) {
	for _, tc := range []struct {
		mb   int
		ms   int64
		want float64
	}{
		{1024, 1000, 0.0000200},
		{2048, 1000, 0.0000400},
		{6144, 1000, 0.0001200},
		{2048, 1, 0.00000004},
		{4096, 2500, 0.0002},
	} {
		if got := ServerlessCost(tc.mb, tc.ms); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ServerlessCost(%d MB, %d ms) = %v, want %v", tc.mb, tc.ms, got, tc.want)
		}
	}
	if _, err := Default().InstanceType(ServerlessInstanceType); err != nil {
		t.Fatalf("the serverless stand-in type is not in the catalog: %v", err)
	}
}
