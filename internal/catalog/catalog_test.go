package catalog

import (
	"strings"
	"testing"
)

func TestDefaultCatalogLoads(t *testing.T) {
	c := Default()
	for _, id := range []string{"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen3-32b", "mistral-7b", "deepseek-llm-r1-distill-qwen-1-5b", "llama-3.1-8b-fp8"} {
		if _, err := c.Model(id); err != nil {
			t.Errorf("model %s: %v", id, err)
		}
	}
	for _, g := range []string{"a10g", "l4", "l40s", "a100-40gb", "a100-80gb", "h100", "h200", "b200"} {
		if _, err := c.GPU(g); err != nil {
			t.Errorf("gpu %s: %v", g, err)
		}
	}
	for _, it := range []string{"ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.p5en.48xlarge", "ml.g5.24xlarge"} {
		if _, err := c.InstanceType(it); err != nil {
			t.Errorf("instance type %s: %v", it, err)
		}
	}
}

// The KV bytes per token are the published figures (calibration reference §2).
func TestKVBytesPerToken(t *testing.T) {
	tests := []struct {
		model string
		want  int64
	}{
		{"llama-3.1-8b", 131072},
		{"llama-3.1-8b-fp8", 65536}, // one byte per element: half the BF16 figure
		{"llama-3.1-70b", 327680},
		{"qwen2.5-7b", 57344},
		{"qwen3-32b", 262144},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			m, err := Default().Model(tt.model)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.KVBytesPerToken(); got != tt.want {
				t.Fatalf("KVBytesPerToken = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLookupsAcceptAliasesAndListValidNames(t *testing.T) {
	c := Default()
	m, err := c.Model("meta-llama/Llama-3.1-8B-Instruct")
	if err != nil || m.ID != "llama-3.1-8b" {
		t.Fatalf("alias lookup = %v, %v", m.ID, err)
	}
	if g, err := c.GPU("H100"); err != nil || g.Name != "h100" {
		t.Fatalf("GPU(H100) = %v, %v", g.Name, err)
	}
	_, err = c.GPU("tpu-v5")
	if err == nil || !strings.Contains(err.Error(), "h100") || !strings.Contains(err.Error(), "a10g") {
		t.Fatalf("unknown GPU error should list valid GPUs: %v", err)
	}
	_, err = c.Model("gpt-5")
	if err == nil || !strings.Contains(err.Error(), "qwen3-32b") {
		t.Fatalf("unknown model error should list valid models: %v", err)
	}
}

func TestMIGProfiles(t *testing.T) {
	h200, _ := Default().GPU("h200")
	p, err := h200.MIGProfile("mig-3g.71gb")
	if err != nil {
		t.Fatal(err)
	}
	if p.ComputeSlices != 3 || p.MaxPerGPU != 2 {
		t.Fatalf("3g.71gb = %+v", p)
	}
	if _, err := h200.MIGProfile("3g.40gb"); err == nil || !strings.Contains(err.Error(), "3g.71gb") {
		t.Fatalf("wrong-GPU profile error should list valid ones: %v", err)
	}
	a10g, _ := Default().GPU("a10g")
	if _, err := a10g.MIGProfile("1g.5gb"); err == nil {
		t.Fatal("A10G has no MIG")
	}
}
