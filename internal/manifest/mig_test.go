package manifest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engine/sim"
)

// setMIG replaces the worker's GPU and MIG resources: req and lim map
// resource names to quantities ("" leaves the side without it).
func setMIG(o *InferenceEndpointConfig, req, lim map[string]Quantity) {
	r := o.Spec.Worker.Resources
	for _, m := range []map[string]Quantity{r.Requests, r.Limits} {
		for k := range m {
			if k == ResourceGPU || strings.HasPrefix(k, "nvidia.com/mig") {
				delete(m, k)
			}
		}
	}
	for k, v := range req {
		r.Requests[k] = v
	}
	for k, v := range lim {
		r.Limits[k] = v
	}
}

func TestValidateIECMIG(t *testing.T) {
	const slice = "nvidia.com/mig-1g.5gb"
	one := map[string]Quantity{slice: "1"}
	tests := []struct {
		name   string
		mutate func(o *InferenceEndpointConfig)
		path   string // "" = valid
		msg    string
	}{
		{"one slice", func(o *InferenceEndpointConfig) { setMIG(o, one, one) }, "", ""},
		{"limit alone sets the request", func(o *InferenceEndpointConfig) { setMIG(o, nil, one) }, "", ""},
		{"profile on every instance type", func(o *InferenceEndpointConfig) {
			o.Spec.InstanceType, o.Spec.InstanceTypes = "", []string{"ml.p4d.24xlarge", "ml.p4de.24xlarge"}
			q := map[string]Quantity{"nvidia.com/mig-1g.10gb": "1"}
			setMIG(o, q, q)
		}, "", ""},
		{"quantity must be 1", func(o *InferenceEndpointConfig) { setMIG(o, map[string]Quantity{slice: "2"}, one) },
			"spec.worker.resources.requests[nvidia.com/mig-1g.5gb]", "a replica runs on one MIG slice"},
		{"quantity must be a quantity", func(o *InferenceEndpointConfig) { setMIG(o, one, map[string]Quantity{slice: "x"}) },
			"spec.worker.resources.limits[nvidia.com/mig-1g.5gb]", "not a quantity"},
		{"limit must match the request", func(o *InferenceEndpointConfig) { setMIG(o, one, nil) },
			"spec.worker.resources.limits[nvidia.com/mig-1g.5gb]", "must equal the request"},
		{"malformed name without memory", func(o *InferenceEndpointConfig) { setMIG(o, map[string]Quantity{"nvidia.com/mig-4g": "1"}, nil) },
			"spec.worker.resources.requests[nvidia.com/mig-4g]", "not a MIG resource"},
		{"malformed name", func(o *InferenceEndpointConfig) { setMIG(o, nil, map[string]Quantity{"nvidia.com/mig-big": "1"}) },
			"spec.worker.resources.limits[nvidia.com/mig-big]", "nvidia.com/mig-<g>g.<mem>gb"},
		{"slice and whole GPU", func(o *InferenceEndpointConfig) {
			setMIG(o, one, map[string]Quantity{slice: "1", ResourceGPU: "1"})
		}, "spec.worker.resources.limits[nvidia.com/gpu]", "not both"},
		{"two profiles", func(o *InferenceEndpointConfig) {
			two := map[string]Quantity{slice: "1", "nvidia.com/mig-2g.10gb": "1"}
			setMIG(o, two, two)
		}, "spec.worker.resources", "one slice of one MIG profile"},
		{"profile of another GPU", func(o *InferenceEndpointConfig) {
			q := map[string]Quantity{"nvidia.com/mig-4g.71gb": "1"}
			setMIG(o, q, q)
		}, "spec.worker.resources.requests[nvidia.com/mig-4g.71gb]", "ml.p4d.24xlarge: unknown MIG profile \"mig-4g.71gb\" for GPU a100-40gb; valid profiles: 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"},
		{"profile missing on one of instanceTypes", func(o *InferenceEndpointConfig) {
			o.Spec.InstanceType, o.Spec.InstanceTypes = "", []string{"ml.p5en.48xlarge", "ml.p4d.24xlarge"}
			q := map[string]Quantity{"nvidia.com/mig-4g.71gb": "1"}
			setMIG(o, q, q)
		}, "spec.worker.resources.requests[nvidia.com/mig-4g.71gb]", "ml.p4d.24xlarge: unknown MIG profile"},
		{"GPU without MIG", func(o *InferenceEndpointConfig) {
			o.Spec.InstanceType = "ml.g5.12xlarge"
			setMIG(o, one, one)
		}, "spec.worker.resources.requests[nvidia.com/mig-1g.5gb]", "ml.g5.12xlarge: GPU a10g does not support MIG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeOneT[*InferenceEndpointConfig](t, minimalIEC)
			o.Spec.InstanceType = "ml.p4d.24xlarge"
			tt.mutate(o)
			o.Default()
			err := o.Validate()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			wantOnly(t, err, tt.path, tt.msg)
		})
	}
}

