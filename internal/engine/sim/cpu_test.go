package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// TestCPUProfileIsMuchSlowerThanA10G: the same model decodes and prefills
// far slower on a CPU instance than on a GPU. Ratios, not absolute times:
// the CPU profile is an estimate (docs/instance-types.md), but memory
// bandwidth two orders of magnitude lower must show.
func TestCPUProfileIsMuchSlowerThanA10G(t *testing.T) {
	cat := catalog.Default()
	step := func(t *testing.T, model, device string, st Step) time.Duration {
		t.Helper()
		m, err := cat.Model(model)
		if err != nil {
			t.Fatal(err)
		}
		g, err := cat.GPU(device)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRoofline(m, g, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.StepTime(st)
	}
	for _, tc := range []struct {
		model, cpu           string
		minDecode, maxDecode float64 // CPU / A10G decode step, batch 1
		minPrefill           float64 // CPU / A10G 512-token prefill
	}{
		{"deepseek-llm-r1-distill-qwen-1-5b", "ml.m5.xlarge", 20, 100, 50},
		{"deepseek-llm-r1-distill-qwen-1-5b", "ml.c5.2xlarge", 10, 50, 25},
		{"qwen2.5-0.5b", "ml.t2.medium", 20, 150, 50},
		{"qwen2.5-0.5b", "ml.m6i.4xlarge", 3, 30, 5},
	} {
		t.Run(tc.model+"/"+tc.cpu, func(t *testing.T) {
			gpuDec := step(t, tc.model, "a10g", DecodeStep(1, 512))
			cpuDec := step(t, tc.model, tc.cpu, DecodeStep(1, 512))
			gpuPre := step(t, tc.model, "a10g", PrefillStep(512))
			cpuPre := step(t, tc.model, tc.cpu, PrefillStep(512))
			dec, pre := float64(cpuDec)/float64(gpuDec), float64(cpuPre)/float64(gpuPre)
			t.Logf("decode step %v on %s vs %v on a10g (×%.1f); 512-token prefill %v vs %v (×%.1f)", cpuDec, tc.cpu, gpuDec, dec, cpuPre, gpuPre, pre)
			if dec < tc.minDecode || dec > tc.maxDecode {
				t.Errorf("decode ratio %.1f outside [%v, %v]", dec, tc.minDecode, tc.maxDecode)
			}
			if pre < tc.minPrefill {
				t.Errorf("prefill ratio %.1f below %v", pre, tc.minPrefill)
			}
		})
	}
	// More vCPUs, more bandwidth: a 4xlarge decodes faster than an xlarge.
	if x, x4 := step(t, "deepseek-llm-r1-distill-qwen-1-5b", "ml.m5.xlarge", DecodeStep(1, 512)), step(t, "deepseek-llm-r1-distill-qwen-1-5b", "ml.m5.4xlarge", DecodeStep(1, 512)); x4 >= x {
		t.Errorf("ml.m5.4xlarge decode %v not faster than ml.m5.xlarge %v", x4, x)
	}
}

// TestCPUMemoryFit: a model fits a CPU instance by its memory; one that does
// not fails naming the instance's memory.
func TestCPUMemoryFit(t *testing.T) {
	cat := catalog.Default()
	for _, tc := range []struct {
		model, cpu string
		fits       bool
	}{
		{"qwen2.5-0.5b", "ml.t2.medium", true},
		{"deepseek-llm-r1-distill-qwen-1-5b", "ml.m5.xlarge", true},
		{"deepseek-llm-r1-distill-qwen-1-5b", "ml.t2.medium", false},
		{"llama-3.1-8b", "ml.m5.xlarge", false},
		{"llama-3.1-8b", "ml.m5.2xlarge", true},
		{"llama-3.1-70b", "ml.r5.4xlarge", false},
	} {
		t.Run(tc.model+"/"+tc.cpu, func(t *testing.T) {
			m, _ := cat.Model(tc.model)
			g, err := cat.GPU(tc.cpu)
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewRoofline(m, g, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.KVCapacityTokens(0.9)
			if tc.fits != (err == nil) {
				t.Fatalf("fits = %v, want %v (%v)", err == nil, tc.fits, err)
			}
			if err != nil && (!strings.Contains(err.Error(), "memory of CPU instance "+tc.cpu) || !strings.Contains(err.Error(), "more memory")) {
				t.Fatalf("error should name the CPU instance's memory: %v", err)
			}
		})
	}
}

// TestCPUEngineRefusesTensorParallel: a CPU instance is one device.
func TestCPUEngineRefusesTensorParallel(t *testing.T) {
	o := testOptions()
	o.Model, o.GPU, o.TensorParallel = "qwen2.5-0.5b", "ml.c5.xlarge", 2
	if _, err := NewEngine(o, Deps{}); err == nil || !strings.Contains(err.Error(), "CPU instance") {
		t.Fatalf("TP 2 on a CPU instance: %v", err)
	}
}
