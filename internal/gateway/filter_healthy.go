package gateway

import "context"

const healthyName = "healthy"

// healthy drops backends ejected after consecutive failures or a failed
// health probe. It fails open: when every candidate is ejected, all stay,
// since a request to a maybe-dead backend beats a certain error.
type healthy struct{}

var _ Filter = (*healthy)(nil)

func newHealthy(Deps) (Plugin, error) { return &healthy{}, nil }

func (*healthy) Name() string { return healthyName }

func (*healthy) Filter(_ context.Context, _ *SchedRequest, cands []Candidate) []Candidate {
	n := 0
	for _, c := range cands {
		if !c.Ejected {
			n++
		}
	}
	if n == len(cands) || n == 0 {
		return cands
	}
	out := make([]Candidate, 0, n)
	for _, c := range cands {
		if !c.Ejected {
			out = append(out, c)
		}
	}
	return out
}
