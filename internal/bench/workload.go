package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/kv"
)

// Item is one request of a workload, in both API shapes: Prompt for the
// completions API and Messages for the chat API (and SageMaker, which carries a
// chat body). Generators fill both so one seeded workload can be offered to any
// target.
type Item struct {
	Prompt       string       `json:"prompt,omitempty"`
	Messages     []kv.Message `json:"messages,omitempty"`
	OutputTokens int          `json:"output_tokens"` // sent as max_tokens with ignore_eos
	SessionID    string       `json:"session_id,omitempty"`
	Turn         int          `json:"turn,omitempty"`
	// ThinkTime is waited before this item is sent (multi-turn follow-ups).
	ThinkTime time.Duration `json:"think_time,omitempty"`
}

// Job is what one arrival starts: a single request, or a multi-turn session
// whose turns run one after another.
type Job struct {
	Items []Item
}

// Workload produces jobs by ticket number. Job must be deterministic in
// (seed, ticket) and safe for concurrent use, so the same seeded workload can be
// replayed against several targets and across runs.
type Workload interface {
	Name() string
	Job(ticket int) Job
	// Params returns the resolved parameters, for the run's configuration record.
	Params() map[string]string
}

var (
	_ Workload = (*randomWorkload)(nil)
	_ Workload = (*sharedPrefixWorkload)(nil)
	_ Workload = (*multiTurnWorkload)(nil)
	_ Workload = (*fileWorkload)(nil)
	_ Workload = (*workingSetWorkload)(nil)
)

// words are the vocabulary of generated text. Each is three letters, so with
// the space before it a word is one kv.Tokenize piece of exactly four bytes:
// one token. A text of n words therefore costs exactly n tokens, and texts
// concatenate additively, which is what makes generated lengths exact.
var words = strings.Fields(`
the and for are but not you all any can her was one our out day get has him his how man new now
old see two way who boy did its let put say she too use act add age ago aid aim air art ask bad
bag bed big bit box bus buy car cat cup cut dog dry ear eat egg end eye far fat few fit fix fly
fun gas god gun hat hot ice ill job key kid lab law lay leg lie lot low map mix mud net nor oil
pay pen per pet pie pit pop pot raw red rid row run sad sea set sit six sky son sum sun tax tea
ten tie tip toe top toy try van war web wet win yes yet zoo ant ape arc arm ash bat bee bow bug
cab cap cod cow cry dam den dew dig dim dot dug elm fan fee fig fin fog fox fur gap gem gym hay
hen hip hit hog hop hub hug hum ink inn jam jar jaw jet jog joy keg kit lap lid lip log mad mat`)

// text returns n words drawn from rng, each preceded by a space: exactly n
// tokens under kv.CountTokens.
func text(rng *rand.Rand, n int) string {
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(4 * n)
	for range n {
		b.WriteByte(' ')
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// streams separate the random sequences a workload draws from, so adding a
// parameter to one never shifts another.
const (
	streamInput uint64 = iota + 1
	streamOutput
	streamText
	streamSystem
	streamOrder
	streamArrival
)

func rngFor(seed uint64, stream uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^(stream*0x9e3779b97f4a7c15), uint64(i)))
}

// WorkloadSpec is the parsed form of --workload "name[:key=value,...]".
type WorkloadSpec struct {
	Name   string            `json:"name"`
	Params map[string]string `json:"params,omitempty"`
}

// ParseWorkloadSpec parses "name[:key=value,...]".
func ParseWorkloadSpec(s string) (WorkloadSpec, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(s), ":")
	spec := WorkloadSpec{Name: name, Params: map[string]string{}}
	if name == "" {
		return spec, fmt.Errorf("workload: empty name (want random, shared-prefix, multi-turn, working-set or file)")
	}
	if rest == "" {
		return spec, nil
	}
	for _, kvp := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kvp, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return spec, fmt.Errorf("workload %s: parameter %q is not key=value", name, kvp)
		}
		if _, dup := spec.Params[k]; dup {
			return spec, fmt.Errorf("workload %s: parameter %q given twice", name, k)
		}
		spec.Params[k] = strings.TrimSpace(v)
	}
	return spec, nil
}

