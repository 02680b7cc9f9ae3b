package sim

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/tier"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPrefixCacheHitLowersTTFT(t *testing.T) {
	e := newTestEngine(t, testOptions(), Deps{})
	text := prompt("aaaa", 4000)
	a := submit(t, e, text, 4, true)
	coldTTFT := ttft(t, e, a)
	drive(t, e, 100, a)
	b := submit(t, e, text, 4, true)
	warmTTFT := ttft(t, e, b)
	drive(t, e, 100, b)
	if a.cached != 0 {
		t.Errorf("first request reported %d cached tokens", a.cached)
	}
	// All full blocks before the last token are reused: (4000-1)/16 blocks.
	if want := (4000 - 1) / 16 * 16; b.cached != want {
		t.Errorf("second request cached_tokens = %d, want %d", b.cached, want)
	}
	if !(warmTTFT < coldTTFT/5) {
		t.Errorf("TTFT cold %.4fs, warm %.4fs: want warm far lower", coldTTFT, warmTTFT)
	}
	if got := testutil.ToFloat64(e.metrics.PrefixHits); got != float64(b.cached) {
		t.Errorf("prefix_cache_hits_total = %v, want %d", got, b.cached)
	}
	if got := testutil.ToFloat64(e.metrics.PrefixQueries); got != 8000 {
		t.Errorf("prefix_cache_queries_total = %v, want 8000", got)
	}
}

func TestChunkedPrefillAndBudget(t *testing.T) {
	o := testOptions()
	o.MaxNumBatchedTokens = 1000
	e := newTestEngine(t, o, Deps{})
	s := submit(t, e, prompt("long", 3500), 2, true)
	steps := 0
	for s.outLen() == 0 {
		e.RunStep()
		if e.step.Tokens > 1000 {
			t.Fatalf("step scheduled %d tokens over the 1000 budget", e.step.Tokens)
		}
		steps++
	}
	if steps != 4 {
		t.Fatalf("first token after %d steps, want 4 chunks of ≤1000 tokens", steps)
	}
}

// TestStepCountsScoredTokensAndAttention: a chunked prompt is scored (its
// LM head run) only by the chunk that ends it, each chunk attends to what
// came before it, and a decode step scores its one token.
func TestStepCountsScoredTokensAndAttention(t *testing.T) {
	o := testOptions()
	o.MaxNumBatchedTokens = 1000
	e := newTestEngine(t, o, Deps{})
	submit(t, e, prompt("long", 1500), 3, true)
	want := []Step{
		{Tokens: 1000, Logits: 0, Ctx: 1000, Attn: attended(0, 1000)},
		{Tokens: 500, Logits: 1, Ctx: 1500, Attn: attended(1000, 500)},
		{Tokens: 1, Logits: 1, Ctx: 1501, Attn: 1501},
	}
	for i, w := range want {
		e.RunStep()
		if e.step.Step != w {
			t.Fatalf("step %d = %+v, want %+v", i, e.step.Step, w)
		}
	}
	if attended(1000, 500) != 500*1000+500*501/2 {
		t.Fatalf("attended(1000, 500) = %d", attended(1000, 500))
	}
}

func TestMaxNumSeqsAndFIFO(t *testing.T) {
	o := testOptions()
	o.MaxNumSeqs = 3
	e := newTestEngine(t, o, Deps{})
	var seqs []*seq
	for i := range 5 {
		seqs = append(seqs, submit(t, e, prompt(string(rune('a'+i))+"xxx", 40), 10, true))
	}
	e.RunStep()
	if len(e.running) != 3 || len(e.waiting) != 2 {
		t.Fatalf("running %d waiting %d, want 3 and 2", len(e.running), len(e.waiting))
	}
	if e.running[0] != seqs[0] || e.waiting[0] != seqs[3] {
		t.Fatal("admission is not FIFO")
	}
	drive(t, e, 1000, seqs...)
	for i, s := range seqs {
		if s.outLen() != 10 || s.reason != "length" {
			t.Errorf("seq %d: %d tokens, reason %q; want 10, length", i, s.outLen(), s.reason)
		}
	}
}

