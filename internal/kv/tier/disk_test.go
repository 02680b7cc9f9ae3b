package tier

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
)

const testBlock = 1000 // BlockBytes in these tests

func openTestDisk(t testing.TB, dir, ns string, capBlocks int64, clk clock.Clock) *Disk {
	t.Helper()
	d, err := OpenDisk(DiskOptions{Dir: dir, CapacityBytes: capBlocks * testBlock, BlockBytes: testBlock, Namespace: ns, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func newFakeClock() *clock.Fake {
	return clock.NewFake(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
}

// fileSlots reads d's slot file and returns its slots (what lies past the
// end of a truncated file reads as empty slots).
func fileSlots(t testing.TB, d *Disk) [][]byte {
	t.Helper()
	b := readFile(t, d.path)
	if len(b) < headerSize {
		b = append(b, make([]byte, headerSize-len(b))...)
	}
	b = b[headerSize:]
	want := int(d.geo.blocks() * slotSize)
	if len(b) < want {
		b = append(b, make([]byte, want-len(b))...)
	}
	out := make([][]byte, d.geo.blocks())
	for i := range out {
		out[i] = b[i*slotSize : (i+1)*slotSize]
	}
	return out
}

// held returns the sorted hashes of d's valid records on disk, without
// touching them, and fails the test on a valid record outside its set.
func held(t testing.TB, d *Disk) []kv.BlockHash {
	t.Helper()
	var out []kv.BlockHash
	for i, s := range fileSlots(t, d) {
		h, st := classifySlot(s, d.want.nsHash, d.opts.BlockBytes)
		if st != slotValid {
			continue
		}
		a, b := d.geo.sets(h)
		if set := int64(i) / d.geo.ways; set != a && set != b {
			t.Errorf("block %d in set %d, belongs in %d or %d", h, set, a, b)
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// checkHeader asserts the header is valid and counts exactly the occupied
// slots: the invariant every Put under the lock keeps. It returns the header.
func checkHeader(t testing.TB, d *Disk) diskHeader {
	t.Helper()
	f, err := os.Open(d.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, ok := readHeader(f, d.want)
	if !ok {
		t.Fatal("header unreadable")
	}
	var occupied int64
	for _, s := range fileSlots(t, d) {
		if !isZero(s[:recSize]) {
			occupied++
		}
	}
	if h.blocks != occupied {
		t.Fatalf("header says %d blocks, the file holds %d", h.blocks, occupied)
	}
	if fi, err := os.Stat(d.path); err != nil || fi.Size() != d.geo.fileSize() {
		t.Fatalf("file size %v (%v), want %d", fi.Size(), err, d.geo.fileSize())
	}
	return h
}

// slotOf returns the file offset of block h's valid slot.
func slotOf(t testing.TB, d *Disk, h kv.BlockHash) int64 {
	t.Helper()
	for i, s := range fileSlots(t, d) {
		if sh, st := classifySlot(s, d.want.nsHash, d.opts.BlockBytes); st == slotValid && sh == h {
			return headerSize + int64(i)*slotSize
		}
	}
	t.Fatalf("block %d not on disk", h)
	return 0
}

// pairOf is the two sets block h may live in, in order.
func pairOf(d *Disk, h kv.BlockHash) [2]int64 {
	a, b := d.geo.sets(h)
	return [2]int64{min(a, b), max(a, b)}
}

// inPair returns the first n hashes from first upward whose two sets are
// pair (blocks that compete for the same 2 × ways slots).
func inPair(d *Disk, pair [2]int64, first uint64, n int) []kv.BlockHash {
	var out []kv.BlockHash
	for h := first; len(out) < n; h++ {
		if pairOf(d, kv.BlockHash(h)) == pair {
			out = append(out, kv.BlockHash(h))
		}
	}
	return out
}

// editFile applies edit to n bytes of d's file at off.
func editFile(t testing.TB, d *Disk, off int64, n int, edit func(b []byte)) {
	t.Helper()
	f, err := os.OpenFile(d.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	edit(b)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestDiskGeometry(t *testing.T) {
	tests := []struct {
		capBlocks   int64
		ways, nsets int64
	}{
		{1, 1, 1},
		{3, 3, 1},
		{15, 15, 1},
		{16, 16, 1},
		{17, 16, 1},
		{31, 16, 1},
		{32, 16, 2},
		{100, 16, 6},
		{MaxDiskBlocks, 16, MaxDiskBlocks / 16},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.capBlocks), func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDisk(t, dir, "m", tt.capBlocks, nil)
			if d.geo != (diskGeometry{ways: tt.ways, nsets: tt.nsets}) {
				t.Fatalf("geometry %+v, want %d ways × %d sets", d.geo, tt.ways, tt.nsets)
			}
			blocks := tt.ways * tt.nsets
			if st := d.Stats(); st.CapacityBytes != blocks*testBlock || st.Blocks != 0 {
				t.Fatalf("Stats = %+v, want capacity %d", st, blocks*testBlock)
			}
			name := fmt.Sprintf("%s-%d-%d.kvs", hex16(diskNamespaceHash("m")), testBlock, blocks)
			if d.path != filepath.Join(dir, name) {
				t.Fatalf("file %s, want %s", d.path, name)
			}
			checkHeader(t, d)
			// Sparse: a fresh file takes (almost) no disk space.
			var st syscall.Stat_t
			must(t, syscall.Stat(d.path, &st))
			if st.Blocks*512 > 64<<10 {
				t.Fatalf("a fresh file takes %d bytes of disk", st.Blocks*512)
			}
		})
	}
}

func TestDiskRoundTripAndPrefix(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := newFakeClock()
	a := openTestDisk(t, dir, "llama-3.1-8b", 100, clk)
	b := openTestDisk(t, dir, "llama-3.1-8b", 100, clk) // another replica on the node
	other := openTestDisk(t, dir, "qwen3-32b", 100, clk)

	chain := hs(11, 22, 33, 44)
	steps := []struct {
		name      string
		put       *Disk
		putHashes []kv.BlockHash
		ask       *Disk
		query     []kv.BlockHash
		want      int
	}{
		{name: "empty store misses", ask: a, query: chain, want: 0},
		{name: "writer sees own blocks", put: a, putHashes: chain[:3], ask: a, query: chain, want: 3},
		{name: "second instance sees first one's blocks", ask: b, query: chain, want: 3},
		{name: "prefix stops at first hole", put: b, putHashes: chain[3:], ask: b, query: hs(11, 99, 33, 44), want: 1},
		{name: "full chain after second writer", ask: a, query: chain, want: 4},
		{name: "put is idempotent", put: a, putHashes: chain, ask: b, query: chain, want: 4},
		{name: "prefix must start at the head", ask: a, query: hs(99, 11, 22), want: 0},
		{name: "other namespace is isolated", ask: other, query: chain, want: 0},
		{name: "empty query", ask: a, query: nil, want: 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.Step(time.Second)
			if s.put != nil {
				if err := s.put.Put(ctx, s.putHashes); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.ask.MatchPrefix(ctx, s.query)
			if err != nil || got != s.want {
				t.Fatalf("MatchPrefix = %d, %v; want %d", got, err, s.want)
			}
		})
	}
	if got := held(t, a); !slices.Equal(got, chain) {
		t.Fatalf("records on disk %v, want %v", got, chain)
	}
	if got := held(t, other); len(got) != 0 {
		t.Fatalf("other namespace holds %v", got)
	}
	st := a.Stats()
	// 100 blocks are 6 sets of 16: 96.
	if st.Blocks != 4 || st.Bytes != 4*testBlock || st.CapacityBytes != 96*testBlock {
		t.Fatalf("Stats = %+v", st)
	}
	// a asked: 4 (miss 4), 4 (hit 3, miss 1), 4 (hit 4), 3 (hit 0, miss 3), 0.
	if st.Hits != 7 || st.Misses != 8 {
		t.Fatalf("Hits/Misses = %d/%d, want 7/8", st.Hits, st.Misses)
	}
	checkHeader(t, a)
}

// TestDiskLRUEviction: a store of fewer than 16 blocks is one set, so it
// evicts exactly LRU.
func TestDiskLRUEviction(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	d := openTestDisk(t, t.TempDir(), "m", 4, clk)
	steps := []struct {
		op        string // "put" or "match"
		hashes    []kv.BlockHash
		wantMatch int
		wantHeld  []kv.BlockHash
		wantEvict uint64
	}{
		{op: "put", hashes: hs(1), wantHeld: hs(1)},
		{op: "put", hashes: hs(2), wantHeld: hs(1, 2)},
		{op: "put", hashes: hs(3), wantHeld: hs(1, 2, 3)},
		{op: "put", hashes: hs(4), wantHeld: hs(1, 2, 3, 4)},
		{op: "match", hashes: hs(1), wantMatch: 1, wantHeld: hs(1, 2, 3, 4)},
		// 2 is now the least recently used.
		{op: "put", hashes: hs(5), wantHeld: hs(1, 3, 4, 5), wantEvict: 1},
		// Putting a present block refreshes it and evicts nothing.
		{op: "put", hashes: hs(3), wantHeld: hs(1, 3, 4, 5), wantEvict: 1},
		{op: "put", hashes: hs(6), wantHeld: hs(1, 3, 5, 6), wantEvict: 2},
		// Two new blocks evict the two oldest: 1 (touched at step 5), then 5.
		{op: "put", hashes: hs(7, 8), wantHeld: hs(3, 6, 7, 8), wantEvict: 4},
		{op: "match", hashes: hs(7, 8, 9), wantMatch: 2, wantHeld: hs(3, 6, 7, 8), wantEvict: 4},
		// A chain longer than the store keeps its head; its tail is evicted.
		{op: "put", hashes: hs(20, 21, 22, 23, 24, 25), wantHeld: hs(20, 21, 22, 23), wantEvict: 10},
	}
	for i, s := range steps {
		clk.Step(time.Second)
		switch s.op {
		case "put":
			if err := d.Put(ctx, s.hashes); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case "match":
			if n, err := d.MatchPrefix(ctx, s.hashes); err != nil || n != s.wantMatch {
				t.Fatalf("step %d: MatchPrefix = %d, %v; want %d", i, n, err, s.wantMatch)
			}
		}
		if got := held(t, d); !slices.Equal(got, s.wantHeld) {
			t.Fatalf("step %d (%s %v): held %v, want %v", i, s.op, s.hashes, got, s.wantHeld)
		}
		if st := d.Stats(); st.Evictions != s.wantEvict || st.Blocks != len(s.wantHeld) {
			t.Fatalf("step %d: Evictions %d Blocks %d, want %d %d", i, st.Evictions, st.Blocks, s.wantEvict, len(s.wantHeld))
		}
		if h := checkHeader(t, d); h.evictions != int64(s.wantEvict) {
			t.Fatalf("step %d: header evictions %d, want %d", i, h.evictions, s.wantEvict)
		}
	}
}

// TestDiskLRUWithinASetPair: a block goes in the emptier of its two sets,
// and when both are full it evicts their least recently used record, however
// old the records of other sets are.
func TestDiskLRUWithinASetPair(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	d := openTestDisk(t, t.TempDir(), "m", 64, clk) // 4 sets of 16
	pair := pairOf(d, 4)
	var rest [2]int64
	for s, i := int64(0), 0; s < 4; s++ {
		if s != pair[0] && s != pair[1] {
			rest[i] = s
			i++
		}
	}
	// The oldest records of all, in the two other sets.
	other := inPair(d, rest, 1, 3)
	must(t, d.Put(ctx, other))
	// 32 blocks fill both sets of the pair, one at a time, the emptier first.
	full := inPair(d, pair, 4, 32)
	for _, h := range full {
		clk.Step(time.Second)
		must(t, d.Put(ctx, []kv.BlockHash{h}))
	}
	if st := d.Stats(); st.Evictions != 0 || st.Blocks != 3+32 {
		t.Fatalf("Stats = %+v after filling the pair, want no eviction, 35 blocks", st)
	}
	clk.Step(time.Second)
	// full[0] is hit, so full[1] is now the pair's least recently used.
	if n, _ := d.MatchPrefix(ctx, full[:1]); n != 1 {
		t.Fatal("miss")
	}
	clk.Step(time.Second)
	extra := inPair(d, pair, uint64(full[31])+1, 1)
	must(t, d.Put(ctx, extra))
	want := slices.Concat(other, []kv.BlockHash{full[0]}, full[2:], extra)
	slices.Sort(want)
	if got := held(t, d); !slices.Equal(got, want) {
		t.Fatalf("held %v, want %v (%d evicted from the pair only)", got, want, full[1])
	}
	if st := d.Stats(); st.Evictions != 1 || st.Blocks != 3+32 {
		t.Fatalf("Stats = %+v, want 1 eviction, 35 blocks", st)
	}
	// One call naming more blocks of a pair than it has ways keeps the head.
	clk.Step(time.Second)
	chain := inPair(d, rest, uint64(other[2])+1, 40)
	must(t, d.Put(ctx, chain))
	if n, _ := d.MatchPrefix(ctx, chain); n != 32 {
		t.Fatalf("MatchPrefix of a 40-block chain in one pair of 16-way sets = %d, want 32", n)
	}
	checkHeader(t, d)
}

// TestDiskTwoChoicesKeepLongChains: a file filled to three quarters with
// 256-block chains (4,096-token prompts) loses no block: every chain still
// matches whole. With one set per block about one set in ten overflows at
// this load, and nearly every chain would lose a block.
func TestDiskTwoChoicesKeepLongChains(t *testing.T) {
	ctx := context.Background()
	d := openTestDisk(t, t.TempDir(), "m", 16*1024, newFakeClock())
	r := rand.New(rand.NewPCG(1, 2))
	var chains [][]kv.BlockHash
	for range 48 { // 48 × 256 = 12,288 blocks of 16,384 slots
		c := make([]kv.BlockHash, 256)
		for i := range c {
			c[i] = kv.BlockHash(r.Uint64())
		}
		must(t, d.Put(ctx, c))
		chains = append(chains, c)
	}
	for i, c := range chains {
		if n, _ := d.MatchPrefix(ctx, c); n != len(c) {
			t.Fatalf("chain %d matches %d of %d blocks", i, n, len(c))
		}
	}
	if st := d.Stats(); st.Evictions != 0 {
		t.Fatalf("%d evictions at 75 %% full", st.Evictions)
	}
}

func TestDiskSharedByTwoInstances(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	dir := t.TempDir()
	a := openTestDisk(t, dir, "m", 4, clk)
	b := openTestDisk(t, dir, "m", 4, clk)
	steps := []struct {
		who      *Disk
		op       string
		hashes   []kv.BlockHash
		want     int
		wantHeld []kv.BlockHash
	}{
		{who: a, op: "put", hashes: hs(1), wantHeld: hs(1)},
		{who: a, op: "put", hashes: hs(2), wantHeld: hs(1, 2)},
		{who: b, op: "put", hashes: hs(3), wantHeld: hs(1, 2, 3)},
		{who: b, op: "put", hashes: hs(4), wantHeld: hs(1, 2, 3, 4)},
		// b's hit on a's block makes it recent for a's eviction too.
		{who: b, op: "match", hashes: hs(1), want: 1, wantHeld: hs(1, 2, 3, 4)},
		{who: a, op: "put", hashes: hs(5), wantHeld: hs(1, 3, 4, 5)},
		// b evicts the oldest, 3, though a wrote the newer ones.
		{who: b, op: "put", hashes: hs(6), wantHeld: hs(1, 4, 5, 6)},
		{who: a, op: "match", hashes: hs(6), want: 1, wantHeld: hs(1, 4, 5, 6)},
		{who: b, op: "put", hashes: hs(7, 8), wantHeld: hs(5, 6, 7, 8)},
		// 5 (T6), 6 (hit at T8), then 8 (written just before 7 at T9) go.
		{who: a, op: "put", hashes: hs(9, 10, 11), wantHeld: hs(7, 9, 10, 11)},
	}
	for i, s := range steps {
		clk.Step(time.Second)
		switch s.op {
		case "put":
			if err := s.who.Put(ctx, s.hashes); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case "match":
			if n, err := s.who.MatchPrefix(ctx, s.hashes); err != nil || n != s.want {
				t.Fatalf("step %d: MatchPrefix = %d, %v; want %d", i, n, err, s.want)
			}
		}
		if got := held(t, a); !slices.Equal(got, s.wantHeld) {
			t.Fatalf("step %d: held %v, want %v", i, got, s.wantHeld)
		}
		checkHeader(t, a)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.Blocks != 4 || sb.Blocks != 4 {
		t.Fatalf("Blocks a=%d b=%d, want 4 each", sa.Blocks, sb.Blocks)
	}
	// 11 blocks written into a 4-block store: exactly 7 evictions between them.
	if sa.Evictions+sb.Evictions != 7 {
		t.Fatalf("evictions a=%d + b=%d, want 7", sa.Evictions, sb.Evictions)
	}
	if h := checkHeader(t, a); h.evictions != 7 {
		t.Fatalf("header evictions %d, want 7", h.evictions)
	}
}

// TestDiskNamespacesHaveOwnBudgets: each namespace's file is bounded by its
// own capacity; filling one evicts nothing from another.
func TestDiskNamespacesHaveOwnBudgets(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	dir := t.TempDir()
	small, err := OpenDisk(DiskOptions{Dir: dir, CapacityBytes: 10_000, BlockBytes: 1000, Namespace: "small", Clock: clk})
	must(t, err)
	defer small.Close()
	big, err := OpenDisk(DiskOptions{Dir: dir, CapacityBytes: 10_000, BlockBytes: 3000, Namespace: "big", Clock: clk})
	must(t, err)
	defer big.Close()
	must(t, big.Put(ctx, hs(1, 2)))
	for i := range 20 {
		clk.Step(time.Second)
		must(t, small.Put(ctx, hs(uint64(100+i))))
	}
	if got, want := held(t, small), hashRange(110, 10); !slices.Equal(got, want) {
		t.Fatalf("small held %v, want %v", got, want)
	}
	if n, _ := big.MatchPrefix(ctx, hs(1, 2)); n != 2 {
		t.Fatalf("big MatchPrefix = %d, want 2", n)
	}
	if st := small.Stats(); st.Bytes != 10_000 || st.Blocks != 10 || st.CapacityBytes != 10_000 || st.Evictions != 10 {
		t.Fatalf("small Stats = %+v, want 10 blocks, 10000 bytes", st)
	}
	// 10000 bytes hold 3 blocks of 3000.
	if st := big.Stats(); st.Bytes != 6000 || st.Blocks != 2 || st.CapacityBytes != 9000 {
		t.Fatalf("big Stats = %+v, want 2 blocks of 3 (9000 bytes)", st)
	}
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 2 {
		t.Fatalf("store directory holds %v, want the two slot files", ents)
	}
}

// corruptions are the ways block h's slot can stop holding its record while
// still naming h.
var corruptions = []struct {
	name   string
	reason string
	mutate func(d *Disk, h kv.BlockHash, slot []byte)
}{
	{"byte overwritten", badChecksum, func(_ *Disk, _ kv.BlockHash, s []byte) { s[40] ^= 0x55 }},
	{"checksum overwritten", badChecksum, func(_ *Disk, _ kv.BlockHash, s []byte) { s[50] ^= 1 }},
	{"tail zeroed (torn write)", badChecksum, func(_ *Disk, _ kv.BlockHash, s []byte) { clear(s[30:recSize]) }},
	{"another namespace's record", badNamespace, func(d *Disk, h kv.BlockHash, s []byte) {
		encodeRecord((*[recSize]byte)(s[:recSize]), diskNamespaceHash("other-model"), h, d.opts.BlockBytes)
	}},
	{"another block size", badSize, func(d *Disk, h kv.BlockHash, s []byte) {
		encodeRecord((*[recSize]byte)(s[:recSize]), d.want.nsHash, h, d.opts.BlockBytes*2)
	}},
	{"payload changed, checksum recomputed", badPayload, func(_ *Disk, _ kv.BlockHash, s []byte) {
		s[33] ^= 1
		reseal(s)
	}},
	{"magic changed, checksum recomputed", badMagic, func(_ *Disk, _ kv.BlockHash, s []byte) {
		s[0] = 'X'
		reseal(s)
	}},
	{"future version", badVersion, func(_ *Disk, _ kv.BlockHash, s []byte) {
		s[4] = 2
		reseal(s)
	}},
}

func TestDiskCorruptRecordIsAMiss(t *testing.T) {
	ctx := context.Background()
	chain := hs(1, 2, 3)
	for _, c := range corruptions {
		for _, repair := range []string{"match", "put"} {
			t.Run(c.name+"/"+repair, func(t *testing.T) {
				d := openTestDisk(t, t.TempDir(), "m", 10, newFakeClock())
				must(t, d.Put(ctx, chain))
				off := slotOf(t, d, 2)
				editFile(t, d, off, slotSize, func(s []byte) {
					c.mutate(d, 2, s)
					if why := checkRecord((*[recSize]byte)(s[:recSize]), d.want.nsHash, 2, d.opts.BlockBytes); why != c.reason {
						t.Fatalf("checkRecord = %q, want %q", why, c.reason)
					}
				})
				if repair == "match" {
					for range 2 {
						if n, err := d.MatchPrefix(ctx, chain); err != nil || n != 1 {
							t.Fatalf("MatchPrefix = %d, %v; want 1 (stop before the corrupt block)", n, err)
						}
					}
					if st := d.Stats(); st.Corrupt != 2 || st.Blocks != 3 {
						t.Fatalf("Stats = %+v, want Corrupt 2 (one per read), Blocks 3 (the slot is occupied)", st)
					}
				}
				// A Put rewrites it, in the corrupt slot itself.
				must(t, d.Put(ctx, chain))
				if got := slotOf(t, d, 2); got != off {
					t.Fatalf("block 2 rewritten at %d, not in its corrupt slot at %d", got, off)
				}
				if n, err := d.MatchPrefix(ctx, chain); err != nil || n != 3 {
					t.Fatalf("MatchPrefix after re-put = %d, %v; want 3", n, err)
				}
				if st := d.Stats(); st.Blocks != 3 || st.Evictions != 0 {
					t.Fatalf("Stats = %+v, want Blocks 3, no evictions", st)
				}
				checkHeader(t, d)
			})
		}
	}
}

// TestDiskNoFlipIsAHit flips each byte of a slot in turn: a flip in the
// record is never a hit (a flip in the block hash reads as a plain miss,
// any other as a counted corrupt record); one in the stamp or the reserved
// bytes changes nothing.
func TestDiskNoFlipIsAHit(t *testing.T) {
	ctx := context.Background()
	for off := range slotSize {
		d := openTestDisk(t, t.TempDir(), "m", 10, nil)
		must(t, d.Put(ctx, hs(1)))
		editFile(t, d, slotOf(t, d, 1)+int64(off), 1, func(b []byte) { b[0] ^= 0xa5 })
		n, err := d.MatchPrefix(ctx, hs(1))
		if err != nil {
			t.Fatal(err)
		}
		st := d.Stats()
		switch {
		case off >= recSize && n != 1:
			t.Fatalf("byte %d (stamp/reserved) flipped: a miss", off)
		case off < recSize && n != 0:
			t.Fatalf("byte %d flipped: a hit", off)
		case off >= 16 && off < 24 && st.Corrupt != 0:
			t.Fatalf("byte %d (block hash) flipped: counted corrupt", off)
		case off < recSize && (off < 16 || off >= 24) && st.Corrupt != 1:
			t.Fatalf("byte %d flipped: Corrupt %d, want 1", off, st.Corrupt)
		}
	}
}

func TestDiskCopiedFromOtherNamespaceIsAMiss(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openTestDisk(t, dir, "model-a", 10, nil)
	b := openTestDisk(t, dir, "model-b", 10, nil)
	must(t, a.Put(ctx, hs(7, 8)))
	if n, _ := b.MatchPrefix(ctx, hs(7, 8)); n != 0 {
		t.Fatalf("model-b sees model-a's blocks: %d", n)
	}
	// Even a's valid records, copied into b's file, are not b's blocks.
	sets := readFile(t, a.path)[headerSize:]
	editFile(t, b, headerSize, len(sets), func(s []byte) { copy(s, sets) })
	if n, _ := b.MatchPrefix(ctx, hs(7, 8)); n != 0 {
		t.Fatalf("planted records hit: %d", n)
	}
	if st := b.Stats(); st.Corrupt != 1 {
		t.Fatalf("Corrupt = %d, want 1", st.Corrupt)
	}
	if n, _ := a.MatchPrefix(ctx, hs(7, 8)); n != 2 {
		t.Fatalf("model-a lost its blocks: %d", n)
	}
}

// TestDiskHeaderDamage: a header that fails its check resets the file,
// whoever finds it (a Disk opening it, a Put); until then Stats reports the
// last count it read.
func TestDiskHeaderDamage(t *testing.T) {
	ctx := context.Background()
	for _, finder := range []string{"open", "put"} {
		t.Run(finder, func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDisk(t, dir, "m", 10, newFakeClock())
			must(t, d.Put(ctx, hs(1, 2, 3)))
			editFile(t, d, 33, 1, func(b []byte) { b[0] ^= 1 }) // the block count
			if st := d.Stats(); st.Blocks != 3 {
				t.Fatalf("Stats with a damaged header = %+v, want the last seen 3 blocks", st)
			}
			if finder == "open" {
				d = openTestDisk(t, dir, "m", 10, nil)
			} else {
				must(t, d.Put(ctx, hs(4)))
			}
			if n, _ := d.MatchPrefix(ctx, hs(1, 2, 3)); n != 0 {
				t.Fatalf("MatchPrefix after a reset = %d, want 0", n)
			}
			checkHeader(t, d)
			want := 0
			if finder == "put" {
				want = 1
			}
			if st := d.Stats(); st.Blocks != want {
				t.Fatalf("Stats after a reset = %+v, want %d blocks", st, want)
			}
		})
	}
}

// TestDiskTruncatedFile: slots cut off by a truncation are misses (never a
// wrong hit, never an error); the next Put extends the file again and
// counts its slots anew.
func TestDiskTruncatedFile(t *testing.T) {
	ctx := context.Background()
	const capBlocks = 64 // 4 sets of 16
	chain := hashRange(1, 40)
	tests := []struct {
		name   string
		size   int64
		before int // MatchPrefix(chain) after the truncation
	}{
		{"to the first set", headerSize + 16*slotSize, 0}, // block 1 is in set 1
		{"to three sets", headerSize + 3*16*slotSize, 2},  // blocks 1 (set 1), 2 (set 2) stay
		{"mid-slot", headerSize + 16*slotSize + 20, 0},
		{"to the header", headerSize, 0},
		{"to nothing", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTestDisk(t, t.TempDir(), "m", capBlocks, newFakeClock())
			must(t, d.Put(ctx, chain))
			before := d.Stats().Blocks
			must(t, os.Truncate(d.path, tt.size))
			if n, err := d.MatchPrefix(ctx, chain); err != nil || n != tt.before {
				t.Fatalf("MatchPrefix after truncation = %d, %v; want %d", n, err, tt.before)
			}
			if tt.size < hdrLen {
				if st := d.Stats(); st.Blocks != before {
					t.Fatalf("Stats without a header = %+v, want the last seen %d blocks", st, before)
				}
			}
			must(t, d.Put(ctx, chain))
			if n, err := d.MatchPrefix(ctx, chain); err != nil || n != len(chain) {
				t.Fatalf("MatchPrefix after re-put = %d, %v; want %d", n, err, len(chain))
			}
			checkHeader(t, d)
			if st := d.Stats(); st.Blocks != len(chain) || st.WriteErrors != 0 {
				t.Fatalf("Stats = %+v, want %d blocks", st, len(chain))
			}
		})
	}
}

func TestDiskWriteFailures(t *testing.T) {
	ctx := context.Background()
	// A slot never spans two file-system blocks, so a full disk refuses a
	// slot whole.
	enospc := func(*os.File, []byte, int64) error { return syscall.ENOSPC }
	tests := []struct {
		name       string
		write      func(w func(*os.File, []byte, int64) error) func(*os.File, []byte, int64) error
		put        []kv.BlockHash
		wantErrs   uint64
		wantHeld   []kv.BlockHash
		wantBlocks int
		wantSys    error
	}{
		{
			name:  "disk full",
			write: func(func(*os.File, []byte, int64) error) func(*os.File, []byte, int64) error { return enospc },
			put:   hs(1, 2, 3), wantErrs: 3, wantSys: syscall.ENOSPC,
		},
		{
			name: "disk fills after one record",
			write: func(w func(*os.File, []byte, int64) error) func(*os.File, []byte, int64) error {
				calls := 0
				return func(f *os.File, b []byte, off int64) error {
					if calls++; calls > 1 {
						return enospc(f, b, off)
					}
					return w(f, b, off)
				}
			},
			// Written back to front: 3 lands, 2 fails, 1 is not tried.
			put: hs(1, 2, 3), wantErrs: 2, wantHeld: hs(3), wantBlocks: 1, wantSys: syscall.ENOSPC,
		},
		{
			name: "I/O error after part of a slot",
			write: func(func(*os.File, []byte, int64) error) func(*os.File, []byte, int64) error {
				return func(f *os.File, b []byte, off int64) error {
					_, _ = f.WriteAt(b[:20], off)
					return syscall.EIO
				}
			},
			// The part written occupies its slot, as a corrupt one.
			put: hs(1, 2, 3), wantErrs: 3, wantBlocks: 1, wantSys: syscall.EIO,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTestDisk(t, t.TempDir(), "m", 10, newFakeClock())
			w := d.write
			d.write = tt.write(w)
			err := d.Put(ctx, tt.put)
			if !errors.Is(err, ErrDiskWrite) || !errors.Is(err, tt.wantSys) {
				t.Fatalf("Put error %v, want one wrapping ErrDiskWrite and %v", err, tt.wantSys)
			}
			if st := d.Stats(); st.WriteErrors != tt.wantErrs || st.Blocks != tt.wantBlocks {
				t.Fatalf("Stats = %+v, want WriteErrors %d, Blocks %d", st, tt.wantErrs, tt.wantBlocks)
			}
			if got := held(t, d); !slices.Equal(got, tt.wantHeld) {
				t.Fatalf("held %v, want %v", got, tt.wantHeld)
			}
			if n, err := d.MatchPrefix(ctx, tt.put); err != nil || n != 0 {
				t.Fatalf("MatchPrefix = %d, %v; want a plain miss", n, err)
			}
			checkHeader(t, d)
			d.write = w
			must(t, d.Put(ctx, tt.put))
			if n, err := d.MatchPrefix(ctx, tt.put); err != nil || n != len(tt.put) {
				t.Fatalf("after recovery MatchPrefix = %d, %v", n, err)
			}
			if st := d.Stats(); st.WriteErrors != tt.wantErrs || st.Corrupt != 0 || st.Blocks != len(tt.put) {
				t.Fatalf("after recovery Stats = %+v", st)
			}
			checkHeader(t, d)
		})
	}
}

func TestDiskOptionsValidation(t *testing.T) {
	dir := t.TempDir()
	ok := DiskOptions{Dir: dir, CapacityBytes: 1 << 30, BlockBytes: 1 << 20, Namespace: "m"}
	tests := []struct {
		name  string
		edit  func(o *DiskOptions)
		field string // "" means valid
	}{
		{"valid", func(o *DiskOptions) {}, ""},
		{"one block", func(o *DiskOptions) { o.CapacityBytes = o.BlockBytes }, ""},
		{"no dir", func(o *DiskOptions) { o.Dir = "" }, "DiskOptions.Dir"},
		{"zero capacity", func(o *DiskOptions) { o.CapacityBytes = 0 }, "DiskOptions.CapacityBytes"},
		{"negative capacity", func(o *DiskOptions) { o.CapacityBytes = -1 }, "DiskOptions.CapacityBytes"},
		{"absurd capacity", func(o *DiskOptions) { o.CapacityBytes = 1 << 60; o.BlockBytes = 1 << 40 }, "DiskOptions.CapacityBytes"},
		{"zero block", func(o *DiskOptions) { o.BlockBytes = 0 }, "DiskOptions.BlockBytes"},
		{"negative block", func(o *DiskOptions) { o.BlockBytes = -5 }, "DiskOptions.BlockBytes"},
		{"capacity below one block", func(o *DiskOptions) { o.CapacityBytes = o.BlockBytes - 1 }, "DiskOptions.CapacityBytes"},
		{"too many blocks", func(o *DiskOptions) { o.BlockBytes = 1 }, "CapacityBytes/BlockBytes"},
		{"no namespace", func(o *DiskOptions) { o.Namespace = "" }, "DiskOptions.Namespace"},
		{"long namespace", func(o *DiskOptions) { o.Namespace = strings.Repeat("x", MaxNamespaceLen+1) }, "DiskOptions.Namespace"},
		{"dir is a file", func(o *DiskOptions) {
			p := filepath.Join(dir, "file")
			_ = os.WriteFile(p, nil, 0o644)
			o.Dir = p
		}, "DiskOptions.Dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			d, err := OpenDisk(o)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("OpenDisk: %v", err)
				}
				_ = d.Close()
				return
			}
			if err == nil {
				_ = d.Close()
				t.Fatal("OpenDisk succeeded")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name %s", err, tt.field)
			}
		})
	}
}

func TestDiskNamespaceCannotEscapeDir(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	for _, ns := range []string{"../../escape", "/etc/passwd", "a/b/../../..", "..", ".", "x\x00y", "meta-llama/Llama-3.1-8B"} {
		d := openTestDisk(t, dir, ns, 10, nil)
		must(t, d.Put(ctx, hs(1, 2)))
		if n, _ := d.MatchPrefix(ctx, hs(1, 2)); n != 2 {
			t.Fatalf("namespace %q: MatchPrefix = %d, want 2", ns, n)
		}
		if filepath.Dir(d.path) != dir || !strings.HasSuffix(d.path, slotSuffix) {
			t.Fatalf("namespace %q stored in %s, outside %s", ns, d.path, dir)
		}
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "store" {
		t.Fatalf("files outside the store directory: %v", ents)
	}
}

// TestDiskReopenKeepsRecords: the records outlive the Disk (a replica
// restart), with their counts.
func TestDiskReopenKeepsRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDisk(t, dir, "m", 100, nil)
	must(t, d.Put(ctx, hashRange(1, 50)))
	must(t, d.Close())
	e := openTestDisk(t, dir, "m", 100, nil)
	if n, _ := e.MatchPrefix(ctx, hashRange(1, 50)); n != 50 {
		t.Fatalf("reopened store matches %d, want 50", n)
	}
	if st := e.Stats(); st.Blocks != 50 {
		t.Fatalf("reopened Stats = %+v, want 50 blocks", st)
	}
	// Another capacity is another file: nothing shared, nothing misread.
	f := openTestDisk(t, dir, "m", 200, nil)
	if n, _ := f.MatchPrefix(ctx, hashRange(1, 50)); n != 0 {
		t.Fatalf("a store of another capacity matches %d", n)
	}
}

func TestDiskClosed(t *testing.T) {
	ctx := context.Background()
	d := openTestDisk(t, t.TempDir(), "m", 10, nil)
	must(t, d.Put(ctx, hs(1)))
	must(t, d.Close())
	must(t, d.Close())
	if _, err := d.MatchPrefix(ctx, hs(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("MatchPrefix after Close: %v", err)
	}
	if err := d.Put(ctx, hs(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if st := d.Stats(); st.Blocks != 1 {
		t.Fatalf("Stats after Close = %+v", st)
	}
}

func TestDiskCanceledContext(t *testing.T) {
	d := openTestDisk(t, t.TempDir(), "m", 10, nil)
	must(t, d.Put(context.Background(), hs(1)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.MatchPrefix(ctx, hs(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("MatchPrefix: %v", err)
	}
	if err := d.Put(ctx, hs(2)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put: %v", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reseal recomputes a record's checksum after a test edits it.
func reseal(b []byte) {
	sum := crc32Castagnoli(b[:48])
	b[48], b[49], b[50], b[51] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
}
