package procenv

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"HF_MODEL_ID", true},
		{"OPTION_ROLLING_BATCH", true},
		{"_private", true},
		{"PYTHONUNBUFFERED", true},
		{"AWS_REGION", true},
		{"LANG", true},
		{"LD_PRELOAD", false},
		{"LD_LIBRARY_PATH", false},
		{"ld_preload", false},
		{"LD_AUDIT", false},
		{"DYLD_INSERT_LIBRARIES", false},
		{"GCONV_PATH", false},
		{"GLIBC_TUNABLES", false},
		{"GODEBUG", false},
		{"GOGC", false},
		{"GOMAXPROCS", false},
		{"PATH", false},
		{"HOME", false},
		{"TMPDIR", false},
		{"BASH_ENV", false},
		{"PYTHONPATH", false},
		{"NODE_OPTIONS", false},
		{"JAVA_TOOL_OPTIONS", false},
		{"", false},
		{"1ABC", false},
		{"A=B", false},
		{"A-B", false},
		{"BASH_FUNC_x%%", false},
		{"A B", false},
		{strings.Repeat("A", MaxNameBytes), true},
		{strings.Repeat("A", MaxNameBytes+1), false},
	}
	for _, tt := range tests {
		err := CheckName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("CheckName(%.40q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("CheckName(%.40q) = %v, does not wrap ErrNotAllowed", tt.name, err)
		}
	}
}

func TestCheck(t *testing.T) {
	many := map[string]string{}
	for i := range MaxVars + 1 {
		many["V"+strings.Repeat("X", i)] = "1"
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"nil", nil, ""},
		{"plain", map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B", "EMPTY": ""}, ""},
		{"preload", map[string]string{"OK": "1", "LD_PRELOAD": "/tmp/x.so"}, "LD_PRELOAD: it steers the dynamic loader"},
		{"long value", map[string]string{"V": strings.Repeat("v", MaxValueBytes+1)}, "V: environment variable not allowed: value longer than 4096 bytes"},
		{"nul value", map[string]string{"V": "a\x00b"}, "NUL"},
		{"too many", many, "101 variables, at most 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.env)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrNotAllowed)):
				t.Fatalf("Check = %v, want an ErrNotAllowed containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestCheckNameLibcResolverAllocatorAndCapstan covers the names of glibc's
// own list of variables it drops for set-uid programs (unsecvars.h) that
// are not loader variables, and capstan's own prefix: each is refused, in
// any case, with its reason, while names that merely start alike pass.
func TestCheckNameLibcResolverAllocatorAndCapstan(t *testing.T) {
	const (
		libc     = "it makes libc load modules or files of the caller's choosing, or retune itself"
		resolver = "it points libc's name resolution at files or options of the caller's choosing"
		malloc   = "it retunes or traces libc's memory allocator"
		capstan  = "capstan sets CAPSTAN_* variables itself"
	)
	tests := []struct {
		name string
		why  string // "" = allowed
	}{
		{"MALLOC_CHECK_", malloc},
		{"MALLOC_PERTURB_", malloc},
		{"MALLOC_TRACE", malloc},
		{"MALLOC_ARENA_MAX", malloc},
		{"malloc_check_", malloc},
		{"HOSTALIASES", resolver},
		{"RESOLV_HOST_CONF", resolver},
		{"RES_OPTIONS", resolver},
		{"LOCALDOMAIN", resolver},
		{"NIS_PATH", resolver},
		{"hostaliases", resolver},
		{"GETCONF_DIR", libc},
		{"TZDIR", libc},
		{"GCONV_PATH", libc},
		{"GLIBC_TUNABLES", libc},
		{"CAPSTAN_SPACE_TOKEN", capstan},
		{"CAPSTAN_GPUS", capstan},
		{"CAPSTAN_", capstan},
		{"capstan_token", capstan},
		{"CAPSTANISH", ""},
		{"MALLOCS", ""},
		{"MY_CAPSTAN_X", ""},
		{"TZ", ""},
		{"RESOLVER", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckName(tt.name)
			switch {
			case tt.why == "" && err != nil:
				t.Fatalf("CheckName(%q) = %v, want allowed", tt.name, err)
			case tt.why == "":
			case err == nil:
				t.Fatalf("CheckName(%q) allowed it, want %q", tt.name, tt.why)
			case !errors.Is(err, ErrNotAllowed):
				t.Fatalf("CheckName(%q) = %v, does not wrap ErrNotAllowed", tt.name, err)
			case err.Error() != "environment variable not allowed: "+tt.name+": "+tt.why:
				t.Fatalf("CheckName(%q) = %q, want %q", tt.name, err, "environment variable not allowed: "+tt.name+": "+tt.why)
			}
		})
	}
}
