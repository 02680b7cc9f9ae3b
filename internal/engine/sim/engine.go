package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
)

// L1Cache is the node-local CPU tier (tier.L1 satisfies it). Safe for
// concurrent use.
type L1Cache interface {
	MatchPrefix(hashes []kv.BlockHash) int
	Put(hashes ...kv.BlockHash) (evicted []kv.BlockHash)
}

// L2Cache is a tier shared by replicas: the node's tieredstorage
// (tier.Disk) or Redis (tier.Redis, "l2"). Any error is treated as a miss
// (lookups) or a lost write (puts); the engine never fails a request because
// of a shared tier. Safe for concurrent use.
type L2Cache interface {
	MatchPrefix(ctx context.Context, hashes []kv.BlockHash) (int, error)
	Put(ctx context.Context, hashes []kv.BlockHash) error
}

// EventSink receives one batch of KV-cache events per engine step that
// changed the cache, and one per completed write to a shared tier. Publish
// must not block and must be safe for concurrent use (the shared tiers'
// writers publish from their own goroutines); the batch is owned by the
// sink.
type EventSink interface {
	Publish(b EventBatch)
}

// EventKind tags a KVEvent.
type EventKind uint8

// The vLLM KV event kinds.
const (
	BlockStored EventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

// KVEvent is one vLLM-style KV cache event; Medium is "GPU", "CPU" (L1),
// "DISK" (tieredstorage) or "REMOTE" (Redis).
type KVEvent struct {
	Kind      EventKind
	Hashes    []uint64
	Parent    *uint64
	TokenIDs  []uint32
	BlockSize int
	Medium    string
}

// EventBatch is the events of one engine step, stamped with its simulated time.
type EventBatch struct {
	TS     float64 // seconds since the Unix epoch
	Events []KVEvent
}

// ErrQueueFull is returned by Submit when --max-waiting requests already wait.
var ErrQueueFull = errors.New("waiting queue is full")

// ErrStopped is returned by Submit after the engine stopped.
var ErrStopped = errors.New("engine stopped")

// Engine runs the continuous-batching scheduler over the paged KV cache in
// one goroutine (Run) and hands tokens to request handlers. Submit is safe for
// concurrent use; everything else belongs to the engine goroutine.
type Engine struct {
	opts     Options
	model    catalog.Model
	roof     *Roofline
	clk      clock.Clock
	metrics  *Metrics
	log      *slog.Logger
	root     kv.BlockHash
	l1       L1Cache
	shared   []*sharedTier // below L1, in lookup order
	events   EventSink
	kvBlock  int64 // bytes of KV in one block (whole replica)
	maxLen   int   // max model length (prompt + output)
	epoch    time.Time
	simEpoch time.Time

	inMu    sync.Mutex
	inbox   []*seq
	spare   []*seq
	wakeup  chan struct{}
	waitCnt atomic.Int64 // submitted but not yet admitted
	nextID  atomic.Int64
	stopped atomic.Bool
	reset   atomic.Bool   // a prefix-cache reset was requested
	done    chan struct{} // closed when Run returns
	// simClock mirrors simNow for the shared tiers' writers, which stamp
	// their events on the simulated timeline.
	simClock atomic.Int64

	// engine goroutine state
	bm      *blockManager
	waiting []*seq
	running []*seq
	simNow  time.Duration
	step    stepPlan
	pending []KVEvent
}

// stepPlan is what one step computes.
type stepPlan struct {
	seqs []*seq
	Step
	loadL1    int64                 // bytes loaded from L1 this step
	load      [maxSharedTiers]int64 // bytes loaded from each shared tier
	preempted int
}

// Deps are an engine's collaborators; nil fields disable the feature.
type Deps struct {
	Clock   clock.Clock
	Metrics *Metrics
	Log     *slog.Logger
	L1      L1Cache
	// TieredStorage is the node's tieredstorage, asked after L1.
	TieredStorage L2Cache
	// L2 is Redis, asked after tieredstorage.
	L2     L2Cache
	Events EventSink
}

// NewEngine validates opts against the catalog and sizes the KV cache. A
// model that does not fit is an error.
func NewEngine(opts Options, d Deps) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cat := catalog.Default()
	m, served, err := resolveModel(cat, opts)
	if err != nil {
		return nil, err
	}
	if opts.ModelDir != "" {
		m = withWeightHeaders(m, opts.ModelDir, d.Log)
	}
	if opts.ServedModelName == "" {
		opts.ServedModelName = served
	}
	g, err := cat.GPU(opts.GPU)
	if err != nil {
		return nil, err
	}
	if g.DeviceKind() == catalog.DeviceCPU && opts.TensorParallel > 1 {
		return nil, fmt.Errorf("--tensor-parallel %d: %s is a CPU instance (one device); tensor parallelism needs GPUs", opts.TensorParallel, g.Name)
	}
	var mig *catalog.MIGProfile
	if opts.MIGProfile != "" {
		p, err := g.MIGProfile(opts.MIGProfile)
		if err != nil {
			return nil, err
		}
		mig = &p
	}
	roof, err := NewRoofline(m, g, opts.TensorParallel, mig)
	if err != nil {
		return nil, err
	}
	capTok, err := roof.KVCapacityTokens(opts.GPUMemoryUtilization)
	if err != nil {
		return nil, err
	}
	nBlocks := int(capTok / int64(opts.BlockSize))
	if nBlocks < 1 {
		return nil, errors.New("model " + m.ID + " does not fit: less than one KV block of memory left after the weights")
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(opts.ServedModelName)
	}
	e := &Engine{
		opts: opts, model: m, roof: roof, clk: d.Clock, metrics: d.Metrics, log: d.Log,
		root: kv.RootHash(m.ID), l1: d.L1, events: d.Events,
		kvBlock: m.KVBytesPerToken() * int64(opts.BlockSize),
		maxLen:  min(m.MaxModelLen, nBlocks*opts.BlockSize),
		wakeup:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		bm:      newBlockManager(nBlocks),
	}
	if e.maxLen <= 0 {
		e.maxLen = nBlocks * opts.BlockSize
	}
	if opts.TieredStorageBytes > 0 && opts.TieredStorageBytes < e.kvBlock {
		return nil, fmt.Errorf("--tiered-storage-bytes: %d is less than one KV block of %s (%d bytes)", opts.TieredStorageBytes, m.ID, e.kvBlock)
	}
	e.setShared(d.TieredStorage, d.L2)
	e.epoch = e.clk.Now()
	e.simEpoch = e.epoch
	e.metrics.setCacheConfig(opts, g.DeviceKind(), nBlocks)
	return e, nil
}

