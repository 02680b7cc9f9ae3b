package tier

import (
	"slices"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
)

func hs(v ...uint64) []kv.BlockHash {
	out := make([]kv.BlockHash, len(v))
	for i, x := range v {
		out[i] = kv.BlockHash(x)
	}
	return out
}

func TestNewL1Capacity(t *testing.T) {
	tests := []struct {
		name            string
		capBytes, block int64
		want            int
	}{
		{"exact", 4096, 1024, 4},
		{"rounds down", 4095, 1024, 3},
		{"below one block", 1000, 1024, 0},
		{"zero block size", 4096, 0, 0},
		{"negative capacity", -1, 1024, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewL1(tt.capBytes, tt.block)
			if got := c.CapacityBlocks(); got != tt.want {
				t.Fatalf("CapacityBlocks() = %d, want %d", got, tt.want)
			}
			ev := c.Put(hs(1, 2, 3, 4, 5)...)
			if c.Len() != min(tt.want, 5) {
				t.Fatalf("Len after Put of 5 = %d, want %d", c.Len(), min(tt.want, 5))
			}
			if tt.want == 0 && ev != nil {
				t.Fatalf("zero-capacity cache reported evictions %v", ev)
			}
		})
	}
}

// op is one step of an L1 scenario; after it the cache's recency order (most
// recent first) must be wantOrder.
type op struct {
	put         []uint64
	match       []uint64
	remove      uint64
	wantMatch   int
	wantEvicted []uint64
	wantOrder   []uint64
}