// params reads typed values out of a spec and rejects unknown keys.
type params struct {
	workload string
	raw      map[string]string
	used     map[string]bool
	err      error
}

func newParams(spec WorkloadSpec) *params {
	return &params{workload: spec.Name, raw: spec.Params, used: map[string]bool{}}
}

func (p *params) fail(key, format string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("workload %s: %s: %s", p.workload, key, fmt.Sprintf(format, a...))
	}
}

func (p *params) str(key, def string) string {
	p.used[key] = true
	if v, ok := p.raw[key]; ok {
		return v
	}
	return def
}

func (p *params) int(key string, def, lo, hi int) int {
	p.used[key] = true
	v, ok := p.raw[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		p.fail(key, "want an integer in [%d, %d], got %q", lo, hi, v)
		return def
	}
	return n
}

func (p *params) float(key string, def, lo, hi float64) float64 {
	p.used[key] = true
	v, ok := p.raw[key]
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < lo || f > hi || math.IsNaN(f) {
		p.fail(key, "want a number in [%g, %g], got %q", lo, hi, v)
		return def
	}
	return f
}

func (p *params) duration(key string, def time.Duration) time.Duration {
	p.used[key] = true
	v, ok := p.raw[key]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > time.Hour {
		p.fail(key, "want a duration in [0, 1h], got %q", v)
		return def
	}
	return d
}

func (p *params) done() error {
	if p.err != nil {
		return p.err
	}
	var unknown []string
	for k := range p.raw {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("workload %s: unknown parameter(s) %s", p.workload, strings.Join(unknown, ", "))
	}
	return nil
}

// maxTokensParam bounds every length parameter: far above any model context,
// low enough that a typo cannot ask for gigabytes of prompt.
const maxTokensParam = 1 << 20

// NewWorkload builds the workload a spec names.
func NewWorkload(spec WorkloadSpec, seed uint64) (Workload, error) {
	switch spec.Name {
	case "random":
		return newRandom(spec, seed)
	case "shared-prefix":
		return newSharedPrefix(spec, seed)
	case "multi-turn":
		return newMultiTurn(spec, seed)
	case "working-set":
		return newWorkingSet(spec, seed)
	case "file":
		return newFileWorkload(spec)
	default:
		return nil, fmt.Errorf("workload: unknown name %q (want random, shared-prefix, multi-turn, working-set or file)", spec.Name)
	}
}

// --- random -------------------------------------------------------------

// lengthDist draws token lengths around a mean.
type lengthDist struct {
	Kind   string  // fixed, uniform, normal
	Mean   int     //
	Spread float64 // uniform: ±Spread×Mean; normal: stddev Spread×Mean
}

func (d lengthDist) draw(rng *rand.Rand) int {
	n := float64(d.Mean)
	switch d.Kind {
	case "uniform":
		w := d.Spread * float64(d.Mean)
		n = float64(d.Mean) - w + rng.Float64()*2*w
	case "normal":
		n = float64(d.Mean) + rng.NormFloat64()*d.Spread*float64(d.Mean)
	}
	return max(1, int(math.Round(n)))
}

type randomWorkload struct {
	seed        uint64
	input, outp lengthDist
	params      map[string]string
}

