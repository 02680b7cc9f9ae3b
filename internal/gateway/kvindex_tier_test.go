package gateway

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/events"
)

// tierFixture is four candidates: a and b on node n1, c on n2, d on no
// known node; and a prompt of at least 8 blocks.
type tierFixture struct {
	body  []byte
	cands []Candidate
	hs    []kv.BlockHash
	nodes map[string]string
}

func newTierFixture(t testing.TB) tierFixture {
	t.Helper()
	f := tierFixture{body: chatBody(t, "", longText("sys", 200), "q"), nodes: map[string]string{"a": "n1", "b": "n1", "c": "n2", "d": ""}}
	f.cands = loaded(Candidate{}, Candidate{}, Candidate{}, Candidate{})
	for i := range f.cands {
		f.cands[i].Backend.Node = f.nodes[f.cands[i].Backend.ID]
	}
	f.hs = f.req().BlockHashes(f.cands)
	if len(f.hs) < 8 {
		t.Fatalf("only %d blocks", len(f.hs))
	}
	return f
}

func (f tierFixture) req() *SchedRequest {
	return &SchedRequest{Endpoint: "ep", Model: "m", Body: f.body}
}

// raw returns the prompt's block hashes [from, to) as event payload.
func (f tierFixture) raw(from, to int) []uint64 {
	out := make([]uint64, 0, to-from)
	for _, h := range f.hs[from:to] {
		out = append(out, uint64(h))
	}
	return out
}

// scores runs the kv-cache-precise scorer over the four candidates.
func (f tierFixture) scores(idx *kvIndex) []float64 {
	return (&kvPrecise{idx: idx}).Score(context.Background(), f.req(), f.cands)
}

type fromBackend struct {
	backend string
	ev      events.Event
}

func stored(medium string, hs []uint64) events.Event {
	return events.BlockStored{BlockHashes: hs, Medium: medium, BlockSize: 16}
}

