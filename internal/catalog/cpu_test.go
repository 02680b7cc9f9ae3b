package catalog

import (
	"strings"
	"testing"
)

// TestCPUInstanceTypes: every CPU-only type has a CPU device under its own
// name, sized from its vCPUs and memory, and is never a training-plan type.
func TestCPUInstanceTypes(t *testing.T) {
	c := Default()
	for _, tc := range []struct {
		name      string
		vcpu, mem int
		platform  string
	}{
		{"ml.t2.medium", 2, 4, "xeon-broadwell"},
		{"ml.t2.large", 2, 8, "xeon-broadwell"},
		{"ml.m5.large", 2, 8, "xeon-skylake"},
		{"ml.m5.xlarge", 4, 16, "xeon-skylake"},
		{"ml.m5.2xlarge", 8, 32, "xeon-skylake"},
		{"ml.m5.4xlarge", 16, 64, "xeon-skylake"},
		{"ml.c5.large", 2, 4, "xeon-skylake"},
		{"ml.c5.xlarge", 4, 8, "xeon-skylake"},
		{"ml.c5.2xlarge", 8, 16, "xeon-skylake"},
		{"ml.c5.4xlarge", 16, 32, "xeon-skylake"},
		{"ml.r5.large", 2, 16, "xeon-skylake"},
		{"ml.r5.4xlarge", 16, 128, "xeon-skylake"},
		{"ml.m6i.xlarge", 4, 16, "xeon-icelake"},
		{"ml.c6i.2xlarge", 8, 16, "xeon-icelake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, err := c.InstanceType(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if !it.IsCPU() || it.GPUCount != 0 || it.GPU != "" || it.CPU != tc.platform || it.TrainingPlan {
				t.Fatalf("%+v", it)
			}
			if it.VCPU != tc.vcpu || it.MemoryGiB != tc.mem || it.PricePerHour <= 0 {
				t.Fatalf("shape %+v, want %d vCPU %d GiB and a price", it, tc.vcpu, tc.mem)
			}
			if it.Device() != tc.name || it.Devices() != 1 {
				t.Fatalf("device %q × %d", it.Device(), it.Devices())
			}
			g, err := c.GPU(it.Device())
			if err != nil {
				t.Fatal(err)
			}
			if g.DeviceKind() != DeviceCPU || g.MemoryBytes != int64(tc.mem-1)<<30 || g.MFU <= 0 || g.BandwidthEfficiency <= 0 {
				t.Fatalf("device %+v", g)
			}
			// A CPU device has a small fraction of an A10G's bandwidth.
			a10g, _ := c.GPU("a10g")
			if g.BandwidthBytesPerSec <= 0 || g.BandwidthBytesPerSec > a10g.BandwidthBytesPerSec/5 {
				t.Fatalf("bandwidth %g", g.BandwidthBytesPerSec)
			}
		})
	}
	for _, n := range c.GPUNames() {
		if strings.HasPrefix(n, "ml.") {
			t.Fatalf("GPUNames lists the CPU device %s", n)
		}
	}
	inf2, err := c.InstanceType("ml.inf2.xlarge")
	if err != nil || inf2.IsCPU() || inf2.Device() != "inferentia2" {
		t.Fatalf("ml.inf2.xlarge: %+v %v", inf2, err)
	}
	if g, _ := c.GPU("inferentia2"); g.DeviceKind() != DeviceAccelerator {
		t.Fatalf("inferentia2 kind %q", g.DeviceKind())
	}
}

// TestNewRejectsBadCPUEntries: the cross-reference checks catch a CPU type
// that names no known platform, claims GPUs or a training plan.
func TestNewRejectsBadCPUEntries(t *testing.T) {
	p := CPUPlatform{Name: "x", BandwidthPerVCPU: 1e9, MaxBandwidth: 1e10, FLOPSPerVCPU: 1e10, MFU: 0.3, BandwidthEfficiency: 0.5, StepOverheadSeconds: 3e-4, ReservedGiB: 1}
	for _, tc := range []struct {
		name string
		it   InstanceType
		want string
	}{
		{"unknown platform", InstanceType{Name: "ml.z.large", CPU: "nope", VCPU: 2, MemoryGiB: 4}, "unknown cpu"},
		{"with gpus", InstanceType{Name: "ml.z.large", CPU: "x", GPUCount: 1, VCPU: 2, MemoryGiB: 4}, "no gpu"},
		{"training plan", InstanceType{Name: "ml.z.large", CPU: "x", VCPU: 2, MemoryGiB: 4, TrainingPlan: true}, "GPU types only"},
		{"no memory", InstanceType{Name: "ml.z.large", CPU: "x", VCPU: 2, MemoryGiB: 1}, "memoryGiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(nil, nil, []InstanceType{tc.it}, p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	for name, bad := range map[string]func(*CPUPlatform){
		"no step overhead":  func(p *CPUPlatform) { p.StepOverheadSeconds = 0 },
		"negative sampling": func(p *CPUPlatform) { p.SamplingSecondsPerEntry = -1e-9 },
		"mfu above 1":       func(p *CPUPlatform) { p.MFU = 1.5 },
	} {
		q := p
		bad(&q)
		if _, err := New(nil, nil, nil, q); err == nil || !strings.Contains(err.Error(), `cpu "x"`) {
			t.Errorf("%s: err %v, want the platform refused", name, err)
		}
	}
}
