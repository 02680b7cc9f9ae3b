package catalog

import "testing"

// TestLocalStorage: the instance store sizes are AWS's published figures;
// every NVIDIA GPU type has one, the EBS-only types (Inferentia2, CPU) none.
func TestLocalStorage(t *testing.T) {
	c := Default()
	for _, tc := range []struct {
		name string
		gb   int
	}{
		{"ml.g5.xlarge", 250}, {"ml.g5.2xlarge", 450}, {"ml.g5.4xlarge", 600}, {"ml.g5.8xlarge", 900},
		{"ml.g5.12xlarge", 3800}, {"ml.g5.16xlarge", 1900}, {"ml.g5.24xlarge", 3800}, {"ml.g5.48xlarge", 7600},
		{"ml.g6.12xlarge", 3760}, {"ml.g6e.48xlarge", 7600},
		{"ml.p4d.24xlarge", 8000}, {"ml.p4de.24xlarge", 8000},
		{"ml.p5.48xlarge", 30720}, {"ml.p5e.48xlarge", 30720}, {"ml.p5en.48xlarge", 30720}, {"ml.p6-b200.48xlarge", 30720},
		{"ml.inf2.xlarge", 0}, {"ml.m5.xlarge", 0}, {"ml.t2.medium", 0},
	} {
		it, err := c.InstanceType(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if it.LocalStorageGB != tc.gb || it.LocalStorageBytes() != int64(tc.gb)*1e9 {
			t.Errorf("%s: local storage %d GB (%d bytes), want %d GB", tc.name, it.LocalStorageGB, it.LocalStorageBytes(), tc.gb)
		}
	}
	for _, n := range c.InstanceTypeNames() {
		it, _ := c.InstanceType(n)
		g, err := c.GPU(it.Device())
		if err != nil {
			t.Fatal(err)
		}
		if g.DeviceKind() == DeviceGPU && it.LocalStorageGB <= 0 {
			t.Errorf("%s: a GPU type without local storage", n)
		}
	}
	if _, err := New(nil, nil, []InstanceType{{Name: "ml.x", CPU: "p", VCPU: 1, MemoryGiB: 2, LocalStorageGB: -1}},
		CPUPlatform{Name: "p", BandwidthPerVCPU: 1, MaxBandwidth: 1, FLOPSPerVCPU: 1, MFU: 1, BandwidthEfficiency: 1, StepOverheadSeconds: 3e-4}); err == nil {
		t.Error("negative localStorageGB accepted")
	}
}
