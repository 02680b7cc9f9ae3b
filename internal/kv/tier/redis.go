package tier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capstan-dev/capstan/internal/kv"
)

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("tier: store closed")

// MaxNamespaceLen bounds the namespace so keys stay small and a mistaken
// caller cannot build unbounded keys.
const MaxNamespaceLen = 256

// keyPrefix starts every L2 key in Redis.
const keyPrefix = "capstan:kv:"

// Redis implements L2 on a real Redis server. Each block is one string key
// "capstan:kv:<namespace>:<hash as 16 hex digits>" with value "1".
// MatchPrefix and Put each cost exactly one round trip. Safe for concurrent
// use.
type Redis struct {
	client *redis.Client
	prefix string // keyPrefix + namespace + ":"
	ttl    time.Duration
}

// NewRedis connects to the Redis at url (redis://[user:pass@]host:port/db)
// and pings it, so a wrong or unreachable URL fails here with a clear error
// rather than on the first request. namespace isolates models (the engine
// passes the model id); ttl > 0 sets that expiry on written keys and refreshes
// it on every hit, ttl = 0 writes keys without expiry and relies on Redis
// maxmemory eviction.
func NewRedis(ctx context.Context, url, namespace string, ttl time.Duration) (*Redis, error) {
	if namespace == "" || len(namespace) > MaxNamespaceLen {
		return nil, fmt.Errorf("tier: redis namespace must be 1..%d bytes, got %d", MaxNamespaceLen, len(namespace))
	}
	if ttl < 0 {
		return nil, fmt.Errorf("tier: redis ttl must not be negative, got %s", ttl)
	}
	if ttl > 0 && ttl < time.Millisecond {
		return nil, fmt.Errorf("tier: redis ttl must be at least 1ms, got %s", ttl)
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("tier: bad redis url %q: %w", url, err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("tier: redis at %s unreachable: %w", opts.Addr, err)
	}
	return &Redis{client: client, prefix: keyPrefix + namespace + ":", ttl: ttl}, nil
}

// Key returns the Redis key that records block h.
func (r *Redis) Key(h kv.BlockHash) string {
	var b strings.Builder
	b.Grow(len(r.prefix) + 16)
	b.WriteString(r.prefix)
	hex := strconv.FormatUint(uint64(h), 16)
	for range 16 - len(hex) {
		b.WriteByte('0')
	}
	b.WriteString(hex)
	return b.String()
}

// MatchPrefix implements L2 with one MGET (no TTL) or one pipeline of GETEX
// that also refreshes the expiry of the blocks it finds (TTL set).
func (r *Redis) MatchPrefix(ctx context.Context, hashes []kv.BlockHash) (int, error) {
	if len(hashes) == 0 {
		return 0, nil
	}
	keys := make([]string, len(hashes))
	for i, h := range hashes {
		keys[i] = r.Key(h)
	}
	if r.ttl == 0 {
		vals, err := r.client.MGet(ctx, keys...).Result()
		if err != nil {
			return 0, r.wrap("match", err)
		}
		n := 0
		for _, v := range vals {
			if v == nil {
				break
			}
			n++
		}
		return n, nil
	}
	pipe := r.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.GetEx(ctx, k, r.ttl)
	}
	// A missing key makes Exec report redis.Nil; per-command results say which.
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, r.wrap("match", err)
	}
	n := 0
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			if errors.Is(err, redis.Nil) {
				break
			}
			return 0, r.wrap("match", err)
		}
		n++
	}
	return n, nil
}

// Put implements L2 with one pipeline of SET commands.
func (r *Redis) Put(ctx context.Context, hashes []kv.BlockHash) error {
	if len(hashes) == 0 {
		return nil
	}
	pipe := r.client.Pipeline()
	for _, h := range hashes {
		pipe.Set(ctx, r.Key(h), "1", r.ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return r.wrap("put", err)
	}
	return nil
}

// Close releases the connection pool.
func (r *Redis) Close() error { return r.client.Close() }

func (r *Redis) wrap(op string, err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("tier: redis %s: %w", op, ErrClosed)
	}
	return fmt.Errorf("tier: redis %s: %w", op, err)
}
