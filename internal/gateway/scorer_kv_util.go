package gateway

import "context"

const kvUtilName = "kv-cache-utilization"

// kvUtil prefers backends with free KV cache: 1 − vllm:kv_cache_usage_perc.
// (Quantising the scraped value against herding between scrapes was tried;
// it lowered kvaware's hit rate on the routing benchmark, see
// docs/performance.md.)
type kvUtil struct{}

var _ Scorer = (*kvUtil)(nil)

func newKVUtil(Deps) (Plugin, error) { return &kvUtil{}, nil }

func (*kvUtil) Name() string { return kvUtilName }

func (*kvUtil) Score(_ context.Context, _ *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	for i, c := range cands {
		scores[i] = 1 - min(max(c.Stats.KVUsage, 0), 1)
	}
	return scores
}
