package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/tier"
)

// hangingStore is a shared tier that never answers a lookup before its
// context ends (a sick disk or a partitioned Redis).
type hangingStore struct{ *tier.MemoryL2 }

var _ L2Cache = (*hangingStore)(nil)

func (h *hangingStore) MatchPrefix(ctx context.Context, _ []kv.BlockHash) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// blocks is the run of hashes [from, to).
type blocks struct{ from, to int }

func (b blocks) of(hs []kv.BlockHash) []kv.BlockHash { return hs[b.from:b.to] }

// tierHits reads the blocks served by each tier below the GPU.
func tierHits(e *Engine) [3]float64 {
	return [3]float64{
		testutil.ToFloat64(e.metrics.TierHits.WithLabelValues(tierL1)),
		testutil.ToFloat64(e.metrics.TierHits.WithLabelValues(tierTieredStorage)),
		testutil.ToFloat64(e.metrics.TierHits.WithLabelValues(tierRedis)),
	}
}

func tierErrors(e *Engine, tierName, op string) float64 {
	return testutil.ToFloat64(e.metrics.TierErrors.WithLabelValues(tierName, op))
}

// TestSharedTierLookupOrder: a 161-token prompt has 10 matchable blocks,
// spread over L1, tieredstorage and Redis. Each block comes from the first
// tier in the order GPU → L1 → tieredstorage → Redis that can extend the
// chain from block 0, each tier's load is charged at its own bandwidth, a
// failed or timed-out lookup is a miss (counted) and a hole ends the chain.
func TestSharedTierLookupOrder(t *testing.T) {
	type want struct {
		hits             [3]int // l1, tieredstorage, l2
		diskErrs, l2Errs float64
	}
	tests := []struct {
		name              string
		l1, disk, redis   blocks
		diskErr, redisErr bool
		hangDisk          bool
		want              want
	}{
		{name: "L1, then tieredstorage, then Redis asked for the rest",
			l1: blocks{0, 3}, disk: blocks{0, 6}, redis: blocks{6, 10}, want: want{hits: [3]int{3, 3, 4}}},
		{name: "L1 covers more than tieredstorage",
			l1: blocks{0, 8}, disk: blocks{0, 6}, redis: blocks{6, 10}, want: want{hits: [3]int{8, 0, 2}}},
		{name: "tieredstorage lookup fails: a miss, Redis asked from where L1 ends",
			l1: blocks{0, 3}, disk: blocks{0, 6}, redis: blocks{0, 10}, diskErr: true, want: want{hits: [3]int{3, 0, 7}, diskErrs: 1}},
		{name: "tieredstorage lookup times out: a miss",
			redis: blocks{0, 10}, hangDisk: true, want: want{hits: [3]int{0, 0, 10}, diskErrs: 1}},
		{name: "Redis lookup fails: a miss",
			disk: blocks{0, 6}, redis: blocks{0, 10}, redisErr: true, want: want{hits: [3]int{0, 6, 0}, l2Errs: 1}},
		{name: "a hole in the chain ends it",
			disk: blocks{0, 4}, redis: blocks{5, 10}, want: want{hits: [3]int{0, 4, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			// Distinct bandwidths: charging a tier's bytes at another's
			// rate changes the step time.
			o.L1Bandwidth, o.TieredStorageBandwidth, o.L2Bandwidth = 20e9, 8e9, 4e9
			disk, redis := tier.NewMemoryL2(), tier.NewMemoryL2()
			var diskStore L2Cache = disk
			if tt.hangDisk {
				diskStore = &hangingStore{tier.NewMemoryL2()}
			}
			e := newTestEngine(t, o, Deps{TieredStorage: diskStore, L2: redis})
			e.l1 = tier.NewL1(1<<30, e.kvBlock)
			text := prompt("tier", 161)
			hashes := kv.BlockHashes(e.root, kv.Tokenize(text), e.opts.BlockSize)
			e.l1.Put(tt.l1.of(hashes)...)
			ctx := context.Background()
			for _, p := range []struct {
				s  *tier.MemoryL2
				bs blocks
			}{{disk, tt.disk}, {redis, tt.redis}} {
				if err := p.s.Put(ctx, p.bs.of(hashes)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.diskErr {
				disk.SetError(errors.New("input/output error"))
			}
			if tt.redisErr {
				redis.SetError(errors.New("connection refused"))
			}
			s := submit(t, e, text, 1, true)
			d := e.RunStep() // the admission step loads every hit
			drive(t, e, 10, s)

			hit := tt.want.hits[0] + tt.want.hits[1] + tt.want.hits[2]
			if s.cached != hit*16 || s.reason != "length" {
				t.Fatalf("cached %d tokens, reason %q; want %d tokens and a normal finish", s.cached, s.reason, hit*16)
			}
			got := tierHits(e)
			for i, name := range []string{tierL1, tierTieredStorage, tierRedis} {
				if got[i] != float64(tt.want.hits[i]) {
					t.Errorf("%s hits %v, want %d", name, got[i], tt.want.hits[i])
				}
				load := testutil.ToFloat64(e.metrics.TierBytes.WithLabelValues(name, "load"))
				if load != float64(int64(tt.want.hits[i])*e.kvBlock) {
					t.Errorf("%s load bytes %v, want %d blocks' worth", name, load, tt.want.hits[i])
				}
			}
			// The step computed the uncached tokens and loaded the hits,
			// each tier at its bandwidth.
			want := e.roof.StepTime(e.step.Step)
			for i, bw := range []float64{o.L1Bandwidth, o.TieredStorageBandwidth, o.L2Bandwidth} {
				want += time.Duration(float64(int64(tt.want.hits[i])*e.kvBlock) / bw * float64(time.Second))
			}
			if e.step.Tokens != 161-hit*16 {
				t.Errorf("step computed %d tokens, want the %d uncached", e.step.Tokens, 161-hit*16)
			}
			if diff := math.Abs(float64(d - want)); diff > 3 {
				t.Errorf("admission step %v, want %v (compute + loads at each tier's bandwidth)", d, want)
			}
			if got := testutil.ToFloat64(e.metrics.PrefixHits); got != float64(hit*16) {
				t.Errorf("prefix_cache_hits_total %v, want %d (a load from any tier is a hit)", got, hit*16)
			}
			if got := tierErrors(e, tierTieredStorage, "lookup"); got != tt.want.diskErrs {
				t.Errorf("tieredstorage lookup errors %v, want %v", got, tt.want.diskErrs)
			}
			if got := tierErrors(e, tierRedis, "lookup"); got != tt.want.l2Errs {
				t.Errorf("l2 lookup errors %v, want %v", got, tt.want.l2Errs)
			}
		})
	}
}

// TestSharedTiersNotAskedForLocalBlocks: a prompt whose matchable blocks
// are all on this replica's GPU or in its L1 asks no shared tier; one that
// extends a local prefix asks them only for the rest.
func TestSharedTiersNotAskedForLocalBlocks(t *testing.T) {
	disk, redis := tier.NewMemoryL2(), tier.NewMemoryL2()
	e := newTestEngine(t, tinyOptions(20), Deps{TieredStorage: disk, L2: redis})
	e.l1 = tier.NewL1(1<<30, e.kvBlock)
	a := submit(t, e, prompt("locl", 161), 1, true) // 10 blocks
	drive(t, e, 10, a)
	asked := func() [2]int { return [2]int{disk.Calls().MatchPrefix, redis.Calls().MatchPrefix} }
	if got := asked(); got != [2]int{1, 1} {
		t.Fatalf("lookups %v after a cold request, want one per tier", got)
	}
	again := submit(t, e, prompt("locl", 161), 1, true)
	drive(t, e, 10, again)
	if got := asked(); got != [2]int{1, 1} || again.cached != 160 {
		t.Fatalf("lookups %v, cached %d for a prefix on the GPU; want no new lookup and 160 tokens", got, again.cached)
	}
	// Push it out of the GPU (20 blocks) into L1, then ask once more.
	for _, tag := range []string{"bbbb", "cccc"} {
		drive(t, e, 10, submit(t, e, prompt(tag, 161), 1, true))
	}
	n := asked()
	fromL1 := submit(t, e, prompt("locl", 161), 1, true)
	drive(t, e, 10, fromL1)
	if got := asked(); got != n || fromL1.cached != 160 {
		t.Fatalf("lookups %v (were %v), cached %d for a prefix in L1; want no new lookup and 160 tokens", got, n, fromL1.cached)
	}
	if h := tierHits(e); h[0] != 10 {
		t.Errorf("hits by tier %v, want 10 from L1", h)
	}
}

// storedBy collects the hashes of BlockStored events of one medium.
func storedBy(evs []KVEvent, medium string) []uint64 {
	var out []uint64
	for _, ev := range evs {
		if ev.Kind == BlockStored && ev.Medium == medium {
			out = append(out, ev.Hashes...)
		}
	}
	return out
}

// TestSharedTierWriteThrough: newly computed blocks are written to
// tieredstorage and Redis off the engine loop, each write announced with its
// medium (DISK, REMOTE) once done; blocks loaded from a shared tier are not
// written anywhere (each tier already holds what this node computed).
func TestSharedTierWriteThrough(t *testing.T) {
	ctx := context.Background()
	disk, redis := tier.NewMemoryL2(), tier.NewMemoryL2()
	sink := &fakeSink{}
	a := newTestEngine(t, testOptions(), Deps{TieredStorage: disk, L2: redis, Events: sink})
	text := prompt("wrte", 100) // 6 full blocks
	hashes := hashList(kv.BlockHashes(a.root, kv.Tokenize(text), 16))
	s := submit(t, a, text, 2, true)
	drive(t, a, 10, s)
	if disk.Len() != 0 || redis.Len() != 0 {
		t.Fatal("blocks written on the engine goroutine; want them queued for the writers")
	}
	a.drainWrites(ctx)
	if disk.Len() != 6 || redis.Len() != 6 {
		t.Fatalf("tieredstorage holds %d blocks, Redis %d; want the 6 computed", disk.Len(), redis.Len())
	}
	evs := sink.events()
	if got := storedBy(evs, "DISK"); !slices.Equal(got, hashes) {
		t.Errorf("DISK BlockStored %x, want %x", got, hashes)
	}
	if got := storedBy(evs, "REMOTE"); !slices.Equal(got, hashes) {
		t.Errorf("REMOTE BlockStored %x, want %x", got, hashes)
	}
	if got := storedBy(evs, "GPU"); !slices.Equal(got, hashes) {
		t.Errorf("GPU BlockStored %x, want %x as before", got, hashes)
	}
	for _, name := range []string{tierTieredStorage, tierRedis} {
		if got := testutil.ToFloat64(a.metrics.TierBytes.WithLabelValues(name, "store")); got != float64(6*a.kvBlock) {
			t.Errorf("%s store bytes %v, want 6 blocks' worth", name, got)
		}
	}

	t.Run("blocks loaded from a shared tier are not written back", func(t *testing.T) {
		disk2 := tier.NewMemoryL2() // another node: its own tieredstorage, the same Redis
		sink2 := &fakeSink{}
		b := newTestEngine(t, testOptions(), Deps{TieredStorage: disk2, L2: redis, Events: sink2})
		s := submit(t, b, text, 2, true)
		drive(t, b, 10, s)
		b.drainWrites(ctx)
		if got := tierHits(b); got != [3]float64{0, 0, 6} {
			t.Fatalf("hits by tier %v, want 6 from Redis", got)
		}
		evs := sink2.events()
		if disk2.Len() != 0 || redis.Calls().PutBlocks != 6 || len(storedBy(evs, "DISK"))+len(storedBy(evs, "REMOTE")) != 0 {
			t.Errorf("tieredstorage holds %d blocks, %d blocks put to Redis in all, events %+v; want no writes of blocks loaded, only of blocks computed",
				disk2.Len(), redis.Calls().PutBlocks, evs)
		}
	})
}

// TestSharedTierWriteFaults: a failed write is counted and announced to
// nobody, a writer that is behind makes the engine drop (and count) the
// batch, and neither touches the request.
func TestSharedTierWriteFaults(t *testing.T) {
	ctx := context.Background()
	disk, redis := tier.NewMemoryL2(), tier.NewMemoryL2()
	disk.SetError(errors.New("no space left on device"))
	sink := &fakeSink{}
	e := newTestEngine(t, testOptions(), Deps{TieredStorage: disk, L2: redis, Events: sink})
	// Redis's writer holds one batch at most and is not running.
	e.shared[1].writes = make(chan []kv.BlockHash, 1)
	first := submit(t, e, prompt("flt1", 100), 2, true)
	drive(t, e, 10, first)
	second := submit(t, e, prompt("flt2", 100), 2, true)
	drive(t, e, 10, second)
	for _, s := range []*seq{first, second} {
		if s.reason != "length" || s.errorMsg != "" {
			t.Fatalf("request ended %q (%s); want a normal finish", s.reason, s.errorMsg)
		}
	}
	if got := testutil.ToFloat64(e.metrics.TierDroppedWrites.WithLabelValues(tierRedis)); got != 6 {
		t.Errorf("l2 dropped writes %v, want the second request's 6 blocks", got)
	}
	e.drainWrites(ctx)
	if got, calls := tierErrors(e, tierTieredStorage, "write"), disk.Calls().Put; got != 1 || calls != 1 {
		t.Errorf("tieredstorage write errors %v in %d calls, want 1: the two queued batches go in one call", got, calls)
	}
	if got := testutil.ToFloat64(e.metrics.TierBytes.WithLabelValues(tierTieredStorage, "store")); got != 0 {
		t.Errorf("tieredstorage store bytes %v after failed writes", got)
	}
	evs := sink.events()
	if got := storedBy(evs, "DISK"); len(got) != 0 {
		t.Errorf("DISK BlockStored %x for blocks never written", got)
	}
	if got := storedBy(evs, "REMOTE"); len(got) != 6 || redis.Len() != 6 {
		t.Errorf("REMOTE BlockStored %d blocks, Redis holds %d; want the first request's 6", len(got), redis.Len())
	}
}

// TestTieredStorageOptions: the flags are validated with errors naming
// them; the size must hold one KV block of the model.
func TestTieredStorageOptions(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Options)
		wantErr string
	}{
		{"off by default", func(*Options) {}, ""},
		{"on", func(o *Options) { o.TieredStorageDir, o.TieredStorageBytes = "/data/ts", 1<<30 }, ""},
		{"a directory alone leaves it off", func(o *Options) { o.TieredStorageDir = "/data/ts" }, ""},
		{"size without directory", func(o *Options) { o.TieredStorageBytes = 1 << 30 }, "--tiered-storage-dir: required"},
		{"negative size", func(o *Options) { o.TieredStorageDir, o.TieredStorageBytes = "/d", -1 }, "--tiered-storage-bytes: must not be negative"},
		{"smaller than one block", func(o *Options) { o.TieredStorageDir, o.TieredStorageBytes = "/d", 1<<21-1 }, "--tiered-storage-bytes: 2097151 is less than one KV block"},
		{"negative bandwidth", func(o *Options) { o.TieredStorageBandwidth = -1 }, "--tiered-storage-bandwidth"},
		{"NaN bandwidth", func(o *Options) { o.TieredStorageBandwidth = math.NaN() }, "--tiered-storage-bandwidth"},
		{"infinite bandwidth", func(o *Options) { o.TieredStorageBandwidth = math.Inf(1) }, "--tiered-storage-bandwidth"},
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
			if e.opts.TieredStorageBandwidth != DefaultTieredStorageBandwidth {
				t.Errorf("bandwidth %g, want the default %g", e.opts.TieredStorageBandwidth, DefaultTieredStorageBandwidth)
			}
		})
	}
}

