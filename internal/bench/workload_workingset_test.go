package bench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
)

// visits replays tickets [0, n) of a working-set workload and returns, per
// document (identified by its prefix text), the tickets that sent it.
func visits(t *testing.T, w Workload, n int) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for ticket := range n {
		it := w.Job(ticket).Items[0]
		if len(it.Messages) != 2 || it.Messages[0].Role != "system" || it.Messages[1].Role != "user" {
			t.Fatalf("ticket %d: messages %+v, want system document + user question", ticket, it.Messages)
		}
		if it.Prompt != it.Messages[0].Content+it.Messages[1].Content {
			t.Fatalf("ticket %d: completions prompt is not document + question", ticket)
		}
		out[it.Messages[0].Content] = append(out[it.Messages[0].Content], ticket)
	}
	return out
}

func TestWorkingSetLengths(t *testing.T) {
	w := mustWorkload(t, "working-set:docs=5,prefix=300,suffix=20,output=7,revisits=2", 1)
	for ticket := range 15 {
		it := w.Job(ticket).Items[0]
		if got := kv.CountTokens(it.Messages[0].Content); got != 300 {
			t.Fatalf("ticket %d: document %d tokens, want 300", ticket, got)
		}
		if got := kv.CountTokens(it.Prompt); got != 320 {
			t.Fatalf("ticket %d: prompt %d tokens, want 320", ticket, got)
		}
		if it.OutputTokens != 7 {
			t.Fatalf("ticket %d: output %d, want 7", ticket, it.OutputTokens)
		}
	}
}

// Every document is visited once per round, revisits+1 times in all, and two
// visits of one document are at least gap other requests apart — including
// across round boundaries, which is where a shuffle alone would fail.
func TestWorkingSetRevisitOrder(t *testing.T) {
	tests := []struct {
		spec           string
		docs, revisits int
		gap            int
	}{
		{"working-set:docs=40,prefix=8,suffix=2,revisits=5", 40, 5, 20}, // default gap docs/2
		{"working-set:docs=41,prefix=8,suffix=2,revisits=4", 41, 4, 20},
		{"working-set:docs=40,prefix=8,suffix=2,revisits=3,gap=7", 40, 3, 7},
		{"working-set:docs=2,prefix=8,suffix=2,revisits=9", 2, 9, 1},
		{"working-set:docs=1,prefix=8,suffix=2,revisits=3", 1, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			for seed := range uint64(20) {
				w := mustWorkload(t, tt.spec, seed)
				total := tt.docs * (tt.revisits + 1)
				got := visits(t, w, total)
				if len(got) != tt.docs {
					t.Fatalf("seed %d: %d distinct documents, want %d", seed, len(got), tt.docs)
				}
				minGap := total
				for _, ts := range got {
					if len(ts) != tt.revisits+1 {
						t.Fatalf("seed %d: a document visited %d times, want %d", seed, len(ts), tt.revisits+1)
					}
					for i, tk := range ts {
						if tk/tt.docs != i {
							t.Fatalf("seed %d: visit %d of a document in round %d", seed, i, tk/tt.docs)
						}
						if i > 0 {
							minGap = min(minGap, tk-ts[i-1]-1)
						}
					}
				}
				if minGap < tt.gap {
					t.Fatalf("seed %d: two visits only %d requests apart, want ≥ %d", seed, minGap, tt.gap)
				}
			}
		})
	}
}

// The order is random within the gap rule: over seeds, the documents at the
// end of one round do not keep coming first in the next, and rounds differ.
func TestWorkingSetRoundsAreShuffled(t *testing.T) {
	w := mustWorkload(t, "working-set:docs=30,prefix=4,suffix=1,revisits=3", 5).(*workingSetWorkload)
	for r := 1; r < len(w.rounds); r++ {
		if reflect.DeepEqual(w.rounds[r], w.rounds[r-1]) {
			t.Fatalf("round %d repeats round %d", r, r-1)
		}
	}
	// With the default gap (15), each round's tail half must land in the
	// next round's tail half, but in any order: position sets move.
	if reflect.DeepEqual(w.rounds[1][15:], w.rounds[0][15:]) {
		t.Fatal("tail half kept its order from round 0 to round 1")
	}
}

