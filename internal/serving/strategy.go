package serving

import (
	"math"
	"time"
)

// Progress is where a rollout from the old revision of a replica set to the
// new one stands, as the controller counts it from its record and the
// runtime.
type Progress struct {
	// Target is how many replicas the new revision ends with.
	Target int
	// New are the new revision's replicas recorded so far; NewHealthy of
	// them serve, NewBlocked wait for capacity (no node or no free instance).
	New, NewHealthy, NewBlocked int
	// Old are the old revision's replicas still recorded.
	Old int
	// Share is the new revision's share of traffic now (blue/green).
	Share float64
	// Since is how long ago the rollout last took a step (0 before the
	// first), for bake and termination waits.
	Since time.Duration
}

// Step is what the controller makes true next.
type Step struct {
	// New is how many new-revision replicas to record (and start).
	New int
	// Old is how many old-revision replicas to keep; the others leave the
	// route, drain and stop (serving ones last).
	Old int
	// Share is the new revision's traffic share while both serve under
	// blue/green; a rolling update pools both revisions' healthy replicas.
	Share float64
	// Done: the old revision is gone and the new one serves alone.
	Done bool
}

// Strategy decides each step of a rollout. Next is pure: the same Progress
// gives the same Step, so a controller can call it on every reconcile and
// after a crash.
type Strategy interface {
	Next(p Progress) Step
}

// Changed reports whether applying s moves the rollout (restarting Since).
func Changed(p Progress, s Step) bool {
	return s.New != p.New || s.Old != p.Old || s.Share != p.Share
}

// BlueGreenStrategy starts every new replica beside the old ones, shifts
// traffic once all are healthy, and retires the old side last.
type BlueGreenStrategy struct{ BlueGreen }

func (s BlueGreenStrategy) Next(p Progress) Step {
	st := Step{New: p.Target, Old: p.Old, Share: p.Share}
	if p.NewHealthy < p.Target {
		return st // the green side is not all up: blue keeps what it has
	}
	if p.Share < 1 {
		if p.Share > 0 && p.Since < s.Wait {
			return st // a traffic step is baking
		}
		st.Share = s.nextShare(p)
		if st.Share < 1 || s.TerminationWait > 0 {
			return st
		}
		// All traffic moved and nothing to wait for: the old side goes now.
	}
	if p.Since >= s.TerminationWait {
		st.Old = 0
	}
	st.Done = st.Old == 0
	return st
}

// nextShare is the share after the next traffic step, counted in whole
// replicas of the target so steps land exactly on 1.
func (s BlueGreenStrategy) nextShare(p Progress) float64 {
	if p.Target <= 0 {
		return 1
	}
	moved := int(math.Round(p.Share * float64(p.Target)))
	switch s.Traffic {
	case Canary:
		if p.Share == 0 {
			moved = s.Step.Of(p.Target)
		} else {
			moved = p.Target
		}
	case Linear:
		moved += s.Step.Of(p.Target)
	default:
		moved = p.Target
	}
	if moved >= p.Target {
		return 1
	}
	return float64(moved) / float64(p.Target)
}

// RollingStrategy replaces replicas batch by batch; both revisions serve
// from one pool while it runs.
type RollingStrategy struct {
	Batch Size
	Wait  time.Duration
	// MakeRoom caps how many old replicas retire at once to make room for
	// new ones that capacity cannot place (0: a batch).
	MakeRoom int
}

func (s RollingStrategy) Next(p Progress) Step {
	b := s.Batch.Of(p.Target)
	st := Step{New: p.New}
	// Old replicas cover the part of the target new ones do not serve yet.
	st.Old = min(p.Old, max(0, p.Target-p.NewHealthy))
	starting := p.New - p.NewHealthy - p.NewBlocked
	if p.NewBlocked > 0 && starting == 0 {
		// Nothing is coming up and the rest waits for room: free it by
		// retiring old replicas first (requests wait rather than fail).
		room := b
		if s.MakeRoom > 0 {
			room = min(room, s.MakeRoom)
		}
		st.Old = min(st.Old, max(0, p.Old-min(room, p.NewBlocked)))
	}
	// The next batch starts once the last one is healthy and has waited. A
	// batch of the whole target has no next batch to wait for: replicas a
	// raised target adds start at once.
	if p.New < p.Target && (b >= p.Target || p.New == p.NewHealthy && (p.New == 0 || p.Since >= s.Wait)) {
		st.New = min(p.Target, p.New+b)
	}
	if p.New > p.Target {
		st.New = p.Target // a scale-in during the rollout
	}
	st.Done = st.New == p.Target && p.NewHealthy >= p.Target && st.Old == 0
	return st
}
