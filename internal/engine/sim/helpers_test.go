package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
)

// prompt builds a text of exactly n tokens (each piece " ddd" is 4 bytes = 1
// token); tag makes prompts differ from their first token.
func prompt(tag string, n int) string {
	var b strings.Builder
	b.WriteString((tag + "xxxx")[:4]) // first token: the tag
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, " %03d", i%1000)
	}
	return b.String()
}

func testOptions() Options {
	return Options{Model: "llama-3.1-8b", GPU: "h100", TimeScale: 0}
}

func newTestEngine(t testing.TB, o Options, d Deps) *Engine {
	t.Helper()
	e, err := NewEngine(o, d)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func submit(t testing.TB, e *Engine, text string, maxTokens int, ignoreEOS bool) *seq {
	t.Helper()
	r := request{prompt: kv.Tokenize(text), maxTokens: maxTokens, ignoreEOS: ignoreEOS, seed: 7, arrival: e.clk.Now()}
	e.prepare(context.Background(), &r)
	s, err := e.Submit(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *seq) isDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *seq) outLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.out)
}

// drive runs steps until every seq is done, failing after limit steps.
func drive(t testing.TB, e *Engine, limit int, seqs ...*seq) int {
	t.Helper()
	for i := 0; i < limit; i++ {
		all := true
		for _, s := range seqs {
			if !s.isDone() {
				all = false
			}
		}
		if all {
			return i
		}
		e.RunStep()
	}
	t.Fatalf("requests not done after %d steps", limit)
	return 0
}

// ttft steps until s has its first token and returns the simulated TTFT.
func ttft(t testing.TB, e *Engine, s *seq) float64 {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if s.outLen() > 0 || s.isDone() {
			return (e.simNow - s.arrivalSim).Seconds()
		}
		e.RunStep()
	}
	t.Fatal("no first token")
	return 0
}

// fakeSink records published event batches.
type fakeSink struct {
	mu      sync.Mutex
	batches []EventBatch
}

var _ EventSink = (*fakeSink)(nil)

func (f *fakeSink) Publish(b EventBatch) {
	f.mu.Lock()
	f.batches = append(f.batches, b)
	f.mu.Unlock()
}

func (f *fakeSink) events() []KVEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []KVEvent
	for _, b := range f.batches {
		out = append(out, b.Events...)
	}
	return out
}
