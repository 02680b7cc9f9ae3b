package gateway

import "context"

const notDrainingName = "not-draining"

// notDraining drops backends a Drain call waits on: they finish what they
// have and get nothing new.
type notDraining struct{}

var _ Filter = (*notDraining)(nil)

func newNotDraining(Deps) (Plugin, error) { return &notDraining{}, nil }

func (*notDraining) Name() string { return notDrainingName }

func (*notDraining) Filter(_ context.Context, _ *SchedRequest, cands []Candidate) []Candidate {
	draining := false
	for _, c := range cands {
		draining = draining || c.Draining
	}
	if !draining {
		return cands // the common case: no copy
	}
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if !c.Draining {
			out = append(out, c)
		}
	}
	return out
}
