package sagemaker

import (
	"crypto/sha256"
	"sync"
)

// maxIdempotencyRecords bounds the ClientTokens remembered; the oldest goes
// first. AWS SDKs fill ClientToken on every call, so the set turns over
// with traffic rather than growing.
const maxIdempotencyRecords = 1024

// idempotency remembers the answer to each ClientToken of an operation, so
// a retried call (same token, same request) gets the first call's answer
// instead of acting twice. It lives in memory: a restarted server forgets
// the tokens it saw.
type idempotency struct {
	mu    sync.Mutex
	byKey map[string]idempotent
	order []string
}

type idempotent struct {
	request [sha256.Size]byte
	answer  any
}

// answered returns the answer a call with this token already got; mismatch
// is true when the token was used with a different request.
func (m *idempotency) answered(key string, body []byte) (answer any, mismatch, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, found := m.byKey[key]
	if !found {
		return nil, false, false
	}
	if r.request != sha256.Sum256(body) {
		return nil, true, false
	}
	return r.answer, false, true
}

func (m *idempotency) remember(key string, body []byte, answer any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byKey == nil {
		m.byKey = map[string]idempotent{}
	}
	if _, found := m.byKey[key]; !found {
		m.order = append(m.order, key)
	}
	m.byKey[key] = idempotent{request: sha256.Sum256(body), answer: answer}
	for len(m.order) > maxIdempotencyRecords {
		delete(m.byKey, m.order[0])
		m.order = m.order[1:]
	}
}