func TestWorkingSetIsSeeded(t *testing.T) {
	spec := "working-set:docs=12,prefix=50,suffix=5,revisits=2"
	a, b, c := mustWorkload(t, spec, 42), mustWorkload(t, spec, 42), mustWorkload(t, spec, 43)
	same := true
	for ticket := range 36 {
		if !reflect.DeepEqual(a.Job(ticket), b.Job(ticket)) {
			t.Fatalf("ticket %d differs between two builds with the same seed", ticket)
		}
		same = same && reflect.DeepEqual(a.Job(ticket), c.Job(ticket))
	}
	if same {
		t.Fatal("seeds 42 and 43 give the same jobs")
	}
}

// from=R starts at round R: a warm-up run of the first round and a measured
// run with from=1 together send exactly the from=0 sequence, and the
// sequence wraps to round from after the last round.
func TestWorkingSetFrom(t *testing.T) {
	all := mustWorkload(t, "working-set:docs=6,prefix=10,suffix=3,revisits=2", 7)
	later := mustWorkload(t, "working-set:docs=6,prefix=10,suffix=3,revisits=2,from=1", 7)
	for ticket := range 12 {
		if !reflect.DeepEqual(all.Job(6+ticket), later.Job(ticket)) {
			t.Fatalf("from=1 ticket %d is not ticket %d of the whole sequence", ticket, 6+ticket)
		}
	}
	if !reflect.DeepEqual(later.Job(12), later.Job(0)) {
		t.Fatal("from=1 does not wrap to round 1 after the last round")
	}
	if !reflect.DeepEqual(all.Job(18), all.Job(0)) {
		t.Fatal("the sequence does not repeat after the last round")
	}
}

func TestWorkingSetSizedByCapacity(t *testing.T) {
	tests := []struct {
		spec     string
		wantDocs string
	}{
		// ⌈4 × 10000 ÷ 1000⌉ = 40
		{"working-set:capacity=10000,prefix=1000", "40"},
		// ⌈3.5 × 84000 ÷ 4096⌉ = ⌈71.78⌉ = 72
		{"working-set:capacity=84000,fill=3.5,prefix=4096", "72"},
		{"working-set:capacity=10,fill=0.5,prefix=1000", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			p := mustWorkload(t, tt.spec, 1).Params()
			if p["docs"] != tt.wantDocs {
				t.Fatalf("docs = %s, want %s (params %v)", p["docs"], tt.wantDocs, p)
			}
		})
	}
	p := mustWorkload(t, "working-set:docs=10,prefix=100", 1).Params()
	if p["working_set_tokens"] != "1000" || p["gap"] != "5" {
		t.Fatalf("params %v: want working_set_tokens 1000, gap 5", p)
	}
}

func TestWorkingSetSpecErrors(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"unknown key", "working-set:doc=5", "unknown parameter(s) doc"},
		{"zero docs", "working-set:docs=0", "docs: want an integer in [1, 1000000]"},
		{"zero revisits", "working-set:revisits=0", "revisits: want an integer in [1, 1000]"},
		{"zero suffix", "working-set:suffix=0", "suffix: want an integer in [1, "},
		{"huge prefix", "working-set:prefix=99999999", "prefix: want an integer"},
		{"gap too large", "working-set:docs=10,gap=6", "gap: want an integer in [0, docs/2 = 5], got 6"},
		{"negative gap", "working-set:gap=-1", "gap: want an integer in [0, "},
		{"from past last round", "working-set:revisits=2,from=3", "from: want a round in [0, revisits=2], got 3"},
		{"docs and capacity", "working-set:docs=5,capacity=1000", "docs and capacity are exclusive"},
		{"fill without capacity", "working-set:fill=3", "fill needs capacity"},
		{"bad fill", "working-set:capacity=1000,fill=0", "fill: want a number in [0.001, 1000]"},
		{"capacity makes too many docs", "working-set:capacity=1000000000,prefix=1", "exceeds 1000000; raise prefix"},
		{"too many visits", "working-set:docs=1000000,revisits=10", "docs × (revisits+1) = 11000000 exceeds 10000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := ParseWorkloadSpec(tt.spec)
			if err == nil {
				_, err = NewWorkload(spec, 1)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}