func removed(medium string, hs []uint64) events.Event {
	return events.BlockRemoved{BlockHashes: hs, Medium: medium}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestKVPreciseTiers(t *testing.T) {
	f := newTierFixture(t)
	n := len(f.hs)
	all := f.raw(0, n)
	const g, c, d, r = gpuTierWeight, cpuTierWeight, diskTierWeight, remoteTierWeight
	N := float64(n)
	tests := []struct {
		name   string
		events []fromBackend
		want   []float64 // a, b (node n1), c (n2), d (no node)
	}{
		{name: "own GPU counts for its replica only",
			events: []fromBackend{{"a", stored(events.MediumGPU, all)}},
			want:   []float64{g, 0, 0, 0}},
		{name: "own CPU counts for its replica only",
			events: []fromBackend{{"c", stored(events.MediumCPU, all)}},
			want:   []float64{0, 0, c, 0}},
		{name: "DISK stored by a counts for b on its node, not for c on another",
			events: []fromBackend{{"a", stored(events.MediumDisk, all)}},
			want:   []float64{d, d, 0, 0}},
		{name: "DISK of a replica on no known node counts for it alone",
			events: []fromBackend{{"d", stored(events.MediumDisk, all)}},
			want:   []float64{0, 0, 0, d}},
		{name: "REMOTE counts for every replica",
			events: []fromBackend{{"c", stored(events.MediumRemote, all)}},
			want:   []float64{r, r, r, r}},
		{name: "each replica takes the best tier it reaches",
			events: []fromBackend{
				{"a", stored(events.MediumCPU, all)},
				{"b", stored(events.MediumDisk, all)},
				{"d", stored(events.MediumRemote, all)},
				{"a", stored(events.MediumGPU, f.raw(0, 2))},
			},
			want: []float64{(2*g + (N-2)*c) / N, d, r, r}},
		{name: "a mixed chain stops at the first block a replica cannot reach",
			events: []fromBackend{
				{"a", stored(events.MediumGPU, f.raw(0, 2))},
				{"b", stored(events.MediumDisk, f.raw(2, 5))},
				{"c", stored(events.MediumRemote, f.raw(0, 2))},
				{"c", stored(events.MediumRemote, f.raw(5, 7))},
				// block 7 is nowhere; 8.. are on a's GPU but past the gap
				{"a", stored(events.MediumGPU, f.raw(8, n))},
			},
			want: []float64{(2*g + 3*d + 2*r) / N, (2*r + 3*d + 2*r) / N, 2 * r / N, 2 * r / N}},
		{name: "a node's DISK fills a gap in REMOTE for that node only",
			events: []fromBackend{
				{"c", stored(events.MediumRemote, f.raw(0, 3))},
				{"c", stored(events.MediumRemote, f.raw(4, n))},
				{"a", stored(events.MediumDisk, f.raw(3, 4))},
			},
			want: []float64{((N-1)*r + d) / N, ((N-1)*r + d) / N, 3 * r / N, 3 * r / N}},
		{name: "a DISK removal by any replica of the node removes it for the node",
			events: []fromBackend{
				{"a", stored(events.MediumDisk, all)},
				{"b", removed(events.MediumDisk, f.raw(1, 2))},
			},
			want: []float64{d / N, d / N, 0, 0}},
		{name: "a DISK removal on another node leaves this node's",
			events: []fromBackend{
				{"a", stored(events.MediumDisk, all)},
				{"c", stored(events.MediumDisk, all)},
				{"c", removed(events.MediumDisk, all)},
			},
			want: []float64{d, d, 0, 0}},
		{name: "a GPU removal leaves the node's DISK copy",
			events: []fromBackend{
				{"a", stored(events.MediumGPU, all)},
				{"a", stored(events.MediumDisk, all)},
				{"a", removed(events.MediumGPU, all)},
			},
			want: []float64{d, d, 0, 0}},
		{name: "a DISK removal leaves the replica's own GPU copy",
			events: []fromBackend{
				{"a", stored(events.MediumGPU, all)},
				{"a", stored(events.MediumDisk, all)},
				{"a", removed(events.MediumDisk, all)},
			},
			want: []float64{g, 0, 0, 0}},
		{name: "AllBlocksCleared empties the replica's own tiers, not the node's store or Redis",
			events: []fromBackend{
				{"a", stored(events.MediumGPU, all)},
				{"a", stored(events.MediumCPU, all)},
				{"a", stored(events.MediumDisk, f.raw(0, 4))},
				{"a", stored(events.MediumRemote, f.raw(4, n))},
				{"a", events.AllBlocksCleared{}},
			},
			want: []float64{(4*d + (N-4)*r) / N, (4*d + (N-4)*r) / N, 0, 0}},
		{name: "a REMOTE removal from any replica removes it for all",
			events: []fromBackend{
				{"c", stored(events.MediumRemote, all)},
				{"a", removed(events.MediumRemote, f.raw(0, 1))},
			},
			want: []float64{0, 0, 0, 0}},
		{name: "DISK events of a backend no route knows are ignored",
			events: []fromBackend{{"gone", stored(events.MediumDisk, all)}},
			want:   []float64{0, 0, 0, 0}},
		{name: "pointer events count the same",
			events: []fromBackend{
				{"a", &events.BlockStored{BlockHashes: all, Medium: events.MediumDisk}},
				{"a", &events.BlockRemoved{BlockHashes: f.raw(n-1, n), Medium: events.MediumDisk}},
			},
			want: []float64{(N - 1) * d / N, (N - 1) * d / N, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := newKVIndex(nil)
			idx.SetNodes(f.nodes)
			for _, e := range tt.events {
				idx.Apply(e.backend, events.Batch{Events: []events.Event{e.ev}})
			}
			got := f.scores(idx)
			for i := range got {
				if !near(got[i], tt.want[i]) {
					t.Fatalf("scores (a, b, c, d) %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestKVClearKeepsSharedTiers: a gap the follower cannot repair, or the
// backend leaving, clears its own tiers only.
func TestKVClearKeepsSharedTiers(t *testing.T) {
	f := newTierFixture(t)
	idx := newKVIndex(nil)
	idx.SetNodes(f.nodes)
	all := f.raw(0, len(f.hs))
	idx.Apply("a", events.Batch{Events: []events.Event{stored(events.MediumGPU, all), stored(events.MediumDisk, f.raw(0, 1)), stored(events.MediumRemote, f.raw(1, 2))}})
	idx.Clear("a")
	N := float64(len(f.hs))
	want := (diskTierWeight + remoteTierWeight) / N
	if got := f.scores(idx); !near(got[0], want) || !near(got[1], want) || !near(got[2], 0) {
		t.Fatalf("scores after Clear %v, want a = b = %v, c = 0", got, want)
	}
	if idx.Len("a") != 0 {
		t.Fatalf("a still holds %d blocks of its own", idx.Len("a"))
	}
}

// TestKVPickedStaysGPU: a pick adds the prompt to the chosen backend's own
// GPU only; the node's DISK set and the others' scores do not change.
func TestKVPickedStaysGPU(t *testing.T) {
	f := newTierFixture(t)
	idx := newKVIndex(nil)
	idx.SetNodes(f.nodes)
	n := len(f.hs)
	idx.Apply("a", events.Batch{Events: []events.Event{stored(events.MediumDisk, f.raw(0, 3))}})
	req := f.req()
	(&kvPrecise{idx: idx}).Picked(context.Background(), req, f.cands[1]) // b
	if req.predictedBlocks != 3 {
		t.Errorf("predicted %d blocks, want the 3 b reaches on its node's disk", req.predictedBlocks)
	}
	for i, h := range f.hs {
		if got := idx.Tiers("b", h); got != tierGPU {
			t.Fatalf("block %d on b: tiers %b, want GPU only", i, got)
		}
		if got := idx.Tiers("a", h); got != 0 {
			t.Fatalf("block %d on a: tiers %b, want none of its own", i, got)
		}
	}
	got := f.scores(idx)
	want := []float64{3 * diskTierWeight / float64(n), 1, 0, 0}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Fatalf("scores after picking b %v, want %v", got, want)
		}
	}
}

// TestKVRemoteExpires: Redis evicts silently, so a REMOTE entry counts only
// for remoteTTL after its last store or routed read.
func TestKVRemoteExpires(t *testing.T) {
	f := newTierFixture(t)
	all := f.raw(0, len(f.hs))
	tests := []struct {
		name  string
		steps func(t *testing.T, idx *kvIndex, clk *clock.Fake)
		want  float64 // a's score at the end
	}{
		{name: "counts just before the TTL", want: remoteTierWeight, steps: func(t *testing.T, idx *kvIndex, clk *clock.Fake) {
			clk.Step(remoteTTL - time.Second)
		}},
		{name: "gone at the TTL", want: 0, steps: func(t *testing.T, idx *kvIndex, clk *clock.Fake) {
			clk.Step(remoteTTL)
		}},
		{name: "a new store restarts the TTL", want: remoteTierWeight, steps: func(t *testing.T, idx *kvIndex, clk *clock.Fake) {
			clk.Step(remoteTTL - time.Second)
			idx.Apply("c", events.Batch{Events: []events.Event{stored(events.MediumRemote, all)}})
			clk.Step(remoteTTL - time.Second)
		}},
		{name: "a routed read restarts the TTL", want: remoteTierWeight, steps: func(t *testing.T, idx *kvIndex, clk *clock.Fake) {
			clk.Step(remoteTTL - time.Second)
			(&kvPrecise{idx: idx}).Picked(context.Background(), f.req(), f.cands[2]) // c reads it all from Redis
			clk.Step(2 * time.Second)
		}},
		{name: "blocks a pick finds on its own GPU are not read, so not refreshed", want: 0, steps: func(t *testing.T, idx *kvIndex, clk *clock.Fake) {
			idx.Apply("c", events.Batch{Events: []events.Event{stored(events.MediumGPU, f.raw(0, 1))}})
			clk.Step(remoteTTL - time.Second)
			(&kvPrecise{idx: idx}).Picked(context.Background(), f.req(), f.cands[2])
			clk.Step(2 * time.Second)
			if n := idx.remote.len(); n != len(f.hs) {
				t.Fatalf("%d REMOTE entries, want all %d (swept only on a batch)", n, len(f.hs))
			}
			idx.Apply("c", events.Batch{})
			if n := idx.remote.len(); n != len(f.hs)-1 {
				t.Fatalf("%d REMOTE entries left, want the %d the pick read", n, len(f.hs)-1)
			}
		}},
		{name: "expired entries are swept on the next batch", want: 0, steps: func(t *testing.T, idx *kvIndex, clk *clock.Fake) {
			clk.Step(remoteTTL)
			idx.Apply("c", events.Batch{})
			if l := idx.remote.len(); l != 0 {
				t.Fatalf("%d expired entries left", l)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
			idx := newKVIndex(clk)
			idx.SetNodes(f.nodes)
			idx.Apply("c", events.Batch{Events: []events.Event{stored(events.MediumRemote, all)}})
			tt.steps(t, idx, clk)
			if got := f.scores(idx)[0]; !near(got, tt.want) {
				t.Fatalf("a scores %v, want %v", got, tt.want)
			}
		})
	}
}

// TestKVSetNodes: the node map comes from the routes; a node no routed
// backend runs on any more has its DISK set dropped.
func TestKVSetNodes(t *testing.T) {
	f := newTierFixture(t)
	all := f.raw(0, len(f.hs))
	idx := newKVIndex(nil)
	idx.SetNodes(f.nodes)
	idx.Apply("c", events.Batch{Events: []events.Event{stored(events.MediumDisk, all)}})
	idx.Apply("d", events.Batch{Events: []events.Event{stored(events.MediumDisk, all)}})
	idx.Apply("a", events.Batch{Events: []events.Event{stored(events.MediumDisk, all)}})
	// c and d leave; a moves nowhere, b stays.
	idx.SetNodes(map[string]string{"a": "n1", "b": "n1"})
	if _, ok := idx.disk["n2"]; ok {
		t.Error("n2's DISK set survived its last backend")
	}
	if _, ok := idx.disk[diskKey("d", "")]; ok {
		t.Error("d's own DISK set survived d")
	}
	if got := f.scores(idx); !near(got[1], diskTierWeight) {
		t.Errorf("b scores %v, want n1's DISK set kept", got[1])
	}
	// A replica that comes back to n2 starts from nothing there.
	idx.SetNodes(f.nodes)
	if got := f.scores(idx); !near(got[2], 0) {
		t.Errorf("c scores %v after n2's set was dropped, want 0", got[2])
	}
}

// TestGatewaySetRouteFeedsNodes: SetRoute and DeleteRoute keep the index's
// backend → node map.
func TestGatewaySetRouteFeedsNodes(t *testing.T) {
	f := newTierFixture(t)
	g := New(Options{})
	var bs []Backend
	for _, c := range f.cands {
		bs = append(bs, Backend{ID: c.Backend.ID, Addr: "127.0.0.1:1", Node: c.Backend.Node})
	}
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "v", Weight: 1, Backends: bs}}})
	g.kvIndex.Apply("a", events.Batch{Events: []events.Event{stored(events.MediumDisk, f.raw(0, len(f.hs)))}})
	if got := f.scores(g.kvIndex); !near(got[1], diskTierWeight) || !near(got[2], 0) {
		t.Fatalf("scores %v: want b to share a's node store and c not", got)
	}
	g.DeleteRoute("ep")
	g.kvIndex.Apply("a", events.Batch{Events: []events.Event{stored(events.MediumDisk, f.raw(0, len(f.hs)))}})
	if got := f.scores(g.kvIndex); !near(got[1], 0) {
		t.Fatalf("scores %v after the route left: want n1's store forgotten", got)
	}
}

func TestSharedSetBound(t *testing.T) {
	type op struct {
		kind string // put, touch, del
		h    kv.BlockHash
	}
	tests := []struct {
		name string
		ops  []op
		want []kv.BlockHash // present, most recent first
	}{
		{name: "the least recent goes beyond the bound",
			ops: []op{{"put", 1}, {"put", 2}, {"put", 3}, {"put", 4}}, want: []kv.BlockHash{4, 3, 2}},
		{name: "a re-store makes an entry recent",
			ops: []op{{"put", 1}, {"put", 2}, {"put", 3}, {"put", 1}, {"put", 4}}, want: []kv.BlockHash{4, 1, 3}},
		{name: "a read makes an entry recent",
			ops: []op{{"put", 1}, {"put", 2}, {"put", 3}, {"touch", 1}, {"put", 4}}, want: []kv.BlockHash{4, 1, 3}},
		{name: "a read of an absent entry adds nothing",
			ops: []op{{"put", 1}, {"touch", 9}}, want: []kv.BlockHash{1}},
		{name: "delete head, middle and tail",
			ops: []op{{"put", 1}, {"put", 2}, {"put", 3}, {"del", 3}, {"del", 1}, {"put", 4}, {"put", 5}, {"del", 4}}, want: []kv.BlockHash{5, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSharedSet(3, 0)
			for i, o := range tt.ops {
				switch o.kind {
				case "put":
					s.put(o.h, int64(i))
				case "touch":
					s.touch(o.h, int64(i))
				case "del":
					s.del(o.h)
				}
			}
			var got []kv.BlockHash
			for e := s.head; e != nil; e = e.next {
				got = append(got, e.h)
			}
			var back []kv.BlockHash
			for e := s.tail; e != nil; e = e.prev {
				back = append([]kv.BlockHash{e.h}, back...)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || fmt.Sprint(back) != fmt.Sprint(tt.want) || s.len() != len(tt.want) {
				t.Fatalf("order %v (backwards %v, len %d), want %v", got, back, s.len(), tt.want)
			}
		})
	}
}

// TestKVIndexConcurrent runs events, scoring, picks and route changes at
// once (for -race).
func TestKVIndexConcurrent(t *testing.T) {
	f := newTierFixture(t)
	idx := newKVIndex(nil)
	idx.SetNodes(f.nodes)
	k := &kvPrecise{idx: idx}
	media := []string{events.MediumGPU, events.MediumCPU, events.MediumDisk, events.MediumRemote}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			b := f.cands[w].Backend.ID
			for i := range 200 {
				m := media[(i+w)%len(media)]
				idx.Apply(b, events.Batch{Events: []events.Event{stored(m, f.raw(0, len(f.hs))), removed(m, f.raw(i%len(f.hs), i%len(f.hs)+1))}})
				for j, sc := range k.Score(context.Background(), f.req(), f.cands) {
					// A score is the tier-weighted share of the prompt's
					// blocks: never outside [0, 1], whatever runs beside it.
					if sc < 0 || sc > 1 {
						t.Errorf("worker %d step %d: candidate %d scored %v", w, i, j, sc)
						return
					}
				}
				k.Picked(context.Background(), f.req(), f.cands[(i+w)%len(f.cands)])
				if i%50 == 0 {
					idx.SetNodes(f.nodes)
					idx.Clear(b)
				}
			}
		})
	}
	wg.Wait()

	// After the storm the index still answers as one that never saw it:
	// its backends cleared and the shared tiers' blocks removed (Clear
	// keeps those: the node's store and Redis still hold them), then given
	// the same events as a fresh index, it scores the same.
	n := len(f.hs)
	for _, c := range f.cands {
		idx.Clear(c.Backend.ID)
		idx.Apply(c.Backend.ID, events.Batch{Events: []events.Event{removed(events.MediumDisk, f.raw(0, n)), removed(events.MediumRemote, f.raw(0, n))}})
	}
	fresh := newKVIndex(nil)
	fresh.SetNodes(f.nodes)
	for _, x := range []*kvIndex{idx, fresh} {
		x.Apply("a", events.Batch{Events: []events.Event{stored(events.MediumGPU, f.raw(0, n/2))}})
		x.Apply("c", events.Batch{Events: []events.Event{stored(events.MediumDisk, f.raw(0, n))}})
	}
	got, want := f.scores(idx), f.scores(fresh)
	if !slices.Equal(got, want) {
		t.Fatalf("after concurrent use: scores %v, a fresh index with the same events scores %v", got, want)
	}
	if want[0] <= 0 || want[2] <= 0 {
		t.Fatalf("the replayed events scored nothing: %v", want)
	}
}

// BenchmarkKVPreciseScore scores a prompt whose blocks are spread over every
// tier (own GPU on one replica, a node's DISK, REMOTE).
func BenchmarkKVPreciseScore(b *testing.B) {
	f := newTierFixture(b)
	idx := newKVIndex(nil)
	idx.SetNodes(f.nodes)
	n := len(f.hs)
	idx.Apply("a", events.Batch{Events: []events.Event{stored(events.MediumGPU, f.raw(0, n/3)), stored(events.MediumDisk, f.raw(0, 2*n/3))}})
	idx.Apply("c", events.Batch{Events: []events.Event{stored(events.MediumRemote, f.raw(0, n))}})
	k := &kvPrecise{idx: idx}
	req := f.req()
	req.BlockHashes(f.cands) // hashed once per request, as in a pick
	b.ReportAllocs()
	for b.Loop() {
		k.Score(context.Background(), req, f.cands)
	}
}
