package tier

import (
	"context"
	"errors"
	"io/fs"
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

// storeRecord is one record file found under a store directory.
type storeRecord struct {
	space string
	h     kv.BlockHash
}

// walkStore lists every record file under dir and their total weight, and
// fails the test on files a store never leaves behind (temporary files).
func walkStore(t testing.TB, dir string) (recs []storeRecord, bytes int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			t.Errorf("temporary file left behind: %s", p)
			return nil
		}
		if !strings.HasSuffix(name, recSuffix) {
			return nil
		}
		sub := filepath.Base(filepath.Dir(p))
		space := filepath.Base(filepath.Dir(filepath.Dir(p)))
		h, ok := parseRecordName(sub, name)
		w, ok2 := parseSpaceDirName(space)
		if !ok || !ok2 {
			t.Errorf("unexpected file %s", p)
			return nil
		}
		recs = append(recs, storeRecord{space, h})
		bytes += w
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs, bytes
}

// held returns the sorted hashes of d's namespace on disk, without touching them.
func held(t testing.TB, d *Disk) []kv.BlockHash {
	t.Helper()
	recs, _ := walkStore(t, d.dir)
	var out []kv.BlockHash
	for _, r := range recs {
		if r.space == filepath.Base(d.own.dir) {
			out = append(out, r.h)
		}
	}
	slices.Sort(out)
	return out
}

