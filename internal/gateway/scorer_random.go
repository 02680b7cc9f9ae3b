package gateway

import "context"

const randomName = "random"

// random scores every candidate with an independent uniform draw, so the
// pick is uniform (SageMaker's RANDOM routing strategy).
type random struct{ rand func() float64 }

var _ Scorer = (*random)(nil)

func newRandom(d Deps) (Plugin, error) { return &random{rand: d.Rand}, nil }

func (*random) Name() string { return randomName }

func (r *random) Score(_ context.Context, _ *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	for i := range scores {
		scores[i] = r.rand()
	}
	return scores
}
