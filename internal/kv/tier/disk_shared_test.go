package tier

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/kv"
)

// diskChildEnv makes the test binary a store writer (see diskChild) instead
// of running tests, so TestDiskAcrossProcesses can use real processes.
const diskChildEnv = "CAPSTAN_TIER_DISK_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(diskChildEnv); spec != "" {
		os.Exit(diskChild(spec))
	}
	os.Exit(m.Run())
}

// childSpec is what a writer process does: put Count distinct blocks from
// First on, Batch at a time, asking for each batch after writing it.
type childSpec struct {
	Dir           string
	CapacityBytes int64
	First, Count  int
	Batch         int
}

// diskChild runs a writer process and prints its Stats as JSON.
func diskChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, err := OpenDisk(DiskOptions{Dir: s.Dir, CapacityBytes: s.CapacityBytes, BlockBytes: testBlock, Namespace: "m"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer d.Close()
	if err := writeRange(d, s.First, s.Count, s.Batch); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(d.Stats()); err != nil {
		return 2
	}
	return 0
}

// writeRange puts blocks first..first+count-1 in batches, each batch a chain.
func writeRange(d *Disk, first, count, batch int) error {
	ctx := context.Background()
	for i := 0; i < count; i += batch {
		hashes := make([]kv.BlockHash, 0, batch)
		for j := i; j < min(i+batch, count); j++ {
			hashes = append(hashes, kv.BlockHash(first+j))
		}
		if err := d.Put(ctx, hashes); err != nil {
			return err
		}
		if _, err := d.MatchPrefix(ctx, hashes); err != nil {
			return err
		}
	}
	return nil
}

// TestDiskAcrossProcesses runs two writer processes and this one on one
// store at once, with disjoint blocks: the store ends exactly full, the
// header's count matches the file, and the evictions the three report add up
// to the blocks written minus the blocks held (none twice, none missed), as
// does the header's.
func TestDiskAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	const capBlocks, count, batch = 48, 400, 8 // 3 sets of 16
	capBytes := int64(capBlocks * testBlock)
	var wg sync.WaitGroup
	stats := make([]DiskStats, 3)
	errs := make([]error, 3)
	for i := range 2 {
		spec, _ := json.Marshal(childSpec{Dir: dir, CapacityBytes: capBytes, First: (i + 1) * 100_000, Count: count, Batch: batch})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), diskChildEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := cmd.Output()
			if err != nil {
				errs[i] = fmt.Errorf("child %d: %w", i, err)
				return
			}
			errs[i] = json.Unmarshal(out, &stats[i])
		}()
	}
	d, err := OpenDisk(DiskOptions{Dir: dir, CapacityBytes: capBytes, BlockBytes: testBlock, Namespace: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	errs[2] = writeRange(d, 1, count, batch)
	wg.Wait()
	stats[2] = d.Stats()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	h := checkHeader(t, d)
	// Every slot holds a whole record of its set's blocks.
	if recs := held(t, d); len(recs) != capBlocks || h.blocks != capBlocks {
		t.Fatalf("store holds %d valid records (header: %d) after %d written, want exactly %d", len(recs), h.blocks, 3*count, capBlocks)
	}
	var evictions uint64
	for i, s := range stats {
		if s.Corrupt != 0 || s.WriteErrors != 0 {
			t.Fatalf("writer %d: %+v", i, s)
		}
		evictions += s.Evictions
	}
	if want := uint64(3*count - capBlocks); evictions != want || h.evictions != int64(want) {
		t.Fatalf("writers evicted %d blocks in all (header: %d), want %d", evictions, h.evictions, want)
	}
}

func hashRange(first, n int) []kv.BlockHash {
	out := make([]kv.BlockHash, n)
	for i := range out {
		out[i] = kv.BlockHash(first + i)
	}
	return out
}

// TestDiskConcurrent hammers two Disks on one store from several goroutines
// each with overlapping chains (run it with -race): no torn record is ever
// counted corrupt, nothing fails, and the store stays within capacity with
// an exact header.
func TestDiskConcurrent(t *testing.T) {
	dir := t.TempDir()
	const capBlocks = 32
	disks := []*Disk{openTestDisk(t, dir, "m", capBlocks, nil), openTestDisk(t, dir, "m", capBlocks, nil)}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		d := disks[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 150 {
				start := rng.IntN(64)
				chain := hashRange(start, 1+rng.IntN(12))
				if rng.IntN(2) == 0 {
					if err := d.Put(ctx, chain); err != nil {
						errs <- err
						return
					}
				}
				n, err := d.MatchPrefix(ctx, chain)
				if err != nil || n < 0 || n > len(chain) {
					errs <- fmt.Errorf("MatchPrefix = %d, %v", n, err)
					return
				}
				_ = d.Stats()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, d := range disks {
		if st := d.Stats(); st.Corrupt != 0 || st.WriteErrors != 0 || st.Blocks > capBlocks {
			t.Fatalf("disk %d: %+v", i, st)
		}
	}
	checkHeader(t, disks[0])
}

// TestDiskReopenKeepsRecency: a store reopened later (a replica restart)
// evicts by the recency its slots carry.
func TestDiskReopenKeepsRecency(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := newFakeClock()
	d := openTestDisk(t, dir, "m", 3, clk)
	for _, h := range []uint64{1, 2, 3} {
		clk.Step(time.Second)
		must(t, d.Put(ctx, hs(h)))
	}
	clk.Step(time.Second)
	if n, _ := d.MatchPrefix(ctx, hs(1)); n != 1 {
		t.Fatal("miss")
	}
	must(t, d.Close())
	clk.Step(time.Second)
	e := openTestDisk(t, dir, "m", 3, clk)
	clk.Step(time.Second)
	must(t, e.Put(ctx, hs(4)))
	if got := held(t, e); fmt.Sprint(got) != "[1 3 4]" {
		t.Fatalf("held %v, want [1 3 4] (2 was least recently used)", got)
	}
}

// TestDiskHitRefreshesRecency: a record hit (by any instance, the writer
// or not) is not the LRU victim of the next writer.
func TestDiskHitRefreshesRecency(t *testing.T) {
	ctx := context.Background()
	for _, who := range []string{"same instance", "other instance"} {
		t.Run(who, func(t *testing.T) {
			dir := t.TempDir()
			clk := newFakeClock()
			d := openTestDisk(t, dir, "m", 3, clk)
			for _, h := range []uint64{1, 2, 3} {
				clk.Step(time.Second)
				must(t, d.Put(ctx, hs(h)))
			}
			clk.Step(time.Second)
			e := openTestDisk(t, dir, "m", 3, clk)
			clk.Step(time.Second)
			hitter := e
			if who == "other instance" {
				hitter = d
			}
			if n, _ := hitter.MatchPrefix(ctx, hs(1)); n != 1 {
				t.Fatal("miss")
			}
			clk.Step(time.Second)
			must(t, e.Put(ctx, hs(4)))
			if got := held(t, e); fmt.Sprint(got) != "[1 3 4]" {
				t.Fatalf("held %v, want [1 3 4] (2 was least recently used)", got)
			}
		})
	}
}
