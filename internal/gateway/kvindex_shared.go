package gateway

import (
	"time"

	"github.com/capstan-dev/capstan/internal/kv"
)

// Bounds of the shared-tier sets of the KV index.
const (
	// maxPerNode bounds one node's DISK (tieredstorage) set. A model's
	// default budget on a node is at most 100Gi; at 16 tokens a block that is
	// ≈ 51,000 blocks of Llama-3.1-8B (2 MiB each) and ≈ 546,000 of
	// Qwen2.5-0.5B (192 KiB), so 2^19 covers a full store of all but the
	// smallest models while holding one node's set to ≈ 50 MB.
	maxPerNode = 1 << 19
	// maxRemote bounds the REMOTE (Redis) set, shared by every route.
	maxRemote = 1 << 20
	// remoteTTL is how long a REMOTE entry is believed after its last store
	// or routed read. Redis evicts (maxmemory, allkeys-lru) without telling
	// anyone, so the index cannot see a block leave; expiring entries bounds
	// how stale that over-estimate can get.
	remoteTTL = 10 * time.Minute
)

// sharedSet is a bounded set of block hashes in a tier shared by several
// backends (a node's tieredstorage, or Redis), least recently stored or
// read first out. Each entry carries the time of that last store or read,
// so entries older than a TTL can be treated as gone. Not safe for
// concurrent use: kvIndex's lock guards it.
type sharedSet struct {
	m          map[kv.BlockHash]*sharedEntry
	head, tail *sharedEntry // head: most recent
	max        int
	ttl        time.Duration // 0: entries never expire
}

type sharedEntry struct {
	h          kv.BlockHash
	at         int64 // unix nanoseconds of the last store or read
	prev, next *sharedEntry
}

func newSharedSet(max int, ttl time.Duration) *sharedSet {
	return &sharedSet{m: map[kv.BlockHash]*sharedEntry{}, max: max, ttl: ttl}
}

func (s *sharedSet) len() int { return len(s.m) }

// has reports whether h is in the set and not expired at now.
func (s *sharedSet) has(h kv.BlockHash, now int64) bool {
	e := s.m[h]
	return e != nil && !s.expired(e, now)
}

func (s *sharedSet) expired(e *sharedEntry, now int64) bool {
	return s.ttl > 0 && now-e.at >= int64(s.ttl)
}

// put adds h, or refreshes it, as the most recent entry, evicting the
// least recent beyond the bound.
func (s *sharedSet) put(h kv.BlockHash, now int64) {
	if e := s.m[h]; e != nil {
		e.at = now
		s.unlink(e)
		s.pushFront(e)
		return
	}
	e := &sharedEntry{h: h, at: now}
	s.m[h] = e
	s.pushFront(e)
	for len(s.m) > s.max && s.tail != nil {
		s.del(s.tail.h)
	}
}

// touch refreshes h if it is present and not expired (a routed read of it).
func (s *sharedSet) touch(h kv.BlockHash, now int64) {
	if s.has(h, now) {
		s.put(h, now)
	}
}

func (s *sharedSet) del(h kv.BlockHash) {
	if e := s.m[h]; e != nil {
		s.unlink(e)
		delete(s.m, h)
	}
}

// expire drops the expired entries; they sit at the tail, since every
// store or read moves an entry to the head with the newest time.
func (s *sharedSet) expire(now int64) {
	for s.tail != nil && s.expired(s.tail, now) {
		s.del(s.tail.h)
	}
}

func (s *sharedSet) pushFront(e *sharedEntry) {
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

func (s *sharedSet) unlink(e *sharedEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}