// checkUsage asserts the usage record matches the files: the invariant every
// change under the lock keeps.
func checkUsage(t testing.TB, dir string, capBytes int64) {
	t.Helper()
	recs, bytes := walkStore(t, dir)
	f, err := os.Open(filepath.Join(dir, lockFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, ok := readUsage(f)
	if !ok {
		t.Fatal("usage record unreadable")
	}
	if u.blocks != int64(len(recs)) || u.bytes != bytes {
		t.Fatalf("usage record says %d blocks / %d bytes, directory holds %d / %d", u.blocks, u.bytes, len(recs), bytes)
	}
	if bytes > capBytes {
		t.Fatalf("store holds %d bytes, capacity %d", bytes, capBytes)
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
	st := a.Stats()
	if st.Blocks != 4 || st.Bytes != 4*testBlock || st.CapacityBytes != 100*testBlock {
		t.Fatalf("Stats = %+v", st)
	}
	// a asked: 4 (miss 4), 4 (hit 3, miss 1), 4 (hit 4), 3 (hit 0, miss 3), 0.
	if st.Hits != 7 || st.Misses != 8 {
		t.Fatalf("Hits/Misses = %d/%d, want 7/8", st.Hits, st.Misses)
	}
	checkUsage(t, dir, 100*testBlock)
}

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
		checkUsage(t, d.dir, 4*testBlock)
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
		// b never indexed a's blocks: it must still evict the oldest, 3, not its own newer 4.
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
		checkUsage(t, dir, 4*testBlock)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.Blocks != 4 || sb.Blocks != 4 {
		t.Fatalf("Blocks a=%d b=%d, want 4 each", sa.Blocks, sb.Blocks)
	}
	// 11 blocks written into a 4-block store: exactly 7 evictions between them.
	if sa.Evictions+sb.Evictions != 7 {
		t.Fatalf("evictions a=%d + b=%d, want 7", sa.Evictions, sb.Evictions)
	}
}

func TestDiskMixedBlockSizes(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	dir := t.TempDir()
	const capBytes = 10_000
	small, err := OpenDisk(DiskOptions{Dir: dir, CapacityBytes: capBytes, BlockBytes: 1000, Namespace: "small", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	big, err := OpenDisk(DiskOptions{Dir: dir, CapacityBytes: capBytes, BlockBytes: 3000, Namespace: "big", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	for i := range 8 {
		clk.Step(time.Second)
		if err := small.Put(ctx, hs(uint64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Second)
	// 8000 + 2×3000 > 10000: the four oldest small blocks make room.
	if err := big.Put(ctx, hs(1, 2)); err != nil {
		t.Fatal(err)
	}
	checkUsage(t, dir, capBytes)
	if got, want := held(t, small), hs(104, 105, 106, 107); !slices.Equal(got, want) {
		t.Fatalf("small held %v, want %v", got, want)
	}
	if n, _ := big.MatchPrefix(ctx, hs(1, 2)); n != 2 {
		t.Fatalf("big MatchPrefix = %d, want 2", n)
	}
	if st := small.Stats(); st.Bytes != 10_000 || st.Blocks != 6 {
		t.Fatalf("store-wide Stats = %+v, want 6 blocks, 10000 bytes", st)
	}
}

// corruptions are the ways a record file can stop being block h's record.
var corruptions = []struct {
	name   string
	reason string
	mutate func(t *testing.T, d *Disk, p string, h kv.BlockHash)
}{
	{"truncated", badShort, func(t *testing.T, _ *Disk, p string, _ kv.BlockHash) {
		must(t, os.Truncate(p, 10))
	}},
	{"emptied", badShort, func(t *testing.T, _ *Disk, p string, _ kv.BlockHash) {
		must(t, os.Truncate(p, 0))
	}},
	{"extended", badLong, func(t *testing.T, _ *Disk, p string, _ kv.BlockHash) {
		b := readFile(t, p)
		must(t, os.WriteFile(p, append(b, 0), 0o644))
	}},
	{"byte overwritten", badChecksum, func(t *testing.T, _ *Disk, p string, _ kv.BlockHash) {
		b := readFile(t, p)
		b[40] ^= 0x55
		must(t, os.WriteFile(p, b, 0o644))
	}},
	{"another block's record (wrong tokens)", badHash, func(t *testing.T, d *Disk, p string, h kv.BlockHash) {
		writeRecordFile(t, p, d.nsHash, h+1, d.own.weight)
	}},
	{"another namespace's record", badNamespace, func(t *testing.T, d *Disk, p string, h kv.BlockHash) {
		writeRecordFile(t, p, diskNamespaceHash("other-model"), h, d.own.weight)
	}},
	{"another block size", badSize, func(t *testing.T, d *Disk, p string, h kv.BlockHash) {
		writeRecordFile(t, p, d.nsHash, h, d.own.weight*2)
	}},
	{"payload changed, checksum recomputed", badPayload, func(t *testing.T, _ *Disk, p string, _ kv.BlockHash) {
		b := readFile(t, p)
		b[33] ^= 1
		reseal(b)
		must(t, os.WriteFile(p, b, 0o644))
	}},
	{"magic changed, checksum recomputed", badMagic, func(t *testing.T, _ *Disk, p string, _ kv.BlockHash) {
		b := readFile(t, p)
		b[0] = 'X'
		reseal(b)
		must(t, os.WriteFile(p, b, 0o644))
	}},
	{"future version", badVersion, func(t *testing.T, _ *Disk, p string, _ kv.BlockHash) {
		b := readFile(t, p)
		b[4] = 2
		reseal(b)
		must(t, os.WriteFile(p, b, 0o644))
	}},
}

func TestDiskCorruptRecordIsAMiss(t *testing.T) {
	ctx := context.Background()
	chain := hs(1, 2, 3)
	for _, c := range corruptions {
		// "hit-first": the record was read (and remembered as verified)
		// before it was damaged; the change to its file makes it read again.
		for _, repair := range []string{"match", "hit-first", "put"} {
			t.Run(c.name+"/"+repair, func(t *testing.T) {
				d := openTestDisk(t, t.TempDir(), "m", 10, newFakeClock())
				must(t, d.Put(ctx, chain))
				p := recordPath(d.own.dir, 2)
				if repair == "hit-first" {
					if n, err := d.MatchPrefix(ctx, chain); err != nil || n != 3 {
						t.Fatalf("MatchPrefix before the damage = %d, %v; want 3", n, err)
					}
				}
				c.mutate(t, d, p, 2)
				if st, why := readRecord(p, d.nsHash, 2, d.own.weight, 0); st != recCorrupt || why != c.reason {
					t.Fatalf("readRecord = %v %q, want corrupt %q", st, why, c.reason)
				}
				if repair != "put" {
					if n, err := d.MatchPrefix(ctx, chain); err != nil || n != 1 {
						t.Fatalf("MatchPrefix = %d, %v; want 1 (stop before the corrupt block)", n, err)
					}
					if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("corrupt record not removed: %v", err)
					}
					if st := d.Stats(); st.Blocks != 2 {
						t.Fatalf("Blocks = %d after removal, want 2", st.Blocks)
					}
					checkUsage(t, d.dir, 10*testBlock)
				}
				// A Put rewrites it (and, when it meets the corruption first, counts it).
				must(t, d.Put(ctx, chain))
				if n, err := d.MatchPrefix(ctx, chain); err != nil || n != 3 {
					t.Fatalf("MatchPrefix after re-put = %d, %v; want 3", n, err)
				}
				if st := d.Stats(); st.Corrupt != 1 || st.Blocks != 3 {
					t.Fatalf("Stats = %+v, want Corrupt 1, Blocks 3", st)
				}
				checkUsage(t, d.dir, 10*testBlock)
			})
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
	// Even a valid record of a, planted at b's path, is not b's block.
	for _, h := range hs(7, 8) {
		p := recordPath(b.own.dir, h)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, readFile(t, recordPath(a.own.dir, h)), 0o644))
	}
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

func TestDiskWriteFailures(t *testing.T) {
	ctx := context.Background()
	enospc := func(fd int, b []byte) error {
		_, _ = syscall.Write(fd, b[:10]) // part of a record, then the disk is full
		return syscall.ENOSPC
	}
	tests := []struct {
		name     string
		break_   func(t *testing.T, d *Disk) (restore func())
		put      []kv.BlockHash
		wantErrs uint64
		wantHeld []kv.BlockHash
		wantSys  error
	}{
		{
			name: "disk full",
			break_: func(t *testing.T, d *Disk) func() {
				w := d.write
				d.write = enospc
				return func() { d.write = w }
			},
			put: hs(1, 2, 3), wantErrs: 3, wantHeld: nil, wantSys: syscall.ENOSPC,
		},
		{
			name: "disk fills after one record",
			break_: func(t *testing.T, d *Disk) func() {
				w, calls := d.write, 0
				d.write = func(fd int, b []byte) error {
					if calls++; calls > 1 {
						return enospc(fd, b)
					}
					return w(fd, b)
				}
				return func() { d.write = w }
			},
			// Written back to front: 3 lands, 2 fails, 1 is not tried.
			put: hs(1, 2, 3), wantErrs: 2, wantHeld: hs(3), wantSys: syscall.ENOSPC,
		},
		{
			name: "subdirectory replaced by a file",
			break_: func(t *testing.T, d *Disk) func() {
				sub := filepath.Dir(recordPath(d.own.dir, 1))
				must(t, os.RemoveAll(sub))
				must(t, os.WriteFile(sub, nil, 0o644))
				return func() { must(t, os.Remove(sub)) }
			},
			put: hs(1), wantErrs: 1, wantHeld: nil, wantSys: syscall.ENOTDIR,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTestDisk(t, t.TempDir(), "m", 10, newFakeClock())
			restore := tt.break_(t, d)
			err := d.Put(ctx, tt.put)
			if !errors.Is(err, ErrDiskWrite) || !errors.Is(err, tt.wantSys) {
				t.Fatalf("Put error %v, want one wrapping ErrDiskWrite and %v", err, tt.wantSys)
			}
			if st := d.Stats(); st.WriteErrors != tt.wantErrs || st.Blocks != len(tt.wantHeld) {
				t.Fatalf("Stats = %+v, want WriteErrors %d, Blocks %d", st, tt.wantErrs, len(tt.wantHeld))
			}
			if got := held(t, d); !slices.Equal(got, tt.wantHeld) {
				t.Fatalf("held %v, want %v", got, tt.wantHeld)
			}
			if n, err := d.MatchPrefix(ctx, tt.put); err != nil || n != 0 {
				t.Fatalf("MatchPrefix = %d, %v; want a plain miss", n, err)
			}
			checkUsage(t, d.dir, 10*testBlock)
			restore()
			must(t, d.Put(ctx, tt.put))
			if n, err := d.MatchPrefix(ctx, tt.put); err != nil || n != len(tt.put) {
				t.Fatalf("after recovery MatchPrefix = %d, %v", n, err)
			}
			if st := d.Stats(); st.WriteErrors != tt.wantErrs || st.Corrupt != 0 {
				t.Fatalf("after recovery Stats = %+v", st)
			}
			checkUsage(t, d.dir, 10*testBlock)
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
		if !strings.HasPrefix(d.own.dir, dir+string(os.PathSeparator)) || strings.Count(d.own.dir[len(dir):], string(os.PathSeparator)) != 1 {
			t.Fatalf("namespace %q stored in %s, outside %s", ns, d.own.dir, dir)
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

func TestDiskRecoversItsUsageRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDisk(t, dir, "m", 10, newFakeClock())
	must(t, d.Put(ctx, hs(1, 2, 3)))
	// A writer that died mid-way leaves a temporary file; a torn usage record.
	tmp := filepath.Join(filepath.Dir(recordPath(d.own.dir, 9)), tempPrefix+"tmp")
	must(t, os.MkdirAll(filepath.Dir(tmp), 0o755))
	must(t, os.WriteFile(tmp, []byte("half"), 0o644))
	must(t, os.Truncate(filepath.Join(dir, lockFileName), 7))
	if st := d.Stats(); st.Blocks != 3 {
		t.Fatalf("Stats with a torn usage record = %+v, want the last seen 3 blocks", st)
	}
	must(t, d.Put(ctx, hs(4)))
	if st := d.Stats(); st.Blocks != 4 || st.Bytes != 4*testBlock {
		t.Fatalf("Stats after rescan = %+v, want 4 blocks", st)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale temporary file survived the rescan: %v", err)
	}
	checkUsage(t, dir, 10*testBlock)
	// A fresh process opening the store finds the same.
	e := openTestDisk(t, dir, "m", 10, nil)
	if n, _ := e.MatchPrefix(ctx, hs(1, 2, 3, 4)); n != 4 {
		t.Fatalf("reopened store matches %d, want 4", n)
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

func writeRecordFile(t testing.TB, p string, nsHash uint64, h kv.BlockHash, blockBytes int64) {
	t.Helper()
	var b [recSize]byte
	encodeRecord(&b, nsHash, h, blockBytes)
	must(t, os.WriteFile(p, b[:], 0o644))
}

// reseal recomputes a record's checksum after a test edits it.
func reseal(b []byte) {
	var r [recSize]byte
	copy(r[:], b)
	sum := crc32Castagnoli(r[:48])
	b[48], b[49], b[50], b[51] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
}
