package sim

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/internal/kv"
)

// words is the simulated vocabulary: one generated token is one word.
var words = [...]string{
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "was", "on", "be", "at", "by",
	"this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you", "were", "all", "we",
	"her", "she", "there", "would", "their", "will", "when", "who", "him", "been", "has", "more", "if", "no", "out", "so",
	"said", "what", "up", "its", "about", "into", "than", "them", "can", "only", "other", "new", "some", "could", "time", "these",
	"two", "may", "then", "first", "any", "like", "now", "my", "such", "make", "over", "our", "even", "most", "after", "also",
	"model", "token", "cache", "engine", "batch", "memory", "signal", "river", "stone", "light", "garden", "window", "number", "system", "answer", "reason",
}

// tokenText is the text of generated token i: the first word bare, later
// words with a leading space (as BPE tokens carry it).
func tokenText(word uint16, first bool) string {
	if first {
		return words[word]
	}
	return " " + words[word]
}

// rng is splitmix64: tiny, allocation-free, good enough for word choice.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// request is what a handler asks the engine to run.
type request struct {
	prompt    []uint32
	hashes    []kv.BlockHash // chained hashes of the full prompt blocks
	maxTokens int
	ignoreEOS bool
	stop      []string
	seed      uint64 // PRNG seed: request seed (or --seed) mixed with the prompt hash
	arrival   time.Time
	shared    [maxSharedTiers]span // prompt blocks each shared tier reported holding
}

// seq is one request inside the engine. Fields above the mutex are owned by
// the engine goroutine; the handler reads only the output section under mu,
// after a notify, and the aborted flag is shared.
type seq struct {
	request
	id int64

	// engine-owned
	blocks      []int32
	numComputed int // tokens whose KV is in blocks
	generated   int // tokens sampled so far (including ones hidden by stop)
	committed   int // leading prompt blocks indexed in the prefix cache
	cachedTok   int // prompt tokens served from a cache tier at first admission
	admitted    bool
	over        bool // finished, as the engine sees it
	rng         rng
	eosAt       int // generation ends with "stop" after this many tokens; 0 = never
	text        strings.Builder
	arrivalSim  time.Duration
	schedSim    time.Duration
	lastTokSim  time.Duration
	sched       int // tokens scheduled in the current step

	aborted atomic.Bool

	mu       sync.Mutex
	out      []uint16
	done     bool
	reason   string // finish_reason once done
	cached   int    // reported cached_tokens
	notify   chan struct{}
	errorMsg string // set when the engine gives up on the request
}

func newSeq(r request) *seq {
	s := &seq{request: r, notify: make(chan struct{}, 1)}
	s.rng.s = r.seed
	if !r.ignoreEOS {
		// EOS at a seeded point in [1, 2·max): about half the requests stop
		// early with finish_reason "stop", the rest run to max_tokens.
		n := 1 + int(s.rng.next()%uint64(2*max(r.maxTokens, 1)))
		if n < r.maxTokens {
			s.eosAt = n
		}
	}
	s.out = make([]uint16, 0, min(r.maxTokens, 4096))
	return s
}

// total is the number of tokens in the sequence: prompt plus generated.
func (s *seq) total() int { return len(s.prompt) + s.generated }

func (s *seq) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// emit publishes one token to the handler.
func (s *seq) emit(w uint16) {
	s.mu.Lock()
	s.out = append(s.out, w)
	s.mu.Unlock()
	s.wake()
}

// finish marks the sequence done with reason.
func (s *seq) finish(reason, errMsg string) {
	s.mu.Lock()
	s.done, s.reason, s.cached, s.errorMsg = true, reason, s.cachedTok, errMsg
	s.mu.Unlock()
	s.wake()
}

// read copies tokens from index from on into dst and reports the state.
func (s *seq) read(dst []uint16, from int) (out []uint16, done bool, reason string) {
	s.mu.Lock()
	dst = append(dst[:0], s.out[from:]...)
	done, reason = s.done, s.reason
	s.mu.Unlock()
	return dst, done, reason
}