// NumGPUBlocks is the KV cache size in blocks.
func (e *Engine) NumGPUBlocks() int { return e.bm.total() }

// MaxModelLen is the longest sequence (prompt + output tokens) accepted.
func (e *Engine) MaxModelLen() int { return e.maxLen }

// Model is the catalog model served.
func (e *Engine) Model() catalog.Model { return e.model }

// Roofline is the step-time model in use.
func (e *Engine) Roofline() *Roofline { return e.roof }

// prepare tokenizes nothing (the caller did) but hashes the prompt blocks and
// asks the shared tiers (tieredstorage, Redis) which of them they hold. It
// runs on the handler goroutine so the engine loop never waits on a disk or
// the network.
func (e *Engine) prepare(ctx context.Context, r *request) {
	r.hashes = kv.BlockHashes(e.root, r.prompt, e.opts.BlockSize)
	if len(e.shared) == 0 || len(r.hashes) == 0 {
		return
	}
	e.lookupShared(ctx, r, min(matchable(len(r.prompt), e.opts.BlockSize), len(r.hashes)))
}

// localPrefix counts the leading hashes this replica holds on its GPU or in
// L1 right now: the shared tiers need not be asked for them. Any goroutine.
func (e *Engine) localPrefix(hashes []kv.BlockHash) int {
	n := e.bm.residentPrefix(hashes)
	if e.l1 != nil && n < len(hashes) {
		n += e.l1.MatchPrefix(hashes[n:])
	}
	return n
}

// matchable is how many leading full blocks may be served from cache: the
// last prompt token is always computed (it yields the first output token).
func matchable(promptLen, blockSize int) int { return (promptLen - 1) / blockSize }

// Submit queues a request. It fails fast with ErrQueueFull when the waiting
// queue is at --max-waiting.
func (e *Engine) Submit(r request) (*seq, error) {
	if e.stopped.Load() {
		return nil, ErrStopped
	}
	if e.waitCnt.Add(1) > int64(e.opts.MaxWaiting) {
		e.waitCnt.Add(-1)
		return nil, ErrQueueFull
	}
	s := newSeq(r)
	s.id = e.nextID.Add(1)
	e.inMu.Lock()
	e.inbox = append(e.inbox, s)
	e.inMu.Unlock()
	e.poke()
	return s, nil
}