// tinyOptions leaves room for only a few blocks: 8B weights are 16.06 GB of
// the H100's 80 GB.
func tinyOptions(blocks int) Options {
	o := testOptions()
	o.GPUMemoryUtilization = (16.06e9 + float64(blocks*16*131072) + 1e5) / 80e9
	return o
}

func TestEvictionUnderMemoryPressure(t *testing.T) {
	sink := &fakeSink{}
	e := newTestEngine(t, tinyOptions(20), Deps{Events: sink})
	if n := e.NumGPUBlocks(); n != 20 {
		t.Fatalf("num blocks %d, want 20", n)
	}
	a := submit(t, e, prompt("aaaa", 161), 1, true) // 10 full blocks cached
	drive(t, e, 100, a)
	b := submit(t, e, prompt("bbbb", 161), 1, true) // 10 more: fits beside a's
	drive(t, e, 100, b)
	c := submit(t, e, prompt("cccc", 161), 1, true) // must evict a's (LRU)
	drive(t, e, 100, c)
	a2 := submit(t, e, prompt("aaaa", 161), 1, true)
	drive(t, e, 100, a2)
	if a2.cached != 0 {
		t.Errorf("a's blocks should have been evicted, got %d cached tokens", a2.cached)
	}
	var stored, removed int
	for _, ev := range sink.events() {
		switch ev.Kind {
		case BlockStored:
			stored += len(ev.Hashes)
		case BlockRemoved:
			removed += len(ev.Hashes)
			if ev.Medium != "GPU" {
				t.Errorf("removed medium %q", ev.Medium)
			}
		}
	}
	if stored != 40 || removed < 20 {
		t.Errorf("events: %d blocks stored (want 40), %d removed (want ≥20)", stored, removed)
	}
	if u := e.bm.usage(); u != 0 {
		t.Errorf("usage %.2f after all requests finished, want 0", u)
	}
}

func TestPreemptionRecomputesAndCompletes(t *testing.T) {
	e := newTestEngine(t, tinyOptions(12), Deps{})
	// Three sequences of 2 blocks of prompt each growing by 48 tokens: they
	// cannot all hold 5 blocks at once in 12.
	var seqs []*seq
	for i := range 3 {
		seqs = append(seqs, submit(t, e, prompt(string(rune('p'+i))+"rmp", 32), 48, true))
	}
	drive(t, e, 5000, seqs...)
	if p := testutil.ToFloat64(e.metrics.Preemptions); p == 0 {
		t.Fatal("expected preemptions under memory pressure")
	}
	for i, s := range seqs {
		if s.outLen() != 48 || s.reason != "length" {
			t.Errorf("seq %d: %d tokens, %q; want all 48 despite preemption", i, s.outLen(), s.reason)
		}
	}
	if got := testutil.ToFloat64(e.metrics.Success.WithLabelValues("length")); got != 3 {
		t.Errorf("success{length} = %v, want 3", got)
	}
}

func TestRequestLargerThanCacheFails(t *testing.T) {
	e := newTestEngine(t, tinyOptions(4), Deps{})
	if e.MaxModelLen() != 64 {
		t.Fatalf("max model len %d, want the 64-token cache", e.MaxModelLen())
	}
}

