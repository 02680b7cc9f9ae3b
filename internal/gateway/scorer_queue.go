package gateway

import "context"

const queueName = "queue"

// queue prefers backends with less load (router in-flight + engine waiting
// queue), min-max normalised: least loaded 1, most loaded 0, all equal 1.
type queue struct{}

var _ Scorer = (*queue)(nil)

func newQueue(Deps) (Plugin, error) { return &queue{}, nil }

func (*queue) Name() string { return queueName }

func (*queue) Score(_ context.Context, _ *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	if len(cands) == 0 {
		return scores
	}
	lo, hi := load(cands[0]), load(cands[0])
	for _, c := range cands[1:] {
		lo, hi = min(lo, load(c)), max(hi, load(c))
	}
	for i, c := range cands {
		if hi == lo {
			scores[i] = 1
			continue
		}
		scores[i] = float64(hi-load(c)) / float64(hi-lo)
	}
	return scores
}