// ResetPrefixCache asks the engine to drop every cached block at its next
// step (vLLM's /reset_prefix_cache); blocks in use stay allocated.
func (e *Engine) ResetPrefixCache() {
	e.reset.Store(true)
	e.poke()
}

// Abort asks the engine to drop s at its next step.
func (e *Engine) Abort(s *seq) {
	if !s.aborted.Swap(true) {
		e.poke()
	}
}

func (e *Engine) poke() {
	select {
	case e.wakeup <- struct{}{}:
	default:
	}
}

// wallToSim maps a wall instant to the simulated timeline.
func (e *Engine) wallToSim(t time.Time) time.Duration {
	return time.Duration(float64(t.Sub(e.epoch)) / e.opts.TimeScale)
}

// Run is the engine loop: drain new requests, plan a step, sleep for its
// simulated duration (scaled by --time-scale), apply it. It returns when ctx
// ends, failing every unfinished request.
func (e *Engine) Run(ctx context.Context) error {
	defer e.shutdown()
	e.startWriters(ctx)
	for {
		if len(e.running) == 0 && len(e.waiting) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-e.wakeup:
			}
			if e.opts.TimeScale > 0 {
				e.simNow = max(e.simNow, e.wallToSim(e.clk.Now()))
			}
		} else if ctx.Err() != nil {
			return nil
		}
		d := e.plan()
		if e.opts.TimeScale > 0 && d > 0 {
			deadline := e.epoch.Add(time.Duration(float64(e.simNow) * e.opts.TimeScale))
			if wait := deadline.Sub(e.clk.Now()); wait > 0 {
				if err := clock.Sleep(ctx, e.clk, wait); err != nil {
					return nil
				}
			}
		}
		e.apply()
	}
}

// RunStep plans and applies one step without sleeping and returns its
// simulated duration: the synchronous cycle tests and benchmarks drive.
func (e *Engine) RunStep() time.Duration {
	d := e.plan()
	e.apply()
	return d
}

// drain moves submitted requests into the waiting queue.
func (e *Engine) drain() {
	e.inMu.Lock()
	in := e.inbox
	e.inbox = e.spare[:0]
	e.inMu.Unlock()
	for _, s := range in {
		s.arrivalSim = e.simNow
		if e.opts.TimeScale > 0 {
			s.arrivalSim = min(e.wallToSim(s.arrival), e.simNow)
		}
		e.waiting = append(e.waiting, s)
	}
	clear(in)
	e.spare = in
}

// plan drains the inbox, drops aborted requests, schedules the step and
// advances simulated time by its duration, which it returns.
func (e *Engine) plan() time.Duration {
	if e.reset.Swap(false) {
		e.clearCache()
	}
	e.drain()
	e.dropAborted()
	e.schedule()
	p := &e.step
	if p.Tokens == 0 {
		return 0
	}
	d := e.roof.StepTime(p.Step) + loadTime(p.loadL1, e.opts.L1Bandwidth)
	for i, t := range e.shared {
		d += loadTime(p.load[i], t.bandwidth)
	}
	d = time.Duration(float64(d) * e.opts.SlowFactor)
	e.simNow += d
	return d
}

// loadTime is how long moving bytes into the GPU takes at bandwidth B/s.
func loadTime(bytes int64, bandwidth float64) time.Duration {
	if bytes <= 0 || bandwidth <= 0 {
		return 0
	}
	return time.Duration(float64(bytes) / bandwidth * float64(time.Second))
}

func (e *Engine) dropAborted() {
	keep := e.running[:0]
	for _, s := range e.running {
		if s.aborted.Load() {
			e.finish(s, "abort")
			continue
		}
		keep = append(keep, s)
	}
	clear(e.running[len(keep):])
	e.running = keep
	keepW := e.waiting[:0]
	for _, s := range e.waiting {
		if s.aborted.Load() {
			e.finish(s, "abort")
			continue
		}
		keepW = append(keepW, s)
	}
	clear(e.waiting[len(keepW):])
	e.waiting = keepW
}

// blocksFor is the number of blocks n tokens occupy.
func (e *Engine) blocksFor(n int) int { return (n + e.opts.BlockSize - 1) / e.opts.BlockSize }

