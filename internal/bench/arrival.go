package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// schedule yields the offsets from a stage's start at which open-loop arrivals
// fire. It is a pure function of (kind, rate, seed), so a seeded run offers
// exactly the same arrival times every time and to every compared target.
type schedule struct {
	kind string
	gap  float64 // mean gap in seconds
	rng  *rand.Rand
	at   float64 // seconds since stage start of the next arrival
	n    int
}

func newSchedule(kind string, rate float64, seed uint64, stageIdx int) *schedule {
	return &schedule{kind: kind, gap: 1 / rate, rng: rngFor(seed, streamArrival, stageIdx)}
}

// arrivals is an open-loop arrival schedule: next returns the offset of the
// next arrival since the stage start, or false when there is none.
type arrivals interface {
	next() (time.Duration, bool)
}

var (
	_ arrivals = rateSchedule{}
	_ arrivals = (*traceSchedule)(nil)
)

// rateSchedule adapts a constant or Poisson schedule, which never ends.
type rateSchedule struct{ *schedule }

func (s rateSchedule) next() (time.Duration, bool) { return s.schedule.next(), true }

// next returns the offset of the next arrival. The first arrival is at 0; gaps
// are exactly 1/rate (constant) or exponentially distributed with mean 1/rate
// (Poisson).
func (s *schedule) next() time.Duration {
	at := s.at
	if s.kind == ArrivalPoisson {
		s.at += s.rng.ExpFloat64() * s.gap
	} else {
		s.n++
		s.at = float64(s.n) * s.gap // no accumulated rounding drift
	}
	return time.Duration(math.Round(at * float64(time.Second)))
}