func TestL1HitAfterGPUEviction(t *testing.T) {
	sink := &fakeSink{}
	o := tinyOptions(20)
	e := newTestEngine(t, o, Deps{Events: sink})
	e.l1 = tier.NewL1(1<<30, e.kvBlock)
	a := submit(t, e, prompt("aaaa", 161), 1, true)
	drive(t, e, 100, a)
	for _, tag := range []string{"bbbb", "cccc"} {
		s := submit(t, e, prompt(tag, 161), 1, true)
		drive(t, e, 100, s)
	}
	a2 := submit(t, e, prompt("aaaa", 161), 1, true)
	d := e.RunStep() // admission step: loads from L1
	drive(t, e, 100, a2)
	if a2.cached != 160 {
		t.Fatalf("cached %d, want 160 served from L1", a2.cached)
	}
	if h := testutil.ToFloat64(e.metrics.TierHits.WithLabelValues("l1")); h != 10 {
		t.Errorf("l1 hits %v blocks, want 10", h)
	}
	wantLoad := 10 * e.kvBlock
	if b := testutil.ToFloat64(e.metrics.TierBytes.WithLabelValues("l1", "load")); b != float64(wantLoad) {
		t.Errorf("l1 load bytes %v, want %d", b, wantLoad)
	}
	loadTime := time.Duration(float64(wantLoad) / o.L1Bandwidth * 1e9)
	if d < loadTime {
		t.Errorf("admission step %v does not include the %v L1 load", d, loadTime)
	}
	var cpuStored bool
	for _, ev := range sink.events() {
		if ev.Kind == BlockStored && ev.Medium == "CPU" {
			cpuStored = true
		}
	}
	if !cpuStored {
		t.Error("no CPU BlockStored event for blocks offloaded to L1")
	}
}

func TestL2LookupAndWriteThrough(t *testing.T) {
	l2 := tier.NewMemoryL2()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := testOptions()
	a := newTestEngine(t, o, Deps{L2: l2})
	go a.Run(ctx)
	s := submit(t, a, prompt("shar", 100), 2, true)
	waitDone(t, s)
	hashes := kv.BlockHashes(kv.RootHash("llama-3.1-8b"), kv.Tokenize(prompt("shar", 100)), 16)
	deadline := time.Now().Add(5 * time.Second)
	for l2.Len() < len(hashes) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if l2.Len() != len(hashes) {
		t.Fatalf("L2 holds %d blocks, want the %d written through", l2.Len(), len(hashes))
	}
	b := newTestEngine(t, o, Deps{L2: l2})
	go b.Run(ctx)
	s2 := submit(t, b, prompt("shar", 100), 2, true)
	waitDone(t, s2)
	if s2.cached != 96 {
		t.Errorf("engine B cached %d tokens, want 96 from L2", s2.cached)
	}
	if h := testutil.ToFloat64(b.metrics.TierHits.WithLabelValues("l2")); h != 6 {
		t.Errorf("l2 hits %v, want 6", h)
	}
	t.Run("an L2 outage degrades to a miss", func(t *testing.T) {
		l2.SetError(errors.New("connection refused"))
		c := newTestEngine(t, o, Deps{L2: l2})
		go c.Run(ctx)
		s3 := submit(t, c, prompt("shar", 100), 2, true)
		waitDone(t, s3)
		if s3.cached != 0 || s3.reason != "length" {
			t.Errorf("cached %d reason %q; want a clean miss", s3.cached, s3.reason)
		}
	})
}