// TestTieredStorageStatsAtScrape: the store's size series appear once the
// store is attached and read its stats at every scrape.
func TestTieredStorageStatsAtScrape(t *testing.T) {
	m := NewMetrics("m")
	names := []string{"capstan_engine_kv_tieredstorage_blocks", "capstan_engine_kv_tier_used_bytes",
		"capstan_engine_kv_tier_capacity_bytes", "capstan_engine_kv_tieredstorage_corrupt_total"}
	if n, err := testutil.GatherAndCount(m.Registry, names...); err != nil || n != 0 {
		t.Fatalf("%d series (%v) before a store is attached, want none", n, err)
	}
	st := tier.DiskStats{Blocks: 3, Bytes: 3 << 21, CapacityBytes: 1 << 30, Corrupt: 1}
	m.SetTieredStorageStats(func() tier.DiskStats { return st })
	want := `
# HELP capstan_engine_kv_tieredstorage_blocks KV blocks held in the node's tieredstorage store.
# TYPE capstan_engine_kv_tieredstorage_blocks gauge
capstan_engine_kv_tieredstorage_blocks{engine="0",model_name="m"} 3
# HELP capstan_engine_kv_tier_capacity_bytes Capacity of a tier below the GPU (--cpu-cache-bytes, --tiered-storage-bytes).
# TYPE capstan_engine_kv_tier_capacity_bytes gauge
capstan_engine_kv_tier_capacity_bytes{engine="0",model_name="m",tier="tieredstorage"} 1.073741824e+09
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names[0], names[2]); err != nil {
		t.Fatal(err)
	}
	st.Blocks = 5 // read again at the next scrape
	want = `
# HELP capstan_engine_kv_tieredstorage_blocks KV blocks held in the node's tieredstorage store.
# TYPE capstan_engine_kv_tieredstorage_blocks gauge
capstan_engine_kv_tieredstorage_blocks{engine="0",model_name="m"} 5
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names[0]); err != nil {
		t.Fatal(err)
	}
}