func newRandom(spec WorkloadSpec, seed uint64) (*randomWorkload, error) {
	p := newParams(spec)
	w := &randomWorkload{seed: seed}
	kind := p.str("dist", "fixed")
	if kind != "fixed" && kind != "uniform" && kind != "normal" {
		p.fail("dist", "want fixed, uniform or normal, got %q", kind)
	}
	spread := p.float("spread", 0.1, 0, 1)
	w.input = lengthDist{Kind: kind, Mean: p.int("input", 1024, 1, maxTokensParam), Spread: spread}
	w.outp = lengthDist{Kind: kind, Mean: p.int("output", 128, 1, maxTokensParam), Spread: spread}
	if err := p.done(); err != nil {
		return nil, err
	}
	w.params = map[string]string{"input": strconv.Itoa(w.input.Mean), "output": strconv.Itoa(w.outp.Mean),
		"dist": kind, "spread": strconv.FormatFloat(spread, 'g', -1, 64)}
	return w, nil
}

func (w *randomWorkload) Name() string              { return "random" }
func (w *randomWorkload) Params() map[string]string { return w.params }

func (w *randomWorkload) Job(ticket int) Job {
	in := w.input.draw(rngFor(w.seed, streamInput, ticket))
	out := w.outp.draw(rngFor(w.seed, streamOutput, ticket))
	t := text(rngFor(w.seed, streamText, ticket), in)
	return Job{Items: []Item{{Prompt: t, Messages: []kv.Message{{Role: "user", Content: t}}, OutputTokens: out}}}
}

// --- shared-prefix ------------------------------------------------------

// SharedPrefixParams are inference-perf's shared_prefix parameters.
type SharedPrefixParams struct {
	Groups, PromptsPerGroup, SystemTokens, QuestionTokens, OutputTokens int
}

// SharedPrefixPresets are the published settings: inference-perf's canonical
// llm-d benchmark (150 groups × 5 prompts, 6000-token system prompt, 1200-token
// question, 1000 output), its tiered-cache and 70B variants, and scaled-down
// versions that keep the ratios for small machines and tests.
var SharedPrefixPresets = map[string]SharedPrefixParams{
	"inference-perf":        {150, 5, 6000, 1200, 1000},
	"inference-perf-tiered": {250, 5, 16000, 256, 256},
	"inference-perf-70b":    {83, 3, 8000, 1000, 1000},
	"small":                 {15, 5, 600, 120, 100}, // inference-perf at scale 0.1
	"tiny":                  {3, 5, 60, 12, 10},     // inference-perf at scale 0.01, groups 3
}

type sharedPrefixWorkload struct {
	seed    uint64
	p       SharedPrefixParams
	systems []string
	order   []int // seeded permutation of groups×prompts
	params  map[string]string
}

