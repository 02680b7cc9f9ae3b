package gateway

import (
	"context"

	"github.com/cespare/xxhash/v2"
)

const sessionName = "session-affinity"

// SessionHeader carries a session id; the OpenAI "user" field is used when
// it is absent.
const SessionHeader = "X-Session-Id"

// session keeps a session on one backend: rendezvous (highest random
// weight) hashing of the session key over the candidates, so the same
// session lands on the same backend while it stays, and when it leaves only
// its sessions move, spread evenly over the rest. Requests without a
// session score 0 everywhere and fall to the other scorers.
type session struct{}

var _ Scorer = (*session)(nil)

func newSession(Deps) (Plugin, error) { return &session{}, nil }

func (*session) Name() string { return sessionName }

func sessionKey(req *SchedRequest) string {
	if req.Header != nil {
		if s := req.Header.Get(SessionHeader); s != "" {
			return s
		}
	}
	return req.User()
}

func (*session) Score(_ context.Context, req *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	key := sessionKey(req)
	if key == "" || len(cands) == 0 {
		return scores
	}
	best, bestW := 0, uint64(0)
	for i, c := range cands {
		w := xxhash.Sum64String(key + "\x00" + c.Backend.ID)
		if i == 0 || w > bestW {
			best, bestW = i, w
		}
	}
	scores[best] = 1
	return scores
}
