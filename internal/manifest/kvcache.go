package manifest

import (
	"fmt"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"strings"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// The tieredstorage budget of a model on a node when l2CacheSize is unset: a tenth of
// the instance type's local storage, at most MaxDefaultTieredStorageBytes,
// so that a p5's 30 TB store does not default to 3 TB of KV blocks.
const (
	DefaultTieredStorageShare    = 0.10
	MaxDefaultTieredStorageBytes = 100 << 30 // 100Gi
)

// DefaultTieredStorageBytes is the tieredstorage budget of a model on a
// node of it when l2CacheSize is unset: 0 when it has no local storage.
func DefaultTieredStorageBytes(it catalog.InstanceType) int64 {
	return min(int64(float64(it.LocalStorageBytes())*DefaultTieredStorageShare), MaxDefaultTieredStorageBytes)
}

// L2On reports whether the spec switches the L2 tier on: enableL2Cache with
// an l2CacheSpec.
func (kv *KVCacheSpec) L2On() bool {
	return kv != nil && kv.EnableL2Cache != nil && *kv.EnableL2Cache && kv.L2CacheSpec != nil
}

// L1On reports whether the CPU tier is on (it is unless enableL1Cache is
// false).
func (kv *KVCacheSpec) L1On() bool {
	return kv != nil && (kv.EnableL1Cache == nil || *kv.EnableL1Cache)
}

// L2Backend is the L2 backend in lower case, "" when L2 is off.
func (kv *KVCacheSpec) L2Backend() string {
	if !kv.L2On() {
		return ""
	}
	return strings.ToLower(kv.L2CacheSpec.L2CacheBackend)
}

// reByteSize is a size in bytes: a non-negative decimal with an optional
// binary (Ki…Ei) or decimal (k/K…E) suffix. No exponents or milli-units:
// they make no sense for bytes and are mostly typos.
var reByteSize = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]+))?(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E)?$`)

var byteSuffix = map[string]int64{
	"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

// Bytes reads q as a positive whole number of bytes: "8Gi", "1.5Ti",
// "500M", 1048576. It is stricter than Value: no sign, exponent or
// milli-unit, and the result must be a whole number of bytes that fits
// in an int64.
func (q Quantity) Bytes() (int64, error) {
	s := string(q)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("must be positive, got %s", s)
	}
	m := reByteSize.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size in bytes: want a number with an optional suffix Ki, Mi, Gi, Ti (powers of 1024) or K, M, G, T (powers of 1000), e.g. 8Gi", s)
	}
	// Exact arithmetic: 1.5Gi is a whole number of bytes, 0.3Ki is not.
	num, ok := new(big.Rat).SetString(m[1] + "." + m[2] + "0")
	if !ok {
		return 0, fmt.Errorf("%q is not a size in bytes", s)
	}
	num.Mul(num, new(big.Rat).SetInt64(byteSuffix[m[3]]))
	if !num.IsInt() {
		return 0, fmt.Errorf("%s is not a whole number of bytes", s)
	}
	n := num.Num()
	switch {
	case n.Sign() == 0:
		return 0, fmt.Errorf("must be positive, got %s", s)
	case !n.IsInt64() || n.Int64() > math.MaxInt64:
		return 0, fmt.Errorf("%s is too large", s)
	}
	return n.Int64(), nil
}

// FormatBytes writes n in the largest binary unit that keeps it readable:
// "512 B", "7.5 GiB", "100 GiB".
func FormatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i:i+1] + "iB"
}

// validateKVCache checks kvCacheSpec; instances are the instance types the
// replicas may land on (none known: the size checks against them are
// skipped, and the controller refuses at placement).
func validateKVCache(kv *KVCacheSpec, instances []catalog.InstanceType, kp path, errs *ErrorList) {
	l2 := kv.EnableL2Cache != nil && *kv.EnableL2Cache
	if l2 && kv.L2CacheSpec == nil && kv.CacheConfigFile == "" {
		errs.add(kp.child("l2CacheSpec"), "required when enableL2Cache is true")
	}
	if kv.L1CacheSize != "" {
		p := kp.child("l1CacheSize")
		if n, err := kv.L1CacheSize.Bytes(); err != nil {
			errs.add(p, "%v", err)
		} else {
			for _, it := range instances {
				if mem := int64(it.MemoryGiB) << 30; n > mem {
					errs.add(p, "%s is more than the %d GiB of memory of %s", kv.L1CacheSize, it.MemoryGiB, it.Name)
				}
			}
		}
	}
	s := kv.L2CacheSpec
	if s == nil {
		return
	}
	lp := kp.child("l2CacheSpec")
	backend := strings.ToLower(s.L2CacheBackend)
	switch backend {
	case "":
		errs.add(lp.child("l2CacheBackend"), "required; one of redis, tieredstorage")
	case L2BackendTieredStorage:
		if l2 {
			for _, it := range instances {
				if it.LocalStorageGB == 0 {
					errs.add(lp.child("l2CacheBackend"), "tieredstorage keeps KV blocks on the node's local instance storage, and %s has none; use redis or an instance type with NVMe instance storage (e.g. ml.g5.*)", it.Name)
				}
			}
		}
	case L2BackendRedis:
		if s.L2CacheLocalURL == "" {
			errs.add(lp.child("l2CacheLocalUrl"), "required for the redis backend")
		} else if u, err := url.Parse(s.L2CacheLocalURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			errs.add(lp.child("l2CacheLocalUrl"), "%q must be a redis:// or rediss:// URL", s.L2CacheLocalURL)
		}
	default:
		errs.add(lp.child("l2CacheBackend"), "unsupported value %q; one of redis, tieredstorage", s.L2CacheBackend)
	}
	if s.L2CacheSize != "" {
		p := lp.child("l2CacheSize")
		if n, err := s.L2CacheSize.Bytes(); err != nil {
			errs.add(p, "%v", err)
		} else if l2 && backend == L2BackendTieredStorage {
			for _, it := range instances {
				if it.LocalStorageGB > 0 && n > it.LocalStorageBytes() {
					errs.add(p, "%s is more than the %d GB of local instance storage of %s", s.L2CacheSize, it.LocalStorageGB, it.Name)
				}
			}
		}
	}
}
