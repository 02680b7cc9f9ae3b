package manifest

import (
	"slices"
	"strings"
	"testing"
)

// TestValidateEnvironmentVariables is the door half of the LD_PRELOAD
// reproduction: a manifest whose environment would change how the engine
// process is loaded or run is refused with the field path of the entry.
func TestValidateEnvironmentVariables(t *testing.T) {
	iecEnv := func(env ...EnvVar) func(o *InferenceEndpointConfig) {
		return func(o *InferenceEndpointConfig) { o.Spec.Worker.EnvironmentVariables = env }
	}
	iec := []struct {
		name   string
		mutate func(o *InferenceEndpointConfig)
		path   string // "" = valid
		msg    string
	}{
		{"plain names pass", iecEnv(EnvVar{Name: "HF_MODEL_ID", Value: "x"}, EnvVar{Name: "OPTION_ROLLING_BATCH", Value: "auto"},
			EnvVar{Name: "PYTHONUNBUFFERED", Value: "1"}, EnvVar{Name: "AWS_REGION", Value: "us-east-1"}, EnvVar{Name: "EMPTY"}), "", ""},
		{"LD_PRELOAD", iecEnv(EnvVar{Name: "A", Value: "1"}, EnvVar{Name: "B", Value: "2"}, EnvVar{Name: "LD_PRELOAD", Value: "/tmp/x.so"}),
			"spec.worker.environmentVariables[2].name", "dynamic loader"},
		{"lower-case ld_library_path", iecEnv(EnvVar{Name: "ld_library_path", Value: "/tmp"}), "spec.worker.environmentVariables[0].name", "dynamic loader"},
		{"DYLD_INSERT_LIBRARIES", iecEnv(EnvVar{Name: "DYLD_INSERT_LIBRARIES", Value: "x"}), "spec.worker.environmentVariables[0].name", "dynamic loader"},
		{"GLIBC_TUNABLES", iecEnv(EnvVar{Name: "GLIBC_TUNABLES", Value: "x"}), "spec.worker.environmentVariables[0].name", "libc"},
		{"GODEBUG", iecEnv(EnvVar{Name: "GODEBUG", Value: "http2debug=2"}), "spec.worker.environmentVariables[0].name", "Go runtime"},
		{"GOGC", iecEnv(EnvVar{Name: "GOGC", Value: "off"}), "spec.worker.environmentVariables[0].name", "Go runtime"},
		{"PATH", iecEnv(EnvVar{Name: "PATH", Value: "/tmp"}), "spec.worker.environmentVariables[0].name", "confine"},
		{"HOME", iecEnv(EnvVar{Name: "HOME", Value: "/root"}), "spec.worker.environmentVariables[0].name", "confine"},
		{"PYTHONPATH", iecEnv(EnvVar{Name: "PYTHONPATH", Value: "/tmp"}), "spec.worker.environmentVariables[0].name", "interpreter"},
		{"NODE_OPTIONS", iecEnv(EnvVar{Name: "NODE_OPTIONS", Value: "--require /tmp/x.js"}), "spec.worker.environmentVariables[0].name", "interpreter"},
		{"BASH_ENV", iecEnv(EnvVar{Name: "BASH_ENV", Value: "/tmp/x"}), "spec.worker.environmentVariables[0].name", "interpreter"},
		{"MALLOC_CHECK_", iecEnv(EnvVar{Name: "MALLOC_CHECK_", Value: "3"}), "spec.worker.environmentVariables[0].name", "MALLOC_CHECK_: it retunes or traces libc's memory allocator"},
		{"MALLOC_PERTURB_", iecEnv(EnvVar{Name: "A", Value: "1"}, EnvVar{Name: "MALLOC_PERTURB_", Value: "165"}), "spec.worker.environmentVariables[1].name", "memory allocator"},
		{"HOSTALIASES", iecEnv(EnvVar{Name: "HOSTALIASES", Value: "/tmp/hosts"}), "spec.worker.environmentVariables[0].name", "HOSTALIASES: it points libc's name resolution"},
		{"RESOLV_HOST_CONF", iecEnv(EnvVar{Name: "RESOLV_HOST_CONF", Value: "/tmp/host.conf"}), "spec.worker.environmentVariables[0].name", "name resolution"},
		{"RES_OPTIONS", iecEnv(EnvVar{Name: "RES_OPTIONS", Value: "ndots:15"}), "spec.worker.environmentVariables[0].name", "name resolution"},
		{"LOCALDOMAIN", iecEnv(EnvVar{Name: "LOCALDOMAIN", Value: "evil.example"}), "spec.worker.environmentVariables[0].name", "name resolution"},
		{"CAPSTAN_ prefix", iecEnv(EnvVar{Name: "CAPSTAN_SPACE_TOKEN", Value: "x"}), "spec.worker.environmentVariables[0].name", "CAPSTAN_SPACE_TOKEN: capstan sets CAPSTAN_* variables itself"},
		{"lower-case capstan_ prefix", iecEnv(EnvVar{Name: "capstan_node", Value: "x"}), "spec.worker.environmentVariables[0].name", "capstan sets CAPSTAN_*"},
		{"denied name with valueFrom", iecEnv(EnvVar{Name: "LD_PRELOAD", ValueFrom: []byte(`{"secretKeyRef":{"name":"s","key":"k"}}`)}),
			"spec.worker.environmentVariables[0].name", "dynamic loader"},
		{"name pattern", iecEnv(EnvVar{Name: "1BAD", Value: "x"}), "spec.worker.environmentVariables[0].name", "not a variable name"},
		{"name with =", iecEnv(EnvVar{Name: "A=B", Value: "x"}), "spec.worker.environmentVariables[0].name", "not a variable name"},
		{"name too long", iecEnv(EnvVar{Name: strings.Repeat("N", 1025), Value: "x"}), "spec.worker.environmentVariables[0].name", "longer than 1024"},
		{"value too long", iecEnv(EnvVar{Name: "V", Value: strings.Repeat("v", 4097)}), "spec.worker.environmentVariables[0].value", "longer than 4096"},
		{"value with NUL", iecEnv(EnvVar{Name: "V", Value: "a\x00b"}), "spec.worker.environmentVariables[0].value", "NUL"},
		{"at most 100", iecEnv(slices.Repeat([]EnvVar{{Name: "A", Value: "1"}}, 101)...), "spec.worker.environmentVariables", "at most 100"},
	}
	for _, tt := range iec {
		t.Run("IEC "+tt.name, func(t *testing.T) {
			o := decodeOneT[*InferenceEndpointConfig](t, minimalIEC)
			tt.mutate(o)
			o.Default()
			if tt.path == "" {
				if err := o.Validate(); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantOnly(t, o.Validate(), tt.path, tt.msg)
		})
	}
	jsm := []struct {
		name string
		env  []NameValue
		path string
		msg  string
	}{
		{"plain names pass", []NameValue{{Name: "SM_NUM_GPUS", Value: "1"}}, "", ""},
		{"LD_PRELOAD", []NameValue{{Name: "A", Value: "1"}, {Name: "LD_PRELOAD", Value: "/tmp/x.so"}}, "spec.environmentVariables[1].name", "dynamic loader"},
		{"GOTRACEBACK", []NameValue{{Name: "GOTRACEBACK", Value: "crash"}}, "spec.environmentVariables[0].name", "Go runtime"},
		{"MALLOC_CHECK_", []NameValue{{Name: "MALLOC_CHECK_", Value: "3"}}, "spec.environmentVariables[0].name", "memory allocator"},
		{"HOSTALIASES", []NameValue{{Name: "A", Value: "1"}, {Name: "HOSTALIASES", Value: "/tmp/hosts"}}, "spec.environmentVariables[1].name", "name resolution"},
		{"RESOLV_HOST_CONF", []NameValue{{Name: "RESOLV_HOST_CONF", Value: "/tmp/host.conf"}}, "spec.environmentVariables[0].name", "name resolution"},
		{"CAPSTAN_ prefix", []NameValue{{Name: "CAPSTAN_GPUS", Value: "8"}}, "spec.environmentVariables[0].name", "capstan sets CAPSTAN_*"},
		{"value too long", []NameValue{{Name: "V", Value: strings.Repeat("v", 4097)}}, "spec.environmentVariables[0].value", "longer than 4096"},
		{"name pattern", []NameValue{{Name: "has space", Value: "x"}}, "spec.environmentVariables[0].name", "not a variable name"},
		{"name required", []NameValue{{Value: "x"}}, "spec.environmentVariables[0].name", "required"},
	}
	for _, tt := range jsm {
		t.Run("JSM "+tt.name, func(t *testing.T) {
			o := decodeOneT[*JumpStartModel](t, minimalJSM)
			o.Spec.EnvironmentVariables = tt.env
			o.Default()
			if tt.path == "" {
				if err := o.Validate(); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantOnly(t, o.Validate(), tt.path, tt.msg)
		})
	}
}

// TestValidateRefusesPreloadYAML takes the reproduction as a client writes
// it, in YAML, through Load (decode, default, validate).
func TestLoadRefusesPreloadYAML(t *testing.T) {
	doc := strings.Replace(minimalIEC, "  worker:\n", "  worker:\n    environmentVariables:\n    - name: MODEL_LEN\n      value: \"4096\"\n    - name: LD_PRELOAD\n      value: /tmp/libsteal.so\n", 1)
	if doc == minimalIEC {
		t.Fatal("test manifest has no worker block to extend")
	}
	_, err := Load([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "spec.worker.environmentVariables[1].name") || !strings.Contains(err.Error(), "LD_PRELOAD") {
		t.Fatalf("Load = %v, want a refusal at spec.worker.environmentVariables[1].name", err)
	}
}
