package catalog

import (
	"slices"
	"strings"
	"testing"
)

func TestMIGLayouts(t *testing.T) {
	cat := Default()
	gpu := func(name string) GPU {
		t.Helper()
		g, err := cat.GPU(name)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	tests := []struct {
		gpu, layout string
		want        []string
		wantErr     string
	}{
		{"h100", "all-1g.10gb", []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}, ""},
		{"a100-40gb", "all-1g.5gb", slices.Repeat([]string{"1g.5gb"}, 7), ""},
		{"a100-40gb", "all-7g.40gb", []string{"7g.40gb"}, ""},
		{"h100", "all-balanced", []string{"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"}, ""},
		{"h200", "all-balanced", []string{"1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"}, ""},
		{"h200", "mixed-1-3g.71gb-1-4g.71gb", []string{"3g.71gb", "4g.71gb"}, ""},
		{"h100", "all-disabled", nil, ""},
		{"a10g", "all-disabled", nil, ""},
		{"a10g", "all-1g.5gb", nil, "GPU a10g does not support MIG"},
		{"a100-40gb", "all-4g.71gb", nil, `unknown MIG profile "4g.71gb" for GPU a100-40gb`},
		{"h100", "mixed-2-4g.40gb", nil, "at most 1 4g.40gb slices, not 2"},
		{"h100", "mixed-1-4g.40gb-1-7g.80gb", nil, "adding 7g.80gb needs 11 compute slices"},
		{"h100", "mixed-2-3g.40gb-1-1g.10gb", nil, "adding 1g.10gb needs 9 memory slices"},
		{"h100", "mixed-1-3g.40gb-x", nil, "want mixed-<count>-<profile>"},
		{"h100", "half", nil, `unknown MIG layout "half"`},
	}
	for _, tc := range tests {
		t.Run(tc.gpu+"/"+tc.layout, func(t *testing.T) {
			got, err := gpu(tc.gpu).Layout(tc.layout)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Layout = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Layout = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestMemorySlices(t *testing.T) {
	cat := Default()
	for gpu, want := range map[string]map[string]int{
		"a100-40gb": {"1g.5gb": 1, "1g.10gb": 2, "2g.10gb": 2, "3g.20gb": 4, "4g.20gb": 4, "7g.40gb": 8},
		"h100":      {"1g.10gb": 1, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4, "7g.80gb": 8},
		"h200":      {"1g.18gb": 1, "1g.35gb": 2, "2g.35gb": 2, "3g.71gb": 4, "4g.71gb": 4, "7g.141gb": 8},
	} {
		g, err := cat.GPU(gpu)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range g.MIGProfiles {
			if got := g.MemorySlices(p); got != want[p.Name] {
				t.Errorf("%s %s: %d memory slices, want %d", gpu, p.Name, got, want[p.Name])
			}
		}
	}
}
