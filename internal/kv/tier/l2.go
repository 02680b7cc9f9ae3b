package tier

import (
	"context"
	"sync"

	"github.com/capstan-dev/capstan/internal/kv"
)

// L2 is a shared block store that replicas on different nodes read and write.
//
// Error contract: a non-nil error means the store could not be asked (network,
// server, closed store); callers treat it as a miss and carry on serving from
// lower tiers, since L2 is an optimisation, never a source of truth.
type L2 interface {
	// MatchPrefix returns how many leading hashes the store holds.
	MatchPrefix(ctx context.Context, hashes []kv.BlockHash) (int, error)
	// Put records the blocks (idempotent).
	Put(ctx context.Context, hashes []kv.BlockHash) error
	Close() error
}

var (
	_ L2 = (*Redis)(nil)
	_ L2 = (*MemoryL2)(nil)
)

// MemoryL2 is a hand-written in-memory L2 for other packages' tests: it
// records calls, lets a test inject errors, and is safe for concurrent use.
// Several engines in one test share blocks by sharing one *MemoryL2.
type MemoryL2 struct {
	mu       sync.Mutex
	blocks   map[kv.BlockHash]struct{}
	err      error
	closed   bool
	matches  int
	puts     int
	putBlock int
}

// NewMemoryL2 returns an empty in-memory L2.
func NewMemoryL2() *MemoryL2 {
	return &MemoryL2{blocks: make(map[kv.BlockHash]struct{})}
}

// SetError makes every later call fail with err (nil restores normal
// operation).
func (m *MemoryL2) SetError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// MatchPrefix implements L2.
func (m *MemoryL2) MatchPrefix(ctx context.Context, hashes []kv.BlockHash) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.matches++
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	for _, h := range hashes {
		if _, ok := m.blocks[h]; !ok {
			break
		}
		n++
	}
	return n, nil
}

// Put implements L2.
func (m *MemoryL2) Put(ctx context.Context, hashes []kv.BlockHash) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	if err := m.check(ctx); err != nil {
		return err
	}
	for _, h := range hashes {
		m.blocks[h] = struct{}{}
	}
	m.putBlock += len(hashes)
	return nil
}

// Close implements L2; later calls fail with ErrClosed.
func (m *MemoryL2) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Contains reports whether h was stored.
func (m *MemoryL2) Contains(h kv.BlockHash) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.blocks[h]
	return ok
}

// Len is the number of distinct blocks stored.
func (m *MemoryL2) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.blocks)
}

// MemoryL2Calls counts the calls a MemoryL2 received.
type MemoryL2Calls struct {
	MatchPrefix int // MatchPrefix calls, failed ones included
	Put         int // Put calls, failed ones included
	PutBlocks   int // hashes passed to successful Put calls
}

// Calls returns the call counters.
func (m *MemoryL2) Calls() MemoryL2Calls {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MemoryL2Calls{MatchPrefix: m.matches, Put: m.puts, PutBlocks: m.putBlock}
}

// check returns the error a call must fail with, if any. Caller holds mu.
func (m *MemoryL2) check(ctx context.Context) error {
	switch {
	case m.closed:
		return ErrClosed
	case m.err != nil:
		return m.err
	default:
		return ctx.Err()
	}
}
