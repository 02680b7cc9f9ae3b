package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
)

func mustWorkload(t *testing.T, spec string, seed uint64) Workload {
	t.Helper()
	s, err := ParseWorkloadSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorkload(s, seed)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestTextHasExactTokenCount(t *testing.T) {
	rng := rngFor(7, streamText, 0)
	for _, n := range []int{0, 1, 2, 15, 16, 17, 1000, 6000} {
		if got := kv.CountTokens(text(rng, n)); got != n {
			t.Errorf("text(%d) has %d tokens", n, got)
		}
	}
	for _, w := range words {
		if len(w) != 3 || kv.CountTokens(" "+w) != 1 {
			t.Errorf("word %q is not one token", w)
		}
	}
}

func TestWorkloadLengths(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		wantPrompt int // tokens of the completions prompt
		wantOut    int
	}{
		{"random fixed", "random:input=300,output=40", 300, 40},
		{"shared-prefix tiny", "shared-prefix:preset=tiny", 60 + 12, 10},
		{"shared-prefix explicit", "shared-prefix:groups=2,prompts=3,system=100,question=20,output=7", 120, 7},
		{"shared-prefix scaled", "shared-prefix:preset=inference-perf,scale=0.05", 300 + 60, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustWorkload(t, tt.spec, 1)
			for ticket := range 20 {
				it := w.Job(ticket).Items[0]
				if got := kv.CountTokens(it.Prompt); got != tt.wantPrompt {
					t.Fatalf("ticket %d: prompt %d tokens, want %d", ticket, got, tt.wantPrompt)
				}
				if it.OutputTokens != tt.wantOut {
					t.Fatalf("ticket %d: output %d, want %d", ticket, it.OutputTokens, tt.wantOut)
				}
				joined := ""
				for _, m := range it.Messages {
					joined += m.Content
				}
				if joined != it.Prompt {
					t.Fatalf("chat messages and prompt differ")
				}
			}
		})
	}
}

func TestRandomDistributions(t *testing.T) {
	w := mustWorkload(t, "random:input=1000,output=100,dist=uniform,spread=0.2", 3)
	lo, hi, distinct := 1<<30, 0, map[int]bool{}
	for ticket := range 500 {
		n := kv.CountTokens(w.Job(ticket).Items[0].Prompt)
		lo, hi = min(lo, n), max(hi, n)
		distinct[n] = true
	}
	if lo < 800 || hi > 1200 || len(distinct) < 100 {
		t.Fatalf("uniform ±20%% of 1000: got range [%d, %d] with %d distinct lengths", lo, hi, len(distinct))
	}
}

func TestSharedPrefixGroups(t *testing.T) {
	w := mustWorkload(t, "shared-prefix:groups=4,prompts=5,system=64,question=16,output=4", 9).(*sharedPrefixWorkload)
	seen := map[string]int{}
	prefixes := map[string]int{}
	for ticket := range 20 {
		it := w.Job(ticket).Items[0]
		seen[it.Prompt]++
		prefixes[it.Messages[0].Content]++
		if !strings.HasPrefix(it.Prompt, it.Messages[0].Content) {
			t.Fatal("prompt does not start with its group's system prompt")
		}
	}
	if len(seen) != 20 {
		t.Fatalf("first groups×prompts tickets should be 20 distinct prompts, got %d", len(seen))
	}
	if len(prefixes) != 4 {
		t.Fatalf("want 4 system prompts, got %d", len(prefixes))
	}
	for p, n := range prefixes {
		if n != 5 {
			t.Fatalf("system prompt %.10q used %d times, want 5", p, n)
		}
	}
	if w.Job(20).Items[0].Prompt != w.Job(0).Items[0].Prompt {
		t.Fatal("ticket 20 should repeat ticket 0")
	}
}