func TestValidateJSMMIG(t *testing.T) {
	off := func(o *JumpStartModel) {
		o.Spec.Server.Validations = &ServerValidations{AcceleratorPartitionValidation: ptr(false)}
	}
	const llama = "meta-textgeneration-llama-3-1-8b-instruct"
	const pt = "spec.server.acceleratorPartitionType"
	tests := []struct {
		name     string
		model    string // "" = the 1.5B deepseek of minimalJSM
		instance string
		profile  string
		mutate   func(o *JumpStartModel)
		path     string // "" = valid
		msg      string
	}{
		{name: "smallest slice holds a 1.5B model", instance: "ml.p4d.24xlarge", profile: "mig-1g.5gb"},
		{name: "published example", instance: "ml.p4d.24xlarge", profile: "mig-7g.40gb"},
		{name: "8B model on a 3g.20gb slice", model: llama, instance: "ml.p4d.24xlarge", profile: "mig-3g.20gb"},
		{name: "pattern", instance: "ml.p4d.24xlarge", profile: "mig-7g", path: pt, msg: "mig-<g>g.<mem>gb"},
		{name: "pattern without prefix", instance: "ml.p4d.24xlarge", profile: "7g.40gb", path: pt, msg: "mig-<g>g.<mem>gb"},
		{name: "profile of another GPU", instance: "ml.p4d.24xlarge", profile: "mig-4g.71gb", path: pt,
			msg: "ml.p4d.24xlarge: unknown MIG profile \"mig-4g.71gb\" for GPU a100-40gb; valid profiles: 1g.5gb"},
		{name: "profile checked with validation off", instance: "ml.p4d.24xlarge", profile: "mig-4g.71gb", mutate: off, path: pt, msg: "valid profiles"},
		{name: "GPU without MIG", instance: "ml.g5.12xlarge", profile: "mig-1g.5gb", path: pt, msg: "ml.g5.12xlarge: GPU a10g does not support MIG"},
		{name: "GPU without MIG, validation off", instance: "ml.g5.12xlarge", profile: "mig-1g.5gb", mutate: off, path: pt, msg: "does not support MIG"},
		{name: "8B model does not fit 1g.10gb", model: llama, instance: "ml.p4d.24xlarge", profile: "mig-1g.10gb", path: pt,
			msg: "needs 16.3 GB (16.1 GB of weights + 0.27 GB of KV cache for 2048 tokens), the slice offers 9.0 GB (10.0 GB × gpu-memory-utilization 0.90); profiles of a100-40gb that fit: mig-3g.20gb, mig-4g.20gb, mig-7g.40gb"},
		{name: "fit check skipped with validation off", model: llama, instance: "ml.p4d.24xlarge", profile: "mig-1g.10gb", mutate: off},
		{name: "no profile holds a 70B model", model: "llama-3.1-70b", instance: "ml.p4d.24xlarge", profile: "mig-7g.40gb", path: pt,
			msg: "no profile of a100-40gb holds it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeOneT[*JumpStartModel](t, minimalJSM)
			if tt.model != "" {
				o.Spec.Model.ModelID = tt.model
			}
			o.Spec.Server.InstanceType = tt.instance
			o.Spec.Server.AcceleratorPartitionType = tt.profile
			if tt.mutate != nil {
				tt.mutate(o)
			}
			o.Default()
			err := o.Validate()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			wantOnly(t, err, tt.path, tt.msg)
		})
	}
}

// TestMIGFitMatchesEngine: a model MIGFit accepts starts on the slice in
// the simulated engine with at least MIGMinKVTokens of KV cache, and one it
// refuses has less room than that there.
func TestMIGFitMatchesEngine(t *testing.T) {
	if MIGFitMemoryUtilization != sim.DefaultGPUMemoryUtilization {
		t.Fatalf("MIGFitMemoryUtilization %v, engine default %v", MIGFitMemoryUtilization, sim.DefaultGPUMemoryUtilization)
	}
	cat := catalog.Default()
	accepted, refused := 0, 0
	for _, gpu := range []string{"a100-40gb", "h200"} {
		g, err := cat.GPU(gpu)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range cat.ModelIDs() {
			m, err := cat.Model(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range g.MIGProfiles {
				t.Run(fmt.Sprintf("%s/%s/%s", gpu, id, p.Name), func(t *testing.T) {
					roof, err := sim.NewRoofline(m, g, 1, &p)
					if err != nil {
						t.Fatal(err)
					}
					tokens, capErr := roof.KVCapacityTokens(sim.DefaultGPUMemoryUtilization)
					fitErr := MIGFit(m, g, p)
					if fitErr == nil {
						accepted++
						if capErr != nil || tokens < MIGMinKVTokens {
							t.Fatalf("MIGFit accepts, engine has %d tokens (%v)", tokens, capErr)
						}
						return
					}
					refused++
					if capErr == nil && tokens >= MIGMinKVTokens {
						t.Fatalf("MIGFit refuses (%v), engine has %d tokens", fitErr, tokens)
					}
				})
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d, refused %d: the table does not exercise both sides", accepted, refused)
	}
}
