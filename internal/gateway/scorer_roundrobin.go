package gateway

import (
	"context"
	"sync/atomic"
)

const roundRobinName = "roundrobin"

// roundRobin scores 1 for the next candidate in turn and 0 for the rest.
// The cursor is per variant route (one instance per scheduler).
type roundRobin struct{ next atomic.Uint64 }

var _ Scorer = (*roundRobin)(nil)

func newRoundRobin(Deps) (Plugin, error) { return &roundRobin{}, nil }

func (*roundRobin) Name() string { return roundRobinName }

func (r *roundRobin) Score(_ context.Context, _ *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	if len(cands) > 0 {
		scores[(r.next.Add(1)-1)%uint64(len(cands))] = 1
	}
	return scores
}
