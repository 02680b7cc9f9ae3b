package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Defaults for Options. Bandwidths: a PCIe Gen5 x16 link moves ≈ 25 GB/s in
// practice (CPU↔GPU offload, L1); a 50 GbE-class network path to a shared
// store ≈ 5 GB/s (L2).
const (
	DefaultPort                 = 8080
	DefaultMaxNumSeqs           = 256
	DefaultMaxNumBatchedTokens  = 8192
	DefaultBlockSize            = 16
	DefaultGPUMemoryUtilization = 0.9
	DefaultMaxWaiting           = 4096
	DefaultL1Bandwidth          = 25e9
	DefaultL2Bandwidth          = 5e9
	// DefaultTieredStorageBandwidth is the node-local tieredstorage read
	// rate: one NVMe Gen4 x4 SSD reads ≈ 7 GB/s sequentially, and a KV block
	// (hundreds of KB to MBs) is read as one large sequential I/O. It sits
	// between L1 (PCIe from host memory) and Redis (the network), which is
	// why the lookup order is L1 → tieredstorage → Redis.
	DefaultTieredStorageBandwidth = 7e9
	// DefaultMaxTokensCompletion and DefaultMaxTokensChat apply when a request
	// sets no max_tokens: OpenAI's legacy completions default is 16; for chat
	// capstan picks 256 (vLLM would use the remaining context).
	DefaultMaxTokensCompletion = 16
	DefaultMaxTokensChat       = 256
	// l2LookupTimeout bounds the admission-time L2 lookup; a slow or dead
	// Redis degrades to cache misses.
	l2LookupTimeout = 50 * time.Millisecond
	// diskLookupTimeout bounds the tieredstorage lookup: a local SSD answers
	// in well under a millisecond, so anything near this is a sick disk and
	// a miss is cheaper than waiting.
	diskLookupTimeout = 20 * time.Millisecond
)

// Options configure one simulated engine process. Zero values of optional
// fields mean "default"; Validate fills them in.
type Options struct {
	Model                string // catalog id or alias (required unless ModelDir is set)
	ModelDir             string // folder with a Hugging Face config.json giving the architecture
	GPU                  string // catalog GPU name (required)
	TensorParallel       int
	MIGProfile           string
	Host                 string
	Port                 int // 0 picks a free port
	ServedModelName      string
	MaxNumSeqs           int
	MaxNumBatchedTokens  int
	BlockSize            int
	GPUMemoryUtilization float64
	MaxWaiting           int
	CPUCacheBytes        int64
	SharedCache          string // redis://… (L2)
	L1Bandwidth          float64
	L2Bandwidth          float64
	// TieredStorageDir is the node's tieredstorage directory, shared by the
	// replicas on the node; TieredStorageBytes bounds this model's file in
	// it (0 = tier off).
	TieredStorageDir       string
	TieredStorageBytes     int64
	TieredStorageBandwidth float64 // tieredstorage→GPU load bandwidth, B/s
	KVEvents               string  // tcp://… publisher endpoint
	KVEventsReplay         string
	KVEventsTopic          string
	TimeScale              float64 // 0 = no simulated waiting
	Seed                   int64
	StartupDelay           time.Duration
	FailRate               float64
	CrashAfterRequests     int
	SlowFactor             float64
	// APIKey, when set, is required as a bearer token on every route but
	// the health checks. `capstan engine sim` reads it from the
	// environment (CAPSTAN_ENGINE_API_KEY), never a flag: a command line
	// is readable by every local user.
	APIKey string
}

