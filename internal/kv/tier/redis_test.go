package tier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capstan-dev/capstan/internal/kv"
	"github.com/capstan-dev/capstan/internal/testutil"
)

func newRedis(t *testing.T, url, ns string, ttl time.Duration) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := NewRedis(ctx, url, ns, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestRedisL2(t *testing.T) {
	url := testutil.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Two clients, as two replicas on different nodes would have.
	a := newRedis(t, url, "llama-3.1-8b", 0)
	b := newRedis(t, url, "llama-3.1-8b", 0)
	other := newRedis(t, url, "qwen3-32b", 0)

	chain := hs(11, 22, 33, 44)
	steps := []struct {
		name      string
		put       *Redis
		putHashes []kv.BlockHash
		ask       *Redis
		query     []kv.BlockHash
		want      int
	}{
		{name: "empty store misses", ask: a, query: chain, want: 0},
		{name: "writer sees own blocks", put: a, putHashes: chain[:3], ask: a, query: chain, want: 3},
		{name: "second client sees first client's blocks", ask: b, query: chain, want: 3},
		{name: "prefix stops at first hole", put: b, putHashes: chain[3:], ask: b, query: hs(11, 99, 33, 44), want: 1},
		{name: "full chain after second writer", ask: a, query: chain, want: 4},
		{name: "put is idempotent", put: a, putHashes: chain, ask: b, query: chain, want: 4},
		{name: "other namespace is isolated", ask: other, query: chain, want: 0},
		{name: "empty query", ask: a, query: nil, want: 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.put != nil {
				if err := s.put.Put(ctx, s.putHashes); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.ask.MatchPrefix(ctx, s.query)
			if err != nil {
				t.Fatal(err)
			}
			if got != s.want {
				t.Fatalf("MatchPrefix = %d, want %d", got, s.want)
			}
		})
	}

	t.Run("key layout", func(t *testing.T) {
		raw, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(raw)
		defer c.Close()
		keys, err := c.Keys(ctx, "capstan:kv:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("capstan:kv:llama-3.1-8b:%016x", uint64(11))
		if a.Key(11) != want {
			t.Fatalf("Key(11) = %q, want %q", a.Key(11), want)
		}
		found := false
		for _, k := range keys {
			found = found || k == want
		}
		if !found || len(keys) != 4 {
			t.Fatalf("keys %v, want 4 keys including %q", keys, want)
		}
		if ttl := c.TTL(ctx, want).Val(); ttl != -1 {
			t.Fatalf("ttl=0 store wrote key with TTL %v", ttl)
		}
	})

	t.Run("use after close", func(t *testing.T) {
		c := newRedis(t, url, "closing", 0)
		_ = c.Close()
		if _, err := c.MatchPrefix(ctx, chain); !errors.Is(err, ErrClosed) {
			t.Fatalf("MatchPrefix after Close: %v, want ErrClosed", err)
		}
		if err := c.Put(ctx, chain); !errors.Is(err, ErrClosed) {
			t.Fatalf("Put after Close: %v, want ErrClosed", err)
		}
	})
}

func TestRedisTTL(t *testing.T) {
	url := testutil.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRedis(t, url, "m", time.Hour)
	if err := r.Put(ctx, hs(1, 2)); err != nil {
		t.Fatal(err)
	}
	raw, _ := redis.ParseURL(url)
	c := redis.NewClient(raw)
	defer c.Close()
	// Shorten the expiry by hand; a hit must refresh it to the store's TTL.
	if err := c.Expire(ctx, r.Key(1), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := r.MatchPrefix(ctx, hs(1, 2, 3)); err != nil || n != 2 {
		t.Fatalf("MatchPrefix = %d, %v; want 2", n, err)
	}
	for _, h := range hs(1, 2) {
		ttl := c.TTL(ctx, r.Key(h)).Val()
		if ttl <= 30*time.Minute || ttl > time.Hour {
			t.Fatalf("key %d TTL %v, want close to 1h", h, ttl)
		}
	}
	if c.Exists(ctx, r.Key(3)).Val() != 0 {
		t.Fatal("MatchPrefix created a key for a miss")
	}
}

func TestNewRedisErrors(t *testing.T) {
	dead := fmt.Sprintf("redis://127.0.0.1:%d/0", testutil.FreePort(t))
	tests := []struct {
		name, url, ns string
		ttl           time.Duration
		want          string
	}{
		{"unreachable", dead, "m", 0, "unreachable"},
		{"bad scheme", "http://127.0.0.1:1/0", "m", 0, "bad redis url"},
		{"empty namespace", dead, "", 0, "namespace"},
		{"long namespace", dead, strings.Repeat("x", MaxNamespaceLen+1), 0, "namespace"},
		{"negative ttl", dead, "m", -time.Second, "ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := NewRedis(ctx, tt.url, tt.ns, tt.ttl)
			if err == nil {
				_ = r.Close()
				t.Fatal("NewRedis succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// tripCounter is a go-redis hook counting network round trips: one per
// single command, one per pipeline.
type tripCounter struct {
	mu           sync.Mutex
	single, pipe int
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			c.mu.Lock()
			c.single++
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds[0]) {
			c.mu.Lock()
			c.pipe++
			c.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// handshake reports commands go-redis sends itself when it opens a pooled
// connection; they are not the store's round trips.
func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "ping":
		return true
	}
	return false
}

func (c *tripCounter) take() (single, pipe int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	single, pipe = c.single, c.pipe
	c.single, c.pipe = 0, 0
	return single, pipe
}

func TestRedisRoundTrips(t *testing.T) {
	url := testutil.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	chain := make([]kv.BlockHash, 64)
	for i := range chain {
		chain[i] = kv.BlockHash(i + 1)
	}
	tests := []struct {
		name string
		ttl  time.Duration
	}{
		{"no ttl", 0},
		{"ttl", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRedis(t, url, "trips-"+tt.name, tt.ttl)
			trips := &tripCounter{}
			r.client.AddHook(trips)
			if err := r.Put(ctx, chain[:40]); err != nil {
				t.Fatal(err)
			}
			if s, p := trips.take(); s+p != 1 {
				t.Fatalf("Put of 40 blocks took %d single + %d pipelined round trips, want 1", s, p)
			}
			n, err := r.MatchPrefix(ctx, chain)
			if err != nil || n != 40 {
				t.Fatalf("MatchPrefix = %d, %v; want 40", n, err)
			}
			if s, p := trips.take(); s+p != 1 {
				t.Fatalf("MatchPrefix of 64 blocks took %d single + %d pipelined round trips, want 1", s, p)
			}
		})
	}
}
