package manifest

// KV cache tiers as KVCacheReport names them, fastest first.
const (
	KVTierGPU           = "GPU"
	KVTierL1            = "L1"
	KVTierTieredStorage = "tieredstorage"
	KVTierRedis         = "Redis"
)

// Where a tier lives (KVTierReport.Scope).
const (
	KVScopeReplica = "replica" // each replica has its own (GPU, L1)
	KVScopeNode    = "node"    // the replicas of one node share it (tieredstorage)
	KVScopeShared  = "shared"  // every replica shares it (Redis)
)

// KVCacheReport is what a deployment's KV cache tiers hold and serve, as
// its replicas report it (GET …/{name}/kvcache; `capstan describe`). It is
// computed when asked, from the replicas' engine flags and /metrics, and
// never stored.
type KVCacheReport struct {
	// Replicas is how many replicas run; Scraped how many of them answered
	// /metrics. Use and hit rates cover the scraped ones.
	Replicas int `json:"replicas"`
	Scraped  int `json:"scraped"`
	// QueriedTokens is the prompt tokens the scraped replicas looked up in
	// their cache (vllm:prefix_cache_queries_total): the hit rates'
	// denominator.
	QueriedTokens float64        `json:"queriedTokens"`
	Tiers         []KVTierReport `json:"tiers"`
}

// KVTierReport is one tier of a KVCacheReport.
type KVTierReport struct {
	Name  string `json:"name"`  // KVTierGPU, KVTierL1, KVTierTieredStorage or KVTierRedis
	Scope string `json:"scope"` // KVScopeReplica, KVScopeNode or KVScopeShared
	// Units is how many replicas (or nodes) hold the tier now; 0 for a
	// shared tier or when no replica runs.
	Units int `json:"units"`
	// EachBytes is one unit's size (a replica's L1, the model's store budget on a node);
	// CapacityBytes the sum over Units. 0 when unknown (Redis).
	EachBytes     int64 `json:"eachBytes,omitempty"`
	CapacityBytes int64 `json:"capacityBytes,omitempty"`
	// CapacityTokens is the GPU tier's size in KV tokens (blocks × block
	// size), known even when a token's bytes are not.
	CapacityTokens int64 `json:"capacityTokens,omitempty"`
	// Usage is the share (0..1) of the capacity in use; nil when no replica
	// reports it.
	Usage *float64 `json:"usage,omitempty"`
	// HitRate is the share (0..1) of the prompt tokens looked up that this
	// tier served; nil when nothing was looked up yet.
	HitRate *float64 `json:"hitRate,omitempty"`
}