// TestSharedTiersUnderRun: requests submitted concurrently to a running
// engine (handlers' lookups, the engine loop and both writers at once; run
// with -race) all finish, and every block computed ends up in both shared
// tiers, announced once per medium.
func TestSharedTiersUnderRun(t *testing.T) {
	disk, redis := tier.NewMemoryL2(), tier.NewMemoryL2()
	sink := &fakeSink{}
	e := newTestEngine(t, testOptions(), Deps{TieredStorage: disk, L2: redis, Events: sink})
	e.l1 = tier.NewL1(1<<30, e.kvBlock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	const n = 16
	want := map[uint64]bool{}
	seqs := make(chan *seq, n)
	for i := range n {
		// Four prompts, each sent four times: later copies hit.
		text := prompt(fmt.Sprintf("run%d", i%4), 100)
		for _, h := range kv.BlockHashes(e.root, kv.Tokenize(text), 16) {
			want[uint64(h)] = true
		}
		go func() { seqs <- submit(t, e, text, 4, true) }()
	}
	for range n {
		s := <-seqs
		waitDone(t, s)
		if s.reason != "length" {
			t.Fatalf("request ended %q (%s)", s.reason, s.errorMsg)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for disk.Len() < len(want) || redis.Len() < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("tieredstorage holds %d blocks, Redis %d; want all %d", disk.Len(), redis.Len(), len(want))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, medium := range []string{"DISK", "REMOTE"} {
		got := map[uint64]int{}
		for _, h := range storedBy(sink.events(), medium) {
			got[h]++
		}
		for h := range want {
			if got[h] != 1 {
				t.Errorf("%s BlockStored announced block %x %d times, want once", medium, h, got[h])
			}
		}
	}
}
