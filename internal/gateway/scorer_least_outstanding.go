package gateway

import "context"

const leastOutstandingName = "least-outstanding-requests"

// leastOutstanding prefers backends with fewer requests in flight:
// min-max normalised so the least loaded scores 1 and the most loaded 0
// (all equal → all 1, ties broken at random by the framework).
type leastOutstanding struct{}

var _ Scorer = (*leastOutstanding)(nil)

func newLeastOutstanding(Deps) (Plugin, error) { return &leastOutstanding{}, nil }

func (*leastOutstanding) Name() string { return leastOutstandingName }

func (*leastOutstanding) Score(_ context.Context, _ *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	if len(cands) == 0 {
		return scores
	}
	lo, hi := cands[0].InFlight, cands[0].InFlight
	for _, c := range cands[1:] {
		lo, hi = min(lo, c.InFlight), max(hi, c.InFlight)
	}
	for i, c := range cands {
		if hi == lo {
			scores[i] = 1
			continue
		}
		scores[i] = float64(hi-c.InFlight) / float64(hi-lo)
	}
	return scores
}
