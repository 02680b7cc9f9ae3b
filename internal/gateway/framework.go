package gateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/capstan-dev/capstan/internal/kv"
)

// Candidate is one backend as the routing policy sees it.
type Candidate struct {
	Backend  Backend
	InFlight int  // requests in flight to it, across every route
	Draining bool // a Drain call is waiting on it
	Ejected  bool // failed passive or active health checks recently
	// Stats is what the last /metrics scrape of the backend said (zero
	// value, Scraped false, before the first one).
	Stats BackendStats
}

// SchedRequest is what plugins may look at when choosing a backend.
type SchedRequest struct {
	Endpoint string
	Variant  string
	Path     string
	Header   http.Header
	Body     []byte
	// Tried holds the backends already attempted by this invocation.
	Tried map[string]bool
	// Model is the variant's catalog model id (may be empty).
	Model string

	// Parsed lazily, once per invocation, by the plugins that need them.
	parsed    bool
	prompt    string // the text the engine tokenizes ("" when unknown)
	user      string // the OpenAI "user" field
	hashRoot  kv.BlockHash
	blockSize int
	hashes    []kv.BlockHash
	hashed    bool

	// predictedBlocks is set by a cache-aware scorer's Picked hook: the
	// blocks of the prompt it expected the chosen backend to hold.
	predictedBlocks int
}

// Plugin is anything the routing framework runs; Name is its registered type.
type Plugin interface{ Name() string }

// Filter drops candidates that must not serve the request. Filters must not
// reorder the survivors: scorers (round robin) rely on route order.
type Filter interface {
	Plugin
	Filter(ctx context.Context, req *SchedRequest, cands []Candidate) []Candidate
}

// Scorer rates every candidate in [0,1] (higher is better); the result has
// one entry per candidate. The framework clamps and applies the weight.
type Scorer interface {
	Plugin
	Score(ctx context.Context, req *SchedRequest, cands []Candidate) []float64
}

// PostPicker is implemented by plugins that learn from the decision (an
// approximate prefix index records where the prompt's blocks now live).
type PostPicker interface {
	Picked(ctx context.Context, req *SchedRequest, chosen Candidate)
}

// Deps are what a plugin factory may use.
type Deps struct {
	// Rand returns a pseudo-random number in [0,1); safe for concurrent use
	// and seeded from Options.Seed so tests are deterministic.
	Rand func() float64
	// KV is the gateway's precise KV block index, fed by engine KV events.
	KV *kvIndex
}

// Factory builds a fresh plugin instance (one per variant route: plugin state
// such as a round-robin cursor is per variant).
type Factory func(Deps) (Plugin, error)

// WeightedScorer is a scorer name and its weight in a profile.
type WeightedScorer struct {
	Name   string
	Weight float64
}

// Profile names the plugins one routing strategy runs, in order.
type Profile struct {
	Filters []string
	Scorers []WeightedScorer
}

type weighted struct {
	Scorer
	weight float64
}

// scheduler runs one profile: filters, then weighted scorers, then picks the
// highest total, breaking ties at random.
type scheduler struct {
	filters []Filter
	scorers []weighted
	post    []PostPicker
	rand    func() float64
}

func (reg *Registry) newScheduler(p Profile, deps Deps) (*scheduler, error) {
	s := &scheduler{rand: deps.Rand}
	for _, name := range append(append([]string(nil), alwaysFilters...), p.Filters...) {
		pl, err := reg.build(name, deps)
		if err != nil {
			return nil, err
		}
		f, ok := pl.(Filter)
		if !ok {
			return nil, fmt.Errorf("routing plugin %q is not a filter", name)
		}
		s.filters = append(s.filters, f)
	}
	for _, ws := range p.Scorers {
		pl, err := reg.build(ws.Name, deps)
		if err != nil {
			return nil, err
		}
		sc, ok := pl.(Scorer)
		if !ok {
			return nil, fmt.Errorf("routing plugin %q is not a scorer", ws.Name)
		}
		if ws.Weight < 0 {
			return nil, fmt.Errorf("routing scorer %q: negative weight %v", ws.Name, ws.Weight)
		}
		s.scorers = append(s.scorers, weighted{sc, ws.Weight})
		if pp, ok := pl.(PostPicker); ok {
			s.post = append(s.post, pp)
		}
	}
	return s, nil
}

// pick returns the chosen candidate, or false when filters left none.
func (s *scheduler) pick(ctx context.Context, req *SchedRequest, cands []Candidate) (Candidate, bool) {
	c, ok := s.choose(ctx, req, cands)
	if ok {
		for _, p := range s.post {
			p.Picked(ctx, req, c)
		}
	}
	return c, ok
}

func (s *scheduler) choose(ctx context.Context, req *SchedRequest, cands []Candidate) (Candidate, bool) {
	for _, f := range s.filters {
		cands = f.Filter(ctx, req, cands)
		if len(cands) == 0 {
			return Candidate{}, false
		}
	}
	if len(cands) == 1 {
		return cands[0], true
	}
	total := make([]float64, len(cands))
	for _, sc := range s.scorers {
		scores := sc.Score(ctx, req, cands)
		for i := range cands {
			v := 0.0
			if i < len(scores) {
				v = min(max(scores[i], 0), 1)
			}
			total[i] += sc.weight * v
		}
	}
	const eps = 1e-9
	best := []int{0}
	for i := 1; i < len(cands); i++ {
		switch {
		case total[i] > total[best[0]]+eps:
			best = append(best[:0], i)
		case total[i] >= total[best[0]]-eps:
			best = append(best, i)
		}
	}
	if len(best) == 1 {
		return cands[best[0]], true
	}
	i := int(s.rand() * float64(len(best)))
	return cands[best[min(i, len(best)-1)]], true
}