func waitDone(t *testing.T, s *seq) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !s.isDone() {
		if time.Now().After(deadline) {
			t.Fatal("request did not finish")
		}
		select {
		case <-s.notify:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestKVEventsChainAndClear(t *testing.T) {
	sink := &fakeSink{}
	e := newTestEngine(t, testOptions(), Deps{Events: sink})
	text := prompt("evnt", 50) // 3 full blocks
	s := submit(t, e, text, 1, true)
	drive(t, e, 100, s)
	evs := sink.events()
	if len(evs) != 1 || evs[0].Kind != BlockStored || evs[0].Medium != "GPU" {
		t.Fatalf("events %+v, want one GPU BlockStored", evs)
	}
	toks := kv.Tokenize(text)
	want := kv.BlockHashes(kv.RootHash("llama-3.1-8b"), toks, 16)
	if len(evs[0].Hashes) != 3 || evs[0].Parent != nil || len(evs[0].TokenIDs) != 48 || evs[0].BlockSize != 16 {
		t.Fatalf("event %+v", evs[0])
	}
	for i, h := range want {
		if evs[0].Hashes[i] != uint64(h) {
			t.Fatalf("hash %d = %x, want %x", i, evs[0].Hashes[i], uint64(h))
		}
	}
	e.ResetPrefixCache()
	e.RunStep()
	evs = sink.events()
	if evs[len(evs)-1].Kind != AllBlocksCleared {
		t.Fatalf("last event %+v, want AllBlocksCleared", evs[len(evs)-1])
	}
	if n := len(sink.batches); n != 2 {
		t.Fatalf("%d batches, want one per changing step (2)", n)
	}
	again := submit(t, e, text, 1, true)
	drive(t, e, 100, again)
	if again.cached != 0 {
		t.Fatalf("cached %d tokens after a reset", again.cached)
	}
}

func TestDeterministicOutputAndEOS(t *testing.T) {
	run := func(seed uint64, maxTok int, ignore bool) ([]uint16, string) {
		e := newTestEngine(t, testOptions(), Deps{})
		r := request{prompt: kv.Tokenize("same prompt"), maxTokens: maxTok, ignoreEOS: ignore, seed: seed}
		e.prepare(context.Background(), &r)
		s, _ := e.Submit(r)
		drive(t, e, 1000, s)
		return s.out, s.reason
	}
	a, _ := run(1, 50, true)
	b, _ := run(1, 50, true)
	c, _ := run(2, 50, true)
	if string(u16(a)) != string(u16(b)) {
		t.Error("same seed and prompt gave different output")
	}
	if string(u16(a)) == string(u16(c)) {
		t.Error("different seeds gave the same output")
	}
	early := 0
	for seed := range uint64(40) {
		out, reason := run(seed, 20, false)
		if len(out) < 1 || len(out) > 20 {
			t.Fatalf("seed %d: %d tokens", seed, len(out))
		}
		if reason == "stop" && len(out) < 20 {
			early++
		}
	}
	if early < 5 || early > 35 {
		t.Errorf("%d of 40 generations ended early at EOS; want a seeded mix", early)
	}
}

func u16(x []uint16) []rune {
	out := make([]rune, len(x))
	for i, v := range x {
		out[i] = rune(v)
	}
	return out
}

func TestStopString(t *testing.T) {
	e := newTestEngine(t, testOptions(), Deps{})
	// Find what the engine would say, then stop on its third word.
	r := request{prompt: kv.Tokenize("stop test"), maxTokens: 10, ignoreEOS: true, seed: 3}
	e.prepare(context.Background(), &r)
	s, _ := e.Submit(r)
	drive(t, e, 100, s)
	third := words[s.out[2]]
	r.stop = []string{" " + third}
	s2, _ := e.Submit(r)
	drive(t, e, 100, s2)
	if s2.reason != "stop" {
		t.Fatalf("reason %q, want stop", s2.reason)
	}
	for i, w := range s2.out {
		if i > 0 && words[w] == third {
			t.Fatalf("output contains the stop word: %v", s2.out)
		}
	}
	if len(s2.out) > 2 {
		t.Fatalf("%d tokens emitted, want at most 2 before the stop", len(s2.out))
	}
}

func TestQueueBound(t *testing.T) {
	o := testOptions()
	o.MaxWaiting = 2
	e := newTestEngine(t, o, Deps{})
	submit(t, e, "one", 1, true)
	submit(t, e, "two", 1, true)
	r := request{prompt: kv.Tokenize("three"), maxTokens: 1}
	if _, err := e.Submit(r); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third submit: %v, want ErrQueueFull", err)
	}
	e.RunStep() // admits both
	if _, err := e.Submit(r); err != nil {
		t.Fatalf("after admission the queue has room: %v", err)
	}
}

func TestSlowFactorScalesSteps(t *testing.T) {
	step := func(slow float64) time.Duration {
		o := testOptions()
		o.SlowFactor = slow
		e := newTestEngine(t, o, Deps{})
		submit(t, e, prompt("slow", 500), 1, true)
		return e.RunStep()
	}
	a, b := step(1), step(3)
	if d := b - 3*a; d < -time.Microsecond || d > time.Microsecond {
		t.Fatalf("slow-factor 3 step %v, want 3 × %v", b, a)
	}
}

func TestAbortFreesBlocks(t *testing.T) {
	e := newTestEngine(t, testOptions(), Deps{})
	s := submit(t, e, prompt("abrt", 100), 1000, true)
	e.RunStep()
	e.RunStep()
	if e.bm.usage() == 0 {
		t.Fatal("no blocks in use while running")
	}
	e.Abort(s)
	e.RunStep()
	if !s.isDone() || s.reason != "abort" || e.bm.usage() != 0 || len(e.running) != 0 {
		t.Fatalf("done %v reason %q usage %v running %d", s.isDone(), s.reason, e.bm.usage(), len(e.running))
	}
}

func TestEngineSleepsOnInjectedClock(t *testing.T) {
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	o := testOptions()
	o.TimeScale = 2 // every simulated duration takes twice as long
	e := newTestEngine(t, o, Deps{Clock: fc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	s := submit(t, e, prompt("fake", 100), 2, true)
	fc.BlockUntil(1) // the engine sleeps through the prefill step
	step := 2 * e.roof.StepTime(PrefillStep(100))
	fc.Step(step - time.Microsecond)
	time.Sleep(20 * time.Millisecond)
	if s.outLen() != 0 {
		t.Fatal("first token before the scaled prefill step elapsed")
	}
	fc.Step(time.Microsecond)
	deadline := time.Now().Add(5 * time.Second)
	for s.outLen() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no first token after the clock passed the step's end")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestEngineSizing(t *testing.T) {
	tests := []struct {
		name       string
		mod        func(*Options)
		wantBlocks int // ±1 %
		wantErr    string
	}{
		{"H100 TP1", func(*Options) {}, 26674, ""},
		{"MIG 3g.40gb", func(o *Options) { o.MIGProfile = "3g.40gb" }, 152e3 / 16, ""},
		{"70B TP4", func(o *Options) { o.Model = "llama-3.1-70b"; o.TensorParallel = 4 }, 448e3 / 16, ""},
		{"block size 64", func(o *Options) { o.BlockSize = 64 }, 26674 / 4, ""},
		{"MIG 1g.10gb does not fit", func(o *Options) { o.MIGProfile = "1g.10gb" }, 0, "does not fit"},
		{"unknown MIG profile", func(o *Options) { o.MIGProfile = "9g.1tb" }, 0, "unknown MIG profile"},
		{"MIG with TP", func(o *Options) { o.MIGProfile = "3g.40gb"; o.TensorParallel = 2 }, 0, "tensor parallel"},
		{"unknown model", func(o *Options) { o.Model = "gpt-5" }, 0, "unknown model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			tt.mod(&o)
			e, err := NewEngine(o, Deps{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.NumGPUBlocks(); math.Abs(float64(got-tt.wantBlocks)) > float64(tt.wantBlocks)/100 {
				t.Fatalf("%d blocks, want ~%d", got, tt.wantBlocks)
			}
		})
	}
}

func TestL1EvictionEmitsCPURemoved(t *testing.T) {
	sink := &fakeSink{}
	e := newTestEngine(t, tinyOptions(12), Deps{Events: sink})
	e.l1 = tier.NewL1(5*e.kvBlock, e.kvBlock) // L1 holds 5 blocks
	for _, tag := range []string{"aaaa", "bbbb", "cccc"} {
		s := submit(t, e, prompt(tag, 161), 1, true) // 10 cached blocks each
		drive(t, e, 100, s)
	}
	var cpuStored, cpuRemoved int
	for _, ev := range sink.events() {
		if ev.Medium != "CPU" {
			continue
		}
		switch ev.Kind {
		case BlockStored:
			cpuStored += len(ev.Hashes)
		case BlockRemoved:
			cpuRemoved += len(ev.Hashes)
		}
	}
	if cpuStored == 0 || cpuRemoved == 0 {
		t.Fatalf("CPU stored %d removed %d; want both with a 5-block L1", cpuStored, cpuRemoved)
	}
}
