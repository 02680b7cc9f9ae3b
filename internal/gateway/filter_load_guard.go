package gateway

import "context"

const loadGuardName = "load-guard"

// Load guard thresholds: a candidate is overloaded when its load (the
// router's own in-flight count plus the requests waiting in its engine
// queue) exceeds the least-loaded candidate's by more than maxImbalance, or
// its engine queue is longer than maxWaiting, or its KV cache is fuller than
// maxKVUsage. Tuned so affinity wins while the fleet is balanced and yields
// before one hot backend queues far behind the others (SGLang's
// balance_abs_threshold, 32 by default, and AIBrix's imbalance rule play the
// same role). The imbalance allowed is 16: at 8, on the shared-prefix
// benchmark (10–25 requests per replica), a group's home was often a little
// over 8 ahead of the quietest replica, and one request in ten went to a
// replica without its prefix (docs/performance.md, session 5). The
// engine-queue bound still catches a replica that really falls behind.
const (
	loadGuardMaxImbalance = 16
	loadGuardMaxWaiting   = 16
	loadGuardMaxKVUsage   = 0.98
)

// loadGuard protects cache-aware policies from hot spots: it drops
// overloaded candidates so the scorers choose among the rest; when every
// candidate is overloaded it keeps only the least loaded.
type loadGuard struct {
	maxImbalance, maxWaiting int
	maxKV                    float64
}

var _ Filter = (*loadGuard)(nil)

func newLoadGuard(Deps) (Plugin, error) {
	return &loadGuard{maxImbalance: loadGuardMaxImbalance, maxWaiting: loadGuardMaxWaiting, maxKV: loadGuardMaxKVUsage}, nil
}

func (*loadGuard) Name() string { return loadGuardName }

// load is what the guard and the queue scorer compare.
func load(c Candidate) int { return c.InFlight + c.Stats.Waiting }

func (l *loadGuard) Filter(_ context.Context, _ *SchedRequest, cands []Candidate) []Candidate {
	if len(cands) < 2 {
		return cands
	}
	lo := load(cands[0])
	for _, c := range cands[1:] {
		lo = min(lo, load(c))
	}
	over := func(c Candidate) bool {
		return load(c) > lo+l.maxImbalance || c.Stats.Waiting > l.maxWaiting || c.Stats.KVUsage > l.maxKV
	}
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if !over(c) {
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, c := range cands {
		if load(c) == lo {
			out = append(out, c)
		}
	}
	return out
}
