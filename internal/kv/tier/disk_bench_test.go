package tier

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
)

// BenchmarkDiskMatchPrefix asks for a 32-block prefix that is all hits: 32
// set reads and record validations (the stamps are refreshed at most once a
// second, so almost never here).
func BenchmarkDiskMatchPrefix(b *testing.B) {
	ctx := context.Background()
	d := openTestDisk(b, b.TempDir(), "m", 1024, nil)
	chain := hashRange(1, 32)
	must(b, d.Put(ctx, chain))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if n, err := d.MatchPrefix(ctx, chain); err != nil || n != len(chain) {
			b.Fatalf("MatchPrefix = %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chain)), "ns/block")
}

// BenchmarkDiskPut writes 8 new blocks per call into a full store, so each
// call also evicts 8 (one per set written): the steady state of a busy node.
func BenchmarkDiskPut(b *testing.B) {
	ctx := context.Background()
	d := openTestDisk(b, b.TempDir(), "m", 1024, nil)
	next := 1
	batch := make([]kv.BlockHash, 8)
	fill := func() {
		for i := range batch {
			batch[i] = kv.BlockHash(next)
			next++
		}
	}
	for range 1024 / len(batch) {
		fill()
		must(b, d.Put(ctx, batch))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		fill()
		if err := d.Put(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/block")
	if st := d.Stats(); st.Blocks != 1024 {
		b.Fatalf("store holds %d blocks, want 1024", st.Blocks)
	}
}
