package manifest

import (
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
)

func TestQuantityBytes(t *testing.T) {
	for _, tc := range []struct {
		in   Quantity
		want int64
		err  string
	}{
		{"8Gi", 8 << 30, ""},
		{"1.5Ti", 3 << 39, ""},
		{"500M", 500e6, ""},
		{"2K", 2000, ""},
		{"2k", 2000, ""},
		{"1048576", 1 << 20, ""},
		{"100Gi", 100 << 30, ""},
		{"7Ei", 7 << 60, ""},
		{"", 0, "not a size in bytes"},
		{"8GB", 0, "not a size in bytes"},
		{"8 Gi", 0, "not a size in bytes"},
		{"1e9", 0, "not a size in bytes"},
		{"500m", 0, "not a size in bytes"},
		{"+1Gi", 0, "not a size in bytes"},
		{"-1Gi", 0, "must be positive"},
		{"0", 0, "must be positive"},
		{"0.0Gi", 0, "must be positive"},
		{"0.3Ki", 0, "whole number of bytes"},
		{"8Ei", 0, "too large"},
		{"99999999999999999999", 0, "too large"},
	} {
		got, err := tc.in.Bytes()
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %d, %v; want an error containing %q", tc.in, got, err, tc.err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for in, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 3 << 29: "1.5 GiB", 100 << 30: "100 GiB", 380e9: "353.9 GiB", 1 << 62: "4 EiB"} {
		if got := FormatBytes(in); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestDefaultTieredStorageBytes: a tenth of the local storage, capped at
// 100Gi; none without local storage.
func TestDefaultTieredStorageBytes(t *testing.T) {
	for name, want := range map[string]int64{"ml.g5.xlarge": 25e9, "ml.g5.8xlarge": 90e9, "ml.g5.12xlarge": 100 << 30, "ml.p5.48xlarge": 100 << 30, "ml.m5.xlarge": 0} {
		it, err := catalog.Default().InstanceType(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := DefaultTieredStorageBytes(it); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
}

// TestKVCacheSizesAccepted: sizes at the limits pass, and a size on a
// tier that is off is not checked against the instance (it only warns).
func TestKVCacheSizesAccepted(t *testing.T) {
	for _, kv := range []string{
		"{l1CacheSize: 192Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 3800G}}",
		"{l1CacheSize: 8589934592, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: TIEREDSTORAGE}}",
		"{enableL2Cache: false, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 9T}}",
		`{enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: "redis://r:6379", l2CacheSize: 9T}}`,
	} {
		if _, err := Load([]byte(minimalIEC + "  kvCacheSpec: " + kv + "\n")); err != nil {
			t.Errorf("%s: %v", kv, err)
		}
	}
}