// add counts s's scheduled tokens into the step.
func (p *stepPlan) add(s *seq) {
	p.Tokens += s.sched
	p.Ctx += int64(s.numComputed + s.sched)
	p.Attn += attended(s.numComputed, s.sched)
	if s.numComputed+s.sched == s.total() {
		p.Logits++ // it emits a token
	}
}

// schedule builds e.step as vLLM's V1 scheduler does: running sequences
// first (one decode token each, or the next prefill chunk), preempting the
// youngest running sequence when blocks run out; then waiting sequences in
// FIFO order while the token budget, max-num-seqs and free blocks allow.
func (e *Engine) schedule() {
	p := &e.step
	clear(p.seqs)
	p.seqs, p.Step, p.loadL1, p.load, p.preempted = p.seqs[:0], Step{}, 0, [maxSharedTiers]int64{}, 0
	budget := e.opts.MaxNumBatchedTokens
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := min(s.total()-s.numComputed, budget)
		if n <= 0 {
			continue
		}
		need := e.blocksFor(s.numComputed+n) - len(s.blocks)
		ok := true
		for need > 0 {
			var got bool
			if s.blocks, got = e.bm.allocate(s.blocks, need); got {
				break
			}
			victim := e.running[len(e.running)-1]
			e.preempt(victim)
			p.preempted++
			if victim == s {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		s.sched = n
		p.seqs = append(p.seqs, s)
		p.add(s)
		budget -= n
	}
	if p.preempted > 0 {
		return // as vLLM: no admissions in a step that had to preempt
	}
	for len(e.waiting) > 0 && len(e.running) < e.opts.MaxNumSeqs && budget > 0 {
		s := e.waiting[0]
		if !e.admit(s, budget) {
			if len(e.running) == 0 {
				// Nothing running will ever free blocks for it.
				e.waiting = e.waiting[1:]
				e.fail(s, "request needs more KV cache than the replica has")
				continue
			}
			break
		}
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		p.seqs = append(p.seqs, s)
		p.add(s)
		budget -= s.sched
	}
	if len(e.waiting) == 0 {
		e.waiting = e.waiting[:0:0]
	}
}

// admit looks the prompt up GPU → L1 → tieredstorage → Redis (contiguous
// from block 0; the shared tiers answered in prepare), references or loads
// the hits and allocates blocks for the first chunk. It changes nothing and
// returns false when the blocks are not there.
func (e *Engine) admit(s *seq, budget int) bool {
	bs := e.opts.BlockSize
	limit := matchable(len(s.prompt), bs)
	hashes := s.hashes[:min(limit, len(s.hashes))]
	gpu, idle := e.bm.match(hashes)
	l1 := 0
	if e.l1 != nil && gpu < len(hashes) {
		l1 = e.l1.MatchPrefix(hashes[gpu:])
	}
	got, hit := e.sharedHits(s, gpu+l1, len(hashes))
	hitTok := hit * bs
	n := min(s.total()-hitTok, budget)
	need := e.blocksFor(hitTok+n) - gpu
	if need > e.bm.numFree-idle {
		return false
	}
	s.blocks = e.bm.acquire(s.blocks[:0], hashes[:gpu])
	s.blocks, _ = e.bm.allocate(s.blocks, need)
	for k := gpu; k < hit; k++ {
		if e.bm.commit(s.blocks[k], hashes[k]) {
			e.storedEvent(s, k, k+1)
		}
	}
	s.committed = hit
	s.numComputed = hitTok
	s.sched = n
	p := &e.step
	p.loadL1 += int64(l1) * e.kvBlock
	e.metrics.l1.loaded(l1, e.kvBlock)
	for i, t := range e.shared {
		p.load[i] += int64(got[i]) * e.kvBlock
		t.m.loaded(got[i], e.kvBlock)
	}
	if !s.admitted {
		// vLLM counts prefix-cache queries and hits once per request.
		s.admitted = true
		s.cachedTok = hitTok
		e.waitCnt.Add(-1)
		e.metrics.PrefixQueries.Add(float64(len(s.prompt)))
		e.metrics.PrefixHits.Add(float64(hitTok))
		s.schedSim = e.simNow
		e.metrics.QueueTime.Observe(e.seconds(e.simNow - s.arrivalSim))
	}
	return true
}

// preempt frees a running sequence's blocks and puts it back at the head of
// the waiting queue to be recomputed (vLLM's recompute preemption).
func (e *Engine) preempt(s *seq) {
	e.running[len(e.running)-1] = nil
	e.running = e.running[:len(e.running)-1]
	e.bm.release(s.blocks)
	s.blocks = s.blocks[:0]
	s.numComputed, s.committed, s.sched = 0, 0, 0
	e.waiting = append(e.waiting, nil)
	copy(e.waiting[1:], e.waiting)
	e.waiting[0] = s
	e.metrics.Preemptions.Inc()
}

// apply advances every scheduled sequence by its tokens, samples output
// tokens where a sequence has caught up, finishes completed sequences and
// publishes the step's cache events and gauges.
func (e *Engine) apply() {
	p := &e.step
	bs := e.opts.BlockSize
	finished := false
	for _, s := range p.seqs {
		s.numComputed += s.sched
		s.sched = 0
		// Index newly completed prompt blocks in the prefix cache.
		full := min(s.numComputed/bs, len(s.hashes))
		if full > s.committed {
			from := s.committed
			for k := from; k < full; k++ {
				if e.bm.commit(s.blocks[k], s.hashes[k]) {
					e.storedEvent(s, k, k+1)
					e.queueShared(s.hashes[k])
				}
			}
			s.committed = full
		}
		if s.numComputed < s.total() {
			continue // mid-prefill
		}
		if e.sample(s) {
			finished = true
		}
	}
	if finished {
		keep := e.running[:0]
		for _, s := range e.running {
			if !s.over {
				keep = append(keep, s)
			}
		}
		clear(e.running[len(keep):])
		e.running = keep
	}
	e.simClock.Store(int64(e.simNow))
	e.offload()
	e.flushEvents()
	e.metrics.Running.Set(float64(len(e.running)))
	e.metrics.Waiting.Set(float64(len(e.waiting)))
	e.metrics.KVUsage.Set(e.bm.usage())
}

// sample generates one token for s and reports whether s finished.
func (e *Engine) sample(s *seq) bool {
	w := uint16(s.rng.next() % uint64(len(words)))
	s.generated++
	k := s.generated
	now := e.simNow
	if len(s.stop) > 0 {
		s.text.WriteString(tokenText(w, k == 1))
		if hasStop(s.text.String(), s.stop, len(words[w])+1) {
			e.finish(s, "stop")
			return true
		}
	}
	if k == 1 {
		e.metrics.TTFT.Observe(e.seconds(now - s.arrivalSim))
	} else {
		e.metrics.ITL.Observe(e.seconds(now - s.lastTokSim))
	}
	s.lastTokSim = now
	e.metrics.GenerationTokens.Inc()
	s.emit(w)
	switch {
	case s.eosAt > 0 && k >= s.eosAt:
		e.finish(s, "stop")
	case k >= s.maxTokens || len(s.prompt)+k >= e.maxLen:
		e.finish(s, "length")
	default:
		return false
	}
	return true
}

// hasStop reports whether text, whose last tail bytes are new, now contains
// a stop string.
func hasStop(text string, stop []string, tail int) bool {
	for _, st := range stop {
		from := max(0, len(text)-tail-len(st))
		if strings.Contains(text[from:], st) {
			return true
		}
	}
	return false
}

// finish releases s's blocks and completes it with reason, recording its
// request-level metrics.
func (e *Engine) finish(s *seq, reason string) {
	if s.over {
		return
	}
	e.bm.release(s.blocks)
	s.blocks = s.blocks[:0]
	if !s.admitted {
		e.waitCnt.Add(-1)
		s.admitted = true
		s.cachedTok = 0
	}
	s.over = true
	e.metrics.finished(s, reason, e.seconds(e.simNow-s.arrivalSim))
	s.finish(reason, "")
}

// fail completes s with an error the handler turns into a 500.
func (e *Engine) fail(s *seq, msg string) {
	e.waitCnt.Add(-1)
	s.admitted = true
	s.over = true
	s.finish("error", msg)
}

// seconds converts a simulated duration to seconds for the metrics.
func (e *Engine) seconds(d time.Duration) float64 { return d.Seconds() }

// shutdown fails everything still queued or running.
func (e *Engine) shutdown() {
	e.stopped.Store(true)
	e.drain()
	for _, s := range e.running {
		e.finish(s, "abort")
	}
	for _, s := range e.waiting {
		e.finish(s, "abort")
	}
	e.running, e.waiting = nil, nil
	e.flushEvents()
	close(e.done)
}
