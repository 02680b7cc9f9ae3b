package gateway

import "context"

const excludeTriedName = "exclude-tried"

// excludeTried drops backends this invocation already attempted, so a retry
// goes to another backend.
type excludeTried struct{}

var _ Filter = (*excludeTried)(nil)

func newExcludeTried(Deps) (Plugin, error) { return &excludeTried{}, nil }

func (*excludeTried) Name() string { return excludeTriedName }

func (*excludeTried) Filter(_ context.Context, req *SchedRequest, cands []Candidate) []Candidate {
	if len(req.Tried) == 0 {
		return cands
	}
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if !req.Tried[c.Backend.ID] {
			out = append(out, c)
		}
	}
	return out
}