func newSharedPrefix(spec WorkloadSpec, seed uint64) (*sharedPrefixWorkload, error) {
	p := newParams(spec)
	name := p.str("preset", "inference-perf")
	base, ok := SharedPrefixPresets[name]
	if !ok {
		p.fail("preset", "unknown preset %q", name)
	}
	scale := p.float("scale", 1, 0.0001, 10)
	sc := func(n int) int { return max(1, int(math.Round(float64(n)*scale))) }
	sp := SharedPrefixParams{
		Groups:          p.int("groups", sc(base.Groups), 1, 100000),
		PromptsPerGroup: p.int("prompts", base.PromptsPerGroup, 1, 100000),
		SystemTokens:    p.int("system", sc(base.SystemTokens), 0, maxTokensParam),
		QuestionTokens:  p.int("question", sc(base.QuestionTokens), 1, maxTokensParam),
		OutputTokens:    p.int("output", sc(base.OutputTokens), 1, maxTokensParam),
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if int64(sp.Groups)*int64(sp.PromptsPerGroup) > 10_000_000 {
		return nil, fmt.Errorf("workload shared-prefix: groups×prompts = %d exceeds 10,000,000", sp.Groups*sp.PromptsPerGroup)
	}
	w := &sharedPrefixWorkload{seed: seed, p: sp}
	for g := range sp.Groups {
		w.systems = append(w.systems, text(rngFor(seed, streamSystem, g), sp.SystemTokens))
	}
	w.order = rngFor(seed, streamOrder, 0).Perm(sp.Groups * sp.PromptsPerGroup)
	w.params = map[string]string{"preset": name, "scale": strconv.FormatFloat(scale, 'g', -1, 64),
		"groups": strconv.Itoa(sp.Groups), "prompts": strconv.Itoa(sp.PromptsPerGroup),
		"system": strconv.Itoa(sp.SystemTokens), "question": strconv.Itoa(sp.QuestionTokens),
		"output": strconv.Itoa(sp.OutputTokens)}
	return w, nil
}

func (w *sharedPrefixWorkload) Name() string              { return "shared-prefix" }
func (w *sharedPrefixWorkload) Params() map[string]string { return w.params }

// Job walks a seeded shuffle of every (group, prompt) pair, then repeats it, so
// the first groups×prompts tickets send each prompt exactly once.
func (w *sharedPrefixWorkload) Job(ticket int) Job {
	idx := w.order[ticket%len(w.order)]
	g := idx / w.p.PromptsPerGroup
	q := text(rngFor(w.seed, streamText, idx), w.p.QuestionTokens)
	sys := w.systems[g]
	msgs := []kv.Message{{Role: "user", Content: q}}
	if sys != "" {
		msgs = []kv.Message{{Role: "system", Content: sys}, {Role: "user", Content: q}}
	}
	return Job{Items: []Item{{Prompt: sys + q, Messages: msgs, OutputTokens: w.p.OutputTokens}}}
}

// --- multi-turn ---------------------------------------------------------

type multiTurnWorkload struct {
	seed                                     uint64
	sessions, turns, system, question, outpt int
	think                                    time.Duration
	params                                   map[string]string
}

func newMultiTurn(spec WorkloadSpec, seed uint64) (*multiTurnWorkload, error) {
	p := newParams(spec)
	w := &multiTurnWorkload{
		seed:     seed,
		sessions: p.int("sessions", 10, 1, 1_000_000),
		turns:    p.int("turns", 5, 1, 1000),
		system:   p.int("system", 1000, 0, maxTokensParam),
		question: p.int("question", 200, 1, maxTokensParam),
		outpt:    p.int("output", 100, 1, maxTokensParam),
		think:    p.duration("think", time.Second),
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	w.params = map[string]string{"sessions": strconv.Itoa(w.sessions), "turns": strconv.Itoa(w.turns),
		"system": strconv.Itoa(w.system), "question": strconv.Itoa(w.question),
		"output": strconv.Itoa(w.outpt), "think": w.think.String()}
	return w, nil
}

func (w *multiTurnWorkload) Name() string              { return "multi-turn" }
func (w *multiTurnWorkload) Params() map[string]string { return w.params }

// Job is one session: turn k carries the system prompt, every earlier question
// and answer, and a new question. Earlier answers are seeded text of the output
// length rather than what the server said, so the prompts (and the workload
// fingerprint) do not depend on the server; the server still sees a growing,
// shareable prefix.
func (w *multiTurnWorkload) Job(ticket int) Job {
	s := ticket % w.sessions
	cycle := ticket / w.sessions
	id := fmt.Sprintf("session-%d-%d", s, cycle)
	rng := rngFor(w.seed, streamText, s)
	var history []kv.Message
	if w.system > 0 {
		history = append(history, kv.Message{Role: "system", Content: text(rng, w.system)})
	}
	items := make([]Item, 0, w.turns)
	for k := range w.turns {
		history = append(history, kv.Message{Role: "user", Content: text(rng, w.question)})
		msgs := append([]kv.Message(nil), history...)
		it := Item{Prompt: kv.ChatPrompt(msgs), Messages: msgs, OutputTokens: w.outpt, SessionID: id, Turn: k}
		if k > 0 {
			it.ThinkTime = w.think
		}
		items = append(items, it)
		history = append(history, kv.Message{Role: "assistant", Content: text(rng, w.outpt)})
	}
	return Job{Items: items}
}
