package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/events"
)

func TestScrapeOnceAndHealth(t *testing.T) {
	metrics, _ := os.ReadFile("testdata/sim-metrics.txt")
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			_, _ = w.Write(metrics)
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"served","root":"qwen3-32b"}]}`))
		case "/health":
			if !healthy {
				w.WriteHeader(503)
			}
		}
	}))
	defer srv.Close()
	g := New(Options{Seed: 1})
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "A", Weight: 1, Backends: []Backend{{ID: "b1", Addr: strings.TrimPrefix(srv.URL, "http://")}}}}})
	tests := []struct {
		name        string
		healthy     bool
		wantEjected bool
	}{
		{name: "healthy backend is scraped", healthy: true},
		{name: "failed probe ejects", healthy: false, wantEjected: true},
		{name: "passing probe readmits", healthy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			healthy = tt.healthy
			g.ScrapeOnce(context.Background())
			c := g.candidates([]Backend{{ID: "b1"}})[0]
			if c.Ejected != tt.wantEjected {
				t.Fatalf("ejected = %v", c.Ejected)
			}
			if c.Stats.Waiting != 3 || c.Stats.NumGPUBlocks != 18692 || c.Stats.ModelRoot != "qwen3-32b" {
				t.Fatalf("stats %+v", c.Stats)
			}
		})
	}
}

func TestPassiveEjection(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	g := New(Options{Seed: 1, Clock: clk, EjectAfter: 3, EjectFor: 10 * time.Second})
	ejected := func() bool { _, e := g.tracker.snapshot("x", clk.Now()); return e }
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{name: "two failures keep it", do: func() { g.failed("x"); g.failed("x") }, want: false},
		{name: "a success resets the count", do: func() { g.tracker.succeeded("x"); g.failed("x"); g.failed("x") }, want: false},
		{name: "third consecutive failure ejects", do: func() { g.failed("x") }, want: true},
		{name: "still out before the cooldown", do: func() { clk.Step(9 * time.Second) }, want: true},
		{name: "back after the cooldown", do: func() { clk.Step(2 * time.Second) }, want: false},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			if got := ejected(); got != s.want {
				t.Fatalf("ejected = %v, want %v", got, s.want)
			}
		})
	}
}

// TestFollowerGaps feeds recorded event batches, with a gap in sequence
// numbers, through the follower and checks the index.
func TestFollowerGaps(t *testing.T) {
	stored := func(medium string, hs ...uint64) events.Batch {
		return events.Batch{Events: []events.Event{events.BlockStored{BlockHashes: hs, Medium: medium, BlockSize: 16}}}
	}
	removed := func(hs ...uint64) events.Batch {
		return events.Batch{Events: []events.Event{events.BlockRemoved{BlockHashes: hs, Medium: events.MediumGPU}}}
	}
	// What the publisher sent, by sequence number.
	log := map[uint64]events.Batch{
		0: stored(events.MediumGPU, 1, 2, 3),
		1: stored(events.MediumCPU, 4),
		2: removed(1), // lost on the wire in the gap cases
		3: stored(events.MediumGPU, 5),
	}
	replayOK := func(_ context.Context, _ string, from uint64) ([]events.Message, error) {
		var out []events.Message
		for s := from; s < 4; s++ {
			out = append(out, events.Message{Seq: s, Batch: log[s]})
		}
		return out, nil
	}
	replayFail := func(context.Context, string, uint64) ([]events.Message, error) {
		return nil, errors.New("replay socket down")
	}
	tests := []struct {
		name     string
		seqs     []uint64
		replayEP string
		replay   replayFunc
		want     map[uint64]uint8 // hash → tiers on backend "e"
		outcome  string
	}{
		{name: "in order", seqs: []uint64{0, 1, 2, 3},
			want: map[uint64]uint8{1: 0, 2: tierGPU, 3: tierGPU, 4: tierCPU, 5: tierGPU}},
		{name: "gap filled by replay", seqs: []uint64{0, 1, 3}, replayEP: "tcp://x:1", replay: replayOK, outcome: "replayed",
			want: map[uint64]uint8{1: 0, 2: tierGPU, 3: tierGPU, 4: tierCPU, 5: tierGPU}},
		{name: "gap without replay clears", seqs: []uint64{0, 1, 3}, outcome: "cleared",
			want: map[uint64]uint8{1: 0, 2: 0, 3: 0, 4: 0, 5: tierGPU}},
		{name: "failed replay clears", seqs: []uint64{0, 1, 3}, replayEP: "tcp://x:1", replay: replayFail, outcome: "cleared",
			want: map[uint64]uint8{1: 0, 2: 0, 4: 0, 5: tierGPU}},
		{name: "joining mid-stream without replay starts clean", seqs: []uint64{2, 3}, outcome: "cleared",
			want: map[uint64]uint8{1: 0, 2: 0, 5: tierGPU}},
		{name: "joining mid-stream replays from 0", seqs: []uint64{2, 3}, replayEP: "tcp://x:1", replay: replayOK, outcome: "replayed",
			want: map[uint64]uint8{1: 0, 2: tierGPU, 3: tierGPU, 4: tierCPU, 5: tierGPU}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := newKVIndex(nil)
			idx.Apply("e", stored(events.MediumGPU, 1)) // stale entry from before
			var outcome string
			f := &follower{backend: "e", replayEP: tt.replayEP, idx: idx, replay: tt.replay, gaps: func(o string) { outcome = o }}
			var prev uint64
			for i, s := range tt.seqs {
				gap := (i == 0 && s != 0) || (i > 0 && s != prev+1)
				f.handle(context.Background(), events.Message{Seq: s, Batch: log[s], Gap: gap})
				prev = s
			}
			for h, want := range tt.want {
				if got := idx.Tiers("e", kvHash(h)); got != want {
					t.Errorf("hash %d: tiers %b, want %b", h, got, want)
				}
			}
			if outcome != tt.outcome {
				t.Errorf("gap outcome %q, want %q", outcome, tt.outcome)
			}
		})
	}
}

func kvHash(h uint64) kv.BlockHash { return kv.BlockHash(h) }