func TestL1LRU(t *testing.T) {
	tests := []struct {
		name  string
		cap   int
		steps []op
	}{
		{
			name: "put keeps chain head most recent",
			cap:  4,
			steps: []op{
				{put: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
			},
		},
		{
			name: "overflow evicts least recent",
			cap:  3,
			steps: []op{
				{put: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
				{put: []uint64{4}, wantEvicted: []uint64{3}, wantOrder: []uint64{4, 1, 2}},
				{put: []uint64{5, 6}, wantEvicted: []uint64{2, 1}, wantOrder: []uint64{5, 6, 4}},
			},
		},
		{
			name: "match touches prefix only",
			cap:  4,
			steps: []op{
				{put: []uint64{1, 2}, wantOrder: []uint64{1, 2}},
				{put: []uint64{3, 4}, wantOrder: []uint64{3, 4, 1, 2}},
				{match: []uint64{1, 2, 9, 3}, wantMatch: 2, wantOrder: []uint64{1, 2, 3, 4}},
				{put: []uint64{5}, wantEvicted: []uint64{4}, wantOrder: []uint64{5, 1, 2, 3}},
			},
		},
		{
			name: "match miss at first block touches nothing",
			cap:  3,
			steps: []op{
				{put: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
				{match: []uint64{7, 3}, wantMatch: 0, wantOrder: []uint64{1, 2, 3}},
				{match: nil, wantMatch: 0, wantOrder: []uint64{1, 2, 3}},
			},
		},
		{
			name: "re-put touches without eviction",
			cap:  3,
			steps: []op{
				{put: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
				{put: []uint64{3}, wantOrder: []uint64{3, 1, 2}},
				{put: []uint64{2, 2}, wantOrder: []uint64{2, 3, 1}},
			},
		},
		{
			name: "one put larger than capacity keeps the chain head",
			cap:  2,
			steps: []op{
				{put: []uint64{1, 2, 3, 4}, wantEvicted: []uint64{4, 3}, wantOrder: []uint64{1, 2}},
			},
		},
		{
			name: "remove frees a slot",
			cap:  2,
			steps: []op{
				{put: []uint64{1, 2}, wantOrder: []uint64{1, 2}},
				{remove: 1, wantOrder: []uint64{2}},
				{put: []uint64{3}, wantOrder: []uint64{3, 2}},
				{put: []uint64{4}, wantEvicted: []uint64{2}, wantOrder: []uint64{4, 3}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewL1(int64(tt.cap)*100, 100)
			for i, s := range tt.steps {
				switch {
				case s.put != nil:
					ev := c.Put(hs(s.put...)...)
					if !slices.Equal(ev, hs(s.wantEvicted...)) {
						t.Fatalf("step %d: Put(%v) evicted %v, want %v", i, s.put, ev, s.wantEvicted)
					}
				case s.remove != 0:
					if !c.Remove(kv.BlockHash(s.remove)) {
						t.Fatalf("step %d: Remove(%d) found nothing", i, s.remove)
					}
				default:
					if got := c.MatchPrefix(hs(s.match...)); got != s.wantMatch {
						t.Fatalf("step %d: MatchPrefix(%v) = %d, want %d", i, s.match, got, s.wantMatch)
					}
				}
				if got := c.order(); !slices.Equal(got, hs(s.wantOrder...)) {
					t.Fatalf("step %d: order %v, want %v", i, got, s.wantOrder)
				}
				if c.Len() != len(s.wantOrder) {
					t.Fatalf("step %d: Len %d, want %d", i, c.Len(), len(s.wantOrder))
				}
				for _, h := range s.wantOrder {
					if !c.Contains(kv.BlockHash(h)) {
						t.Fatalf("step %d: Contains(%d) false", i, h)
					}
				}
			}
		})
	}
}

func TestL1ContainsDoesNotTouch(t *testing.T) {
	c := NewL1(200, 100)
	c.Put(hs(1, 2)...)
	if !c.Contains(2) || c.Contains(3) {
		t.Fatal("Contains wrong")
	}
	if ev := c.Put(3); !slices.Equal(ev, hs(2)) {
		t.Fatalf("evicted %v, want [2]: Contains must not refresh recency", ev)
	}
}

func TestL1Clear(t *testing.T) {
	c := NewL1(300, 100)
	c.Put(hs(1, 2, 3)...)
	c.Clear()
	if c.Len() != 0 || c.Contains(1) || c.MatchPrefix(hs(1)) != 0 {
		t.Fatal("Clear left blocks behind")
	}
	if ev := c.Put(hs(4, 5, 6)...); ev != nil {
		t.Fatalf("Put after Clear evicted %v", ev)
	}
	if ev := c.Put(7); !slices.Equal(ev, hs(6)) {
		t.Fatalf("evicted %v, want [6]", ev)
	}
}

// TestL1Concurrent checks that parallel users never break the capacity bound
// or the index/list agreement (run with -race for the data-race half).
func TestL1Concurrent(t *testing.T) {
	c := NewL1(64*100, 100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			chain := make([]kv.BlockHash, 16)
			for i := range 500 {
				for j := range chain {
					chain[j] = kv.BlockHash(uint64(g*1000+i%40)<<8 | uint64(j))
				}
				c.Put(chain...)
				c.MatchPrefix(chain)
				if i%50 == 0 {
					c.Remove(chain[3])
				}
			}
		})
	}
	wg.Wait()
	if c.Len() > c.CapacityBlocks() {
		t.Fatalf("Len %d above capacity %d", c.Len(), c.CapacityBlocks())
	}
	if got := len(c.order()); got != c.Len() {
		t.Fatalf("list has %d nodes, index %d", got, c.Len())
	}
}

func BenchmarkL1MatchPrefix(b *testing.B) {
	c := NewL1(1<<20*100, 100)
	chain := make([]kv.BlockHash, 64)
	for i := range chain {
		chain[i] = kv.BlockHash(i*7919 + 1)
	}
	c.Put(chain...)
	b.ReportAllocs()
	for b.Loop() {
		if c.MatchPrefix(chain) != len(chain) {
			b.Fatal("miss")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chain)), "ns/block")
}

func BenchmarkL1Put(b *testing.B) {
	// A full cache, so every Put evicts: the steady state of a busy node.
	const capBlocks = 1 << 16
	c := NewL1(capBlocks*100, 100)
	chain := make([]kv.BlockHash, 16)
	next := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		for j := range chain {
			chain[j] = kv.BlockHash(next)
			next++
		}
		c.Put(chain...)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chain)), "ns/block")
}