// Validate defaults unset fields and checks the rest, naming the flag at fault.
func (o *Options) Validate() error {
	var errs []error
	bad := func(flag, format string, a ...any) { errs = append(errs, fmt.Errorf("--"+flag+": "+format, a...)) }
	if strings.TrimSpace(o.Model) == "" && strings.TrimSpace(o.ModelDir) == "" {
		bad("model", "required (or --model-dir)")
	}
	if strings.TrimSpace(o.GPU) == "" {
		bad("gpu", "required")
	}
	if o.ServedModelName == "" {
		o.ServedModelName = o.Model // with only --model-dir, NewEngine names it from the folder
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.TensorParallel == 0 {
		o.TensorParallel = 1
	}
	if o.MaxNumSeqs == 0 {
		o.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if o.MaxNumBatchedTokens == 0 {
		o.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.GPUMemoryUtilization == 0 {
		o.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	if o.MaxWaiting == 0 {
		o.MaxWaiting = DefaultMaxWaiting
	}
	if o.L1Bandwidth == 0 {
		o.L1Bandwidth = DefaultL1Bandwidth
	}
	if o.L2Bandwidth == 0 {
		o.L2Bandwidth = DefaultL2Bandwidth
	}
	if o.TieredStorageBandwidth == 0 {
		o.TieredStorageBandwidth = DefaultTieredStorageBandwidth
	}
	if o.SlowFactor == 0 {
		o.SlowFactor = 1
	}
	switch {
	case o.TensorParallel < 1 || o.TensorParallel > 64:
		bad("tensor-parallel", "must be 1..64, got %d", o.TensorParallel)
	case o.Port < 0 || o.Port > 65535:
		bad("port", "must be 0..65535, got %d", o.Port)
	case o.MaxNumSeqs < 1:
		bad("max-num-seqs", "must be positive, got %d", o.MaxNumSeqs)
	case o.MaxNumBatchedTokens < 1:
		bad("max-num-batched-tokens", "must be positive, got %d", o.MaxNumBatchedTokens)
	case o.BlockSize < 1 || o.BlockSize > 1024:
		bad("block-size", "must be 1..1024, got %d", o.BlockSize)
	case o.GPUMemoryUtilization <= 0 || o.GPUMemoryUtilization > 1:
		bad("gpu-memory-utilization", "must be in (0, 1], got %g", o.GPUMemoryUtilization)
	case o.MaxWaiting < 1:
		bad("max-waiting", "must be positive, got %d", o.MaxWaiting)
	case o.CPUCacheBytes < 0:
		bad("cpu-cache-bytes", "must not be negative")
	case o.L1Bandwidth < 0 || o.L2Bandwidth < 0:
		bad("l1-bandwidth/--l2-bandwidth", "must be positive")
	case o.TimeScale < 0:
		bad("time-scale", "must not be negative, got %g", o.TimeScale)
	case o.StartupDelay < 0:
		bad("startup-delay", "must not be negative")
	case o.FailRate < 0 || o.FailRate > 1:
		bad("fail-rate", "must be in [0, 1], got %g", o.FailRate)
	case o.CrashAfterRequests < 0:
		bad("crash-after-requests", "must not be negative")
	case o.SlowFactor < 0:
		bad("slow-factor", "must not be negative, got %g", o.SlowFactor)
	}
	// The minimum size (one KV block) depends on the model; NewEngine checks it.
	switch {
	case o.TieredStorageBytes < 0:
		bad("tiered-storage-bytes", "must not be negative, got %d", o.TieredStorageBytes)
	case o.TieredStorageBytes > 0 && strings.TrimSpace(o.TieredStorageDir) == "":
		bad("tiered-storage-dir", "required when --tiered-storage-bytes is set")
	}
	if !(o.TieredStorageBandwidth > 0) || math.IsInf(o.TieredStorageBandwidth, 1) {
		bad("tiered-storage-bandwidth", "must be a positive number of bytes/s, got %g", o.TieredStorageBandwidth)
	}
	if o.SharedCache != "" && !strings.HasPrefix(o.SharedCache, "redis://") && !strings.HasPrefix(o.SharedCache, "rediss://") {
		bad("shared-cache", "must be a redis:// URL, got %q", o.SharedCache)
	}
	if o.KVEvents != "" && !strings.Contains(o.KVEvents, "://") {
		bad("kv-events", "must be a ZMQ endpoint such as tcp://*:5557, got %q", o.KVEvents)
	}
	return errors.Join(errs...)
}
