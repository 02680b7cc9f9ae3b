package gateway

import (
	"context"
	"net/http"
	"testing"

	"github.com/capstan-dev/capstan/internal/kv/events"
)

// TestKVAwareProfile checks the kvaware strategy as a whole (filters and
// weighted scorers), in particular how the session id places a new session.
func TestKVAwareProfile(t *testing.T) {
	reg := NewRegistry()
	p, ok := reg.profile("kvaware")
	if !ok {
		t.Fatal("no kvaware profile")
	}
	body := chatBody(t, "", longText("sys", 200), "q")
	hashBackend := func(sessionID string, cs []Candidate) string {
		s := (&session{}).Score(context.Background(), &SchedRequest{Header: http.Header{SessionHeader: {sessionID}}}, cs)
		for i, v := range s {
			if v == 1 {
				return cs[i].Backend.ID
			}
		}
		return ""
	}
	// Find a session id whose hash backend is "b", so the cases below can
	// put load on it.
	three := loaded(Candidate{}, Candidate{}, Candidate{})
	sid := ""
	for i := 0; sid == "" && i < 100; i++ {
		if k := "s" + string(rune('A'+i)); hashBackend(k, three) == "b" {
			sid = k
		}
	}
	if sid == "" {
		t.Fatal("no session id hashes to b")
	}
	tests := []struct {
		name    string
		session string
		inFl    []int
		cachedB string // backend whose index holds the prompt ("" none)
		want    string
	}{
		{name: "new session goes to its hash backend despite one more in flight", session: sid, inFl: []int{0, 1, 0}, want: "b"},
		{name: "no session id: least loaded", inFl: []int{1, 1, 0}, want: "c"},
		{name: "cache affinity beats the session hash", session: sid, inFl: []int{0, 0, 0}, cachedB: "c", want: "c"},
		{name: "load guard still diverts from an overloaded hash backend", session: sid, inFl: []int{0, loadGuardMaxImbalance + 1, 0}, want: "a|c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := newKVIndex(nil)
			s, err := reg.newScheduler(p, Deps{Rand: func() float64 { return 0 }, KV: idx})
			if err != nil {
				t.Fatal(err)
			}
			cs := loaded(Candidate{InFlight: tt.inFl[0]}, Candidate{InFlight: tt.inFl[1]}, Candidate{InFlight: tt.inFl[2]})
			req := &SchedRequest{Endpoint: "ep", Model: "m", Body: body, Header: http.Header{}, Tried: map[string]bool{}}
			if tt.session != "" {
				req.Header.Set(SessionHeader, tt.session)
			}
			if tt.cachedB != "" {
				probe := &SchedRequest{Endpoint: "ep", Model: "m", Body: body}
				hs := probe.BlockHashes(cs)
				raw := make([]uint64, len(hs))
				for i, h := range hs {
					raw[i] = uint64(h)
				}
				idx.Apply(tt.cachedB, events.Batch{Events: []events.Event{events.BlockStored{BlockHashes: raw, Medium: events.MediumGPU}}})
			}
			c, ok := s.pick(context.Background(), req, cs)
			if !ok {
				t.Fatal("no pick")
			}
			if got := c.Backend.ID; got != tt.want && !(tt.want == "a|c" && (got == "a" || got == "c")) {
				t.Fatalf("picked %s, want %s", got, tt.want)
			}
		})
	}
}
