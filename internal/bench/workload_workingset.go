package bench

import (
	"fmt"
	"math"
	"strconv"

	"github.com/capstan-dev/capstan/internal/kv"
)

// --- working-set --------------------------------------------------------

// The working-set workload is for KV working sets larger than the replicas'
// GPU memory: docs documents, each a long prefix of its own, visited in
// rounds (every document once per round, in a seeded order) with a fresh
// suffix per visit. Consecutive visits of a document are at least gap
// requests apart, so with gap × prefix tokens well above the GPU KV capacity
// a revisit finds its prefix evicted from the GPU and only a tier below it
// (L1, tieredstorage, Redis) can serve it without recomputing.

// Bounds of the working-set parameters.
const (
	maxWorkingSetDocs   = 1_000_000
	maxWorkingSetVisits = 10_000_000 // docs × rounds, as shared-prefix bounds groups × prompts
	maxRevisits         = 1000
	maxCapacityTokens   = 1 << 40
	maxFill             = 1000
)

type workingSetWorkload struct {
	seed                         uint64
	docs, prefix, suffix, output int
	revisits, gap, from          int
	rounds                       [][]int32 // rounds[r][p]: the document at position p of round r
	params                       map[string]string
}

func newWorkingSet(spec WorkloadSpec, seed uint64) (*workingSetWorkload, error) {
	p := newParams(spec)
	_, hasDocs := spec.Params["docs"]
	_, hasCap := spec.Params["capacity"]
	w := &workingSetWorkload{
		seed:     seed,
		docs:     p.int("docs", 64, 1, maxWorkingSetDocs),
		prefix:   p.int("prefix", 4096, 1, maxTokensParam),
		suffix:   p.int("suffix", 128, 1, maxTokensParam),
		output:   p.int("output", 32, 1, maxTokensParam),
		revisits: p.int("revisits", 3, 1, maxRevisits),
	}
	capacity := p.int("capacity", 0, 1, maxCapacityTokens)
	_, hasFill := spec.Params["fill"]
	fill := p.float("fill", 4, 0.001, maxFill)
	gap := p.int("gap", -1, 0, maxWorkingSetDocs)
	w.from = p.int("from", 0, 0, maxRevisits)
	if err := p.done(); err != nil {
		return nil, err
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("workload working-set: "+format, a...)
	}
	switch {
	case hasDocs && hasCap:
		return nil, fail("docs and capacity are exclusive (capacity sizes docs as ⌈fill × capacity ÷ prefix⌉)")
	case hasFill && !hasCap:
		return nil, fail("fill needs capacity (the replicas' GPU KV capacity in tokens)")
	case hasCap:
		n := math.Ceil(fill * float64(capacity) / float64(w.prefix))
		if n > maxWorkingSetDocs {
			return nil, fail("fill × capacity ÷ prefix = %.0f documents exceeds %d; raise prefix", n, maxWorkingSetDocs)
		}
		w.docs = max(1, int(n))
	}
	if w.from > w.revisits {
		return nil, fail("from: want a round in [0, revisits=%d], got %d", w.revisits, w.from)
	}
	if int64(w.docs)*int64(w.revisits+1) > maxWorkingSetVisits {
		return nil, fail("docs × (revisits+1) = %d exceeds %d", int64(w.docs)*int64(w.revisits+1), maxWorkingSetVisits)
	}
	// A gap above half the documents cannot be kept from one round to the
	// next: the last gap documents of a round must all come after the first
	// gap places of the next, so those places need docs − gap other documents.
	w.gap = w.docs / 2
	if gap >= 0 {
		if gap > w.docs/2 {
			return nil, fail("gap: want an integer in [0, docs/2 = %d], got %d", w.docs/2, gap)
		}
		w.gap = gap
	}
	w.rounds = workingSetRounds(seed, w.docs, w.revisits+1, w.gap)
	w.params = map[string]string{"docs": strconv.Itoa(w.docs), "prefix": strconv.Itoa(w.prefix),
		"suffix": strconv.Itoa(w.suffix), "output": strconv.Itoa(w.output), "revisits": strconv.Itoa(w.revisits),
		"gap": strconv.Itoa(w.gap), "from": strconv.Itoa(w.from),
		"working_set_tokens": strconv.FormatInt(int64(w.docs)*int64(w.prefix), 10)}
	if hasCap {
		w.params["capacity"] = strconv.Itoa(capacity)
		w.params["fill"] = strconv.FormatFloat(fill, 'g', -1, 64)
	}
	return w, nil
}

// workingSetRounds orders docs documents in rounds so that between two
// consecutive visits of a document at least gap other requests come (gap ≤
// docs/2). Round 0 is a seeded shuffle. Round r+1 puts, in its first gap
// places, a seeded random choice among the documents that were not in the
// last gap places of round r, and shuffles the rest behind them: a document
// from round r's tail (position p ≥ docs−gap) lands at q ≥ gap, so docs−p+q−1
// ≥ gap requests separate its visits, and any other one (p < docs−gap) is
// separated by docs−p−1 ≥ gap whatever q is.
func workingSetRounds(seed uint64, docs, rounds, gap int) [][]int32 {
	out := make([][]int32, rounds)
	first := make([]int32, docs)
	for i, d := range rngFor(seed, streamOrder, 0).Perm(docs) {
		first[i] = int32(d)
	}
	out[0] = first
	for r := 1; r < rounds; r++ {
		rng := rngFor(seed, streamOrder, r)
		prev := out[r-1]
		// Eligible for the head: the previous round's first docs−gap documents.
		free := append([]int32(nil), prev[:docs-gap]...)
		tail := prev[docs-gap:]
		rng.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
		cur := make([]int32, 0, docs)
		cur = append(cur, free[:gap]...)
		rest := append(append([]int32(nil), free[gap:]...), tail...)
		rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		out[r] = append(cur, rest...)
	}
	return out
}

func (w *workingSetWorkload) Name() string              { return "working-set" }
func (w *workingSetWorkload) Params() map[string]string { return w.params }

// visit maps a ticket to its round and document: tickets start at round
// from, walk the rounds to the last, then repeat from round from.
func (w *workingSetWorkload) visit(ticket int) (round, doc int) {
	span := (len(w.rounds) - w.from) * w.docs
	pos := w.from*w.docs + ticket%span
	round = pos / w.docs
	return round, int(w.rounds[round][pos%w.docs])
}

// Job is one visit: the document (a system message for chat, the start of
// the prompt for completions) and a question drawn for this (round,
// document), so a visit's prompt does not depend on from.
func (w *workingSetWorkload) Job(ticket int) Job {
	round, d := w.visit(ticket)
	doc := text(rngFor(w.seed, streamSystem, d), w.prefix)
	q := text(rngFor(w.seed, streamText, round*w.docs+d), w.suffix)
	msgs := []kv.Message{{Role: "system", Content: doc}, {Role: "user", Content: q}}
	return Job{Items: []Item{{Prompt: doc + q, Messages: msgs, OutputTokens: w.output}}}
}
