package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/kv/events"
)

// loaded builds candidates a, b, c… with in-flight counts and engine stats.
func loaded(specs ...Candidate) []Candidate {
	for i := range specs {
		specs[i].Backend.ID = string(rune('a' + i))
	}
	return specs
}

func TestHealthyFilter(t *testing.T) {
	tests := []struct {
		name    string
		ejected []bool
		want    []string
	}{
		{name: "none ejected", ejected: []bool{false, false, false}, want: []string{"a", "b", "c"}},
		{name: "one ejected", ejected: []bool{false, true, false}, want: []string{"a", "c"}},
		{name: "all ejected fails open", ejected: []bool{true, true}, want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := make([]Candidate, len(tt.ejected))
			for i, e := range tt.ejected {
				cs[i].Ejected = e
			}
			got := ids((&healthy{}).Filter(context.Background(), &SchedRequest{}, loaded(cs...)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadGuardFilter(t *testing.T) {
	g := &loadGuard{maxImbalance: 4, maxWaiting: 10, maxKV: 0.9}
	tests := []struct {
		name string
		in   []Candidate
		want []string
	}{
		{name: "balanced keeps all", in: []Candidate{{InFlight: 1}, {InFlight: 3}, {InFlight: 5}}, want: []string{"a", "b", "c"}},
		{name: "imbalance drops the hot one", in: []Candidate{{InFlight: 1}, {InFlight: 9}, {InFlight: 2}}, want: []string{"a", "c"}},
		{name: "engine queue counts as load", in: []Candidate{{InFlight: 1, Stats: BackendStats{Waiting: 6}}, {InFlight: 1}}, want: []string{"b"}},
		{name: "long engine queue", in: []Candidate{{Stats: BackendStats{Waiting: 11}}, {InFlight: 8}}, want: []string{"b"}},
		{name: "full kv cache", in: []Candidate{{Stats: BackendStats{KVUsage: 0.95}}, {InFlight: 2}}, want: []string{"b"}},
		{name: "all overloaded keeps least loaded", in: []Candidate{{InFlight: 3, Stats: BackendStats{Waiting: 11}}, {InFlight: 2, Stats: BackendStats{Waiting: 13}}}, want: []string{"a"}},
		{name: "single candidate untouched", in: []Candidate{{Stats: BackendStats{KVUsage: 1}}}, want: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(g.Filter(context.Background(), &SchedRequest{}, loaded(tt.in...)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQueueAndKVUtilScorers(t *testing.T) {
	tests := []struct {
		name   string
		scorer Scorer
		in     []Candidate
		want   []float64
	}{
		{name: "queue spread", scorer: &queue{}, in: []Candidate{{InFlight: 0}, {InFlight: 2, Stats: BackendStats{Waiting: 2}}, {InFlight: 8}}, want: []float64{1, 0.5, 0}},
		{name: "queue equal", scorer: &queue{}, in: []Candidate{{InFlight: 3}, {Stats: BackendStats{Waiting: 3}}}, want: []float64{1, 1}},
		{name: "kv util", scorer: &kvUtil{}, in: []Candidate{{Stats: BackendStats{KVUsage: 0.25}}, {}, {Stats: BackendStats{KVUsage: 1.5}}}, want: []float64{0.75, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.scorer.Score(context.Background(), &SchedRequest{}, loaded(tt.in...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// chatBody is an OpenAI chat request body.
func chatBody(t testing.TB, user string, msgs ...string) []byte {
	t.Helper()
	type m struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var ms []m
	for i, c := range msgs {
		role := "user"
		if i == 0 {
			role = "system"
		}
		ms = append(ms, m{role, c})
	}
	b, err := json.Marshal(map[string]any{"messages": ms, "user": user})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func longText(seed string, words int) string {
	out := make([]byte, 0, words*8)
	for i := 0; i < words; i++ {
		out = append(out, seed...)
		out = append(out, byte('a'+i%26), ' ')
	}
	return string(out)
}

func TestPromptHashesMatchEngine(t *testing.T) {
	sys, q := longText("system", 200), longText("question", 50)
	tests := []struct {
		name   string
		body   []byte
		prompt string
	}{
		{name: "chat renders the template", body: chatBody(t, "", sys, q),
			prompt: kv.ChatPrompt([]kv.Message{{Role: "system", Content: sys}, {Role: "user", Content: q}})},
		{name: "completion prompt", body: []byte(`{"prompt":` + mustJSON(t, sys) + `}`), prompt: sys},
		{name: "prompt array of one", body: []byte(`{"prompt":[` + mustJSON(t, q) + `]}`), prompt: q},
		{name: "sagemaker inputs", body: []byte(`{"inputs":` + mustJSON(t, q) + `}`), prompt: q},
		{name: "not json", body: []byte(`nope`), prompt: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &SchedRequest{Endpoint: "ep", Model: "qwen3-32b", Body: tt.body}
			cands := []Candidate{{Stats: BackendStats{BlockSize: 16}}}
			got := req.BlockHashes(cands)
			var want []kv.BlockHash
			if tt.prompt != "" {
				want = kv.BlockHashes(kv.RootHash("qwen3-32b"), kv.Tokenize(tt.prompt), 16)
			}
			if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
				t.Fatalf("hashes differ from the engine's: got %d, want %d", len(got), len(want))
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPrefixScorer(t *testing.T) {
	shared := longText("shared", 300)
	tests := []struct {
		name  string
		steps []struct {
			body   []byte
			picked int // candidate index recorded after scoring
		}
		probe []byte
		want  func(s []float64) bool
	}{
		{name: "cold index scores zero", probe: chatBody(t, "", shared, "q1"),
			want: func(s []float64) bool { return s[0] == 0 && s[1] == 0 }},
		{name: "same prompt scores one on the picked backend", steps: []struct {
			body   []byte
			picked int
		}{{chatBody(t, "", shared, "q1"), 1}}, probe: chatBody(t, "", shared, "q1"),
			want: func(s []float64) bool { return s[0] == 0 && s[1] == 1 }},
		{name: "shared prefix scores a fraction", steps: []struct {
			body   []byte
			picked int
		}{{chatBody(t, "", shared, "q1"), 0}}, probe: chatBody(t, "", shared, longText("other", 300)),
			want: func(s []float64) bool { return s[0] > 0.3 && s[0] < 0.7 && s[1] == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &prefix{per: map[string]*blockLRU{}}
			cands := loaded(Candidate{}, Candidate{})
			for _, st := range tt.steps {
				req := &SchedRequest{Endpoint: "ep", Body: st.body}
				p.Score(context.Background(), req, cands)
				p.Picked(context.Background(), req, cands[st.picked])
			}
			s := p.Score(context.Background(), &SchedRequest{Endpoint: "ep", Body: tt.probe}, cands)
			if !tt.want(s) {
				t.Fatalf("scores %v", s)
			}
		})
	}
}

func TestBlockLRU(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		adds     [][]kv.BlockHash
		probe    []kv.BlockHash
		want     int
		wantLen  int
	}{
		{name: "holds within capacity", capacity: 10, adds: [][]kv.BlockHash{{1, 2, 3}}, probe: []kv.BlockHash{1, 2, 3, 4}, want: 3, wantLen: 3},
		{name: "evicts least recent, tails first", capacity: 4, adds: [][]kv.BlockHash{{1, 2, 3}, {7, 8, 9}}, probe: []kv.BlockHash{1, 2, 3}, want: 1, wantLen: 4},
		{name: "evicts whole old prompt", capacity: 3, adds: [][]kv.BlockHash{{1, 2, 3}, {7, 8, 9}}, probe: []kv.BlockHash{1, 2, 3}, want: 0, wantLen: 3},
		{name: "prefix outlives its tail", capacity: 4, adds: [][]kv.BlockHash{{1, 2, 3}, {1, 5, 6}}, probe: []kv.BlockHash{1, 5, 6}, want: 3, wantLen: 4},
		{name: "stops at first miss", capacity: 10, adds: [][]kv.BlockHash{{1, 3}}, probe: []kv.BlockHash{1, 2, 3}, want: 1, wantLen: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newBlockLRU(tt.capacity)
			for _, a := range tt.adds {
				l.add(a)
			}
			if got := l.leading(tt.probe); got != tt.want {
				t.Fatalf("leading = %d, want %d", got, tt.want)
			}
			if l.len() != tt.wantLen {
				t.Fatalf("len = %d, want %d", l.len(), tt.wantLen)
			}
		})
	}
}

func TestSessionScorer(t *testing.T) {
	hdr := func(s string) http.Header { h := http.Header{}; h.Set(SessionHeader, s); return h }
	pick := func(req *SchedRequest, cs []Candidate) string {
		s := (&session{}).Score(context.Background(), req, cs)
		for i, v := range s {
			if v == 1 {
				return cs[i].Backend.ID
			}
		}
		return ""
	}
	all := loaded(Candidate{}, Candidate{}, Candidate{}, Candidate{})
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{name: "no session scores nothing", check: func(t *testing.T) {
			if got := pick(&SchedRequest{}, all); got != "" {
				t.Fatalf("picked %s", got)
			}
		}},
		{name: "header is sticky", check: func(t *testing.T) {
			first := pick(&SchedRequest{Header: hdr("s1")}, all)
			for i := 0; i < 5; i++ {
				if got := pick(&SchedRequest{Header: hdr("s1")}, all); got != first {
					t.Fatalf("moved from %s to %s", first, got)
				}
			}
		}},
		{name: "user field is the fallback key", check: func(t *testing.T) {
			a := pick(&SchedRequest{Body: []byte(`{"user":"u7","prompt":"x"}`)}, all)
			b := pick(&SchedRequest{Header: hdr("u7")}, all)
			if a == "" || a != b {
				t.Fatalf("user %q vs header %q", a, b)
			}
		}},
		{name: "only a departed backend's sessions move", check: func(t *testing.T) {
			moved, kept := 0, 0
			for i := 0; i < 200; i++ {
				key := hdr(string(rune('A'+i%26)) + string(rune('a'+i/26)))
				before := pick(&SchedRequest{Header: key}, all)
				after := pick(&SchedRequest{Header: key}, all[1:]) // a left
				switch {
				case before == "a":
					moved++
					if after == "a" || after == "" {
						t.Fatalf("session stayed on the departed backend")
					}
				case before != after:
					t.Fatalf("session on %s moved to %s though %s stayed", before, after, before)
				default:
					kept++
				}
			}
			if moved == 0 || kept == 0 {
				t.Fatalf("moved %d kept %d: hashing is not spreading", moved, kept)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

func TestKVPreciseScorer(t *testing.T) {
	body := chatBody(t, "", longText("sys", 200), "q")
	req := &SchedRequest{Endpoint: "ep", Model: "m", Body: body}
	cands := loaded(Candidate{}, Candidate{}, Candidate{})
	hs := req.BlockHashes(cands)
	if len(hs) < 8 {
		t.Fatalf("only %d blocks", len(hs))
	}
	raw := func(h []kv.BlockHash) []uint64 {
		out := make([]uint64, len(h))
		for i, x := range h {
			out[i] = uint64(x)
		}
		return out
	}
	n := float64(len(hs))
	tests := []struct {
		name   string
		events map[string][]events.Event
		want   []float64
	}{
		{name: "empty index", want: []float64{0, 0, 0}},
		{name: "gpu full, cpu full, gpu half", events: map[string][]events.Event{
			"a": {events.BlockStored{BlockHashes: raw(hs), Medium: events.MediumGPU}},
			"b": {events.BlockStored{BlockHashes: raw(hs), Medium: events.MediumCPU}},
			"c": {events.BlockStored{BlockHashes: raw(hs[:4]), Medium: events.MediumGPU}},
		}, want: []float64{1, cpuTierWeight, 4 / n}},
		{name: "a hole stops the match", events: map[string][]events.Event{
			"a": {events.BlockStored{BlockHashes: raw(hs), Medium: events.MediumGPU}, events.BlockRemoved{BlockHashes: raw(hs[2:3]), Medium: events.MediumGPU}},
		}, want: []float64{2 / n, 0, 0}},
		{name: "removal from one tier keeps the other", events: map[string][]events.Event{
			"a": {events.BlockStored{BlockHashes: raw(hs), Medium: events.MediumGPU}, events.BlockStored{BlockHashes: raw(hs), Medium: events.MediumCPU},
				events.BlockRemoved{BlockHashes: raw(hs), Medium: events.MediumGPU}},
		}, want: []float64{cpuTierWeight, 0, 0}},
		{name: "cleared", events: map[string][]events.Event{
			"a": {events.BlockStored{BlockHashes: raw(hs), Medium: events.MediumGPU}, events.AllBlocksCleared{}},
		}, want: []float64{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := newKVIndex(nil)
			for b, evs := range tt.events {
				idx.Apply(b, events.Batch{Events: evs})
			}
			got := (&kvPrecise{idx: idx}).Score(context.Background(), &SchedRequest{Endpoint: "ep", Model: "m", Body: body}, cands)
			for i := range got {
				if d := got[i] - tt.want[i]; d > 1e-9 || d < -1e-9 {
					t.Fatalf("scores %v, want %v", got, tt.want)
				}
			}
		})
	}
}