func TestMultiTurnGrowsContext(t *testing.T) {
	w := mustWorkload(t, "multi-turn:sessions=3,turns=4,system=50,question=10,output=5,think=2s", 1)
	job := w.Job(1)
	if len(job.Items) != 4 {
		t.Fatalf("want 4 turns, got %d", len(job.Items))
	}
	prev := ""
	for k, it := range job.Items {
		if it.SessionID == "" || it.SessionID != job.Items[0].SessionID {
			t.Fatalf("turn %d: session id %q", k, it.SessionID)
		}
		if len(it.Messages) != 2+2*k {
			t.Fatalf("turn %d: %d messages, want %d", k, len(it.Messages), 2+2*k)
		}
		// Each turn's chat prompt extends the previous one minus the trailing assistant cue.
		if k > 0 && !strings.HasPrefix(it.Prompt, strings.TrimSuffix(prev, "<|assistant|>\n")) {
			t.Fatalf("turn %d does not extend turn %d", k, k-1)
		}
		if (k == 0) != (it.ThinkTime == 0) {
			t.Fatalf("turn %d think time %v", k, it.ThinkTime)
		}
		prev = it.Prompt
	}
	if w.Job(0).Items[0].SessionID == w.Job(1).Items[0].SessionID {
		t.Fatal("different tickets share a session")
	}
}

func TestWorkloadIsSeeded(t *testing.T) {
	for _, spec := range []string{"random:dist=normal,spread=0.3", "shared-prefix:preset=tiny", "multi-turn:sessions=2,turns=2"} {
		t.Run(spec, func(t *testing.T) {
			a, b, c := mustWorkload(t, spec, 42), mustWorkload(t, spec, 42), mustWorkload(t, spec, 43)
			for ticket := range 10 {
				if !reflect.DeepEqual(a.Job(ticket), b.Job(ticket)) {
					t.Fatalf("ticket %d differs between two builds with the same seed", ticket)
				}
			}
			if reflect.DeepEqual(a.Job(0), c.Job(0)) {
				t.Fatal("seeds 42 and 43 give the same job")
			}
		})
	}
}

func TestWorkloadSpecErrors(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"unknown workload", "zipf", "unknown name"},
		{"unknown key", "random:inputs=5", "unknown parameter(s) inputs"},
		{"not key=value", "random:input", "not key=value"},
		{"bad number", "random:input=abc", "input: want an integer"},
		{"too long", "random:input=99999999", "input: want an integer"},
		{"bad dist", "random:dist=zipf", "dist: want fixed"},
		{"bad preset", "shared-prefix:preset=nope", "unknown preset"},
		{"duplicate", "random:input=1,input=2", "given twice"},
		{"bad think", "multi-turn:think=forever", "think: want a duration"},
		{"file without path", "file", "path is required"},
		{"file missing", "file:path=/nonexistent/x.jsonl", "no such file"},
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

func TestFileWorkloads(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "p.jsonl")
	os.WriteFile(jsonl, []byte(`{"prompt":"hello there world","output_tokens":5}
{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":3}

{"prompt":"x"}
`), 0o644)
	share := filepath.Join(dir, "sg.json")
	os.WriteFile(share, []byte(`[{"id":"a","conversations":[{"from":"human","value":"what is two plus two"},{"from":"gpt","value":"four, which is the sum"}]},
{"id":"b","conversations":[{"from":"human","value":"lonely"}]}]`), 0o644)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"prompt":"a","temperature":1}`+"\n"), 0o644)

	w := mustWorkload(t, "file:path="+jsonl+",output=9", 1)
	got := []Item{w.Job(0).Items[0], w.Job(1).Items[0], w.Job(2).Items[0], w.Job(3).Items[0]}
	if got[0].Prompt != "hello there world" || got[0].OutputTokens != 5 {
		t.Errorf("line 1: %+v", got[0])
	}
	if len(got[1].Messages) != 2 || got[1].OutputTokens != 3 || got[1].Prompt != kv.ChatPrompt(got[1].Messages) {
		t.Errorf("line 2: %+v", got[1])
	}
	if got[2].OutputTokens != 9 || got[3].Prompt != got[0].Prompt {
		t.Errorf("default output or cycling wrong: %+v %+v", got[2], got[3])
	}
	sg := mustWorkload(t, "file:path="+share, 1)
	it := sg.Job(0).Items[0]
	if it.Prompt != "what is two plus two" || it.OutputTokens != kv.CountTokens("four, which is the sum") {
		t.Errorf("sharegpt: %+v", it)
	}
	if sg.Job(1).Items[0].Prompt != it.Prompt {
		t.Error("conversation without a reply should be skipped")
	}
	spec, _ := ParseWorkloadSpec("file:path=" + bad)
	if _, err := NewWorkload(spec, 1); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("unknown field: got %v", err)
	}
}
