package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Key names one resource: its kind (bucket) and name.
type Key struct {
	Kind string
	Name string
}

// Store is the embedded database. It is safe for concurrent use.
type Store struct {
	db *bolt.DB

	mu       sync.Mutex
	watchers map[int]chan Key
	nextID   int

	hooksMu  sync.RWMutex
	onDelete map[string][]func(tx *Tx, name string) error
}

// Open opens (or creates) the database file at path, creating parent dirs.
// A second process opening the same file waits up to timeout for the lock and
// then fails, so two servers never share one data dir.
func Open(path string, timeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: create dir: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return &Store{db: db, watchers: map[int]chan Key{}, onDelete: map[string][]func(*Tx, string) error{}}, nil
}

// Close closes the database and every watch channel.
func (s *Store) Close() error {
	s.mu.Lock()
	for id, ch := range s.watchers {
		close(ch)
		delete(s.watchers, id)
	}
	s.mu.Unlock()
	return s.db.Close()
}

// Tx is one transaction. Values are JSON.
type Tx struct {
	btx     *bolt.Tx
	changed []Key
	s       *Store
}

// Get decodes the value of kind/name into v; found is false if absent.
func (tx *Tx) Get(kind, name string, v any) (found bool, err error) {
	b := tx.btx.Bucket([]byte(kind))
	if b == nil {
		return false, nil
	}
	raw := b.Get([]byte(name))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("store: decode %s/%s: %w", kind, name, err)
	}
	return true, nil
}

// Exists reports whether kind/name is present.
func (tx *Tx) Exists(kind, name string) bool {
	b := tx.btx.Bucket([]byte(kind))
	return b != nil && b.Get([]byte(name)) != nil
}

// Put stores v (as JSON) under kind/name.
func (tx *Tx) Put(kind, name string, v any) error {
	if !tx.btx.Writable() {
		return errors.New("store: Put in a read-only transaction")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %s/%s: %w", kind, name, err)
	}
	b, err := tx.btx.CreateBucketIfNotExists([]byte(kind))
	if err != nil {
		return fmt.Errorf("store: bucket %s: %w", kind, err)
	}
	if err := b.Put([]byte(name), raw); err != nil {
		return fmt.Errorf("store: put %s/%s: %w", kind, name, err)
	}
	tx.changed = append(tx.changed, Key{kind, name})
	return nil
}

// Delete removes kind/name; deleting an absent key is not an error.
// Deleting a present key runs the OnDelete hooks of kind in this
// transaction; an error from one aborts it.
func (tx *Tx) Delete(kind, name string) error {
	b := tx.btx.Bucket([]byte(kind))
	if b == nil {
		return nil
	}
	present := b.Get([]byte(name)) != nil
	if err := b.Delete([]byte(name)); err != nil {
		return fmt.Errorf("store: delete %s/%s: %w", kind, name, err)
	}
	tx.changed = append(tx.changed, Key{kind, name})
	if !present || tx.s == nil {
		return nil
	}
	tx.s.hooksMu.RLock()
	hooks := tx.s.onDelete[kind]
	tx.s.hooksMu.RUnlock()
	for _, fn := range hooks {
		if err := fn(tx, name); err != nil {
			return fmt.Errorf("store: delete %s/%s: %w", kind, name, err)
		}
	}
	return nil
}

// OnDelete has fn run inside every transaction that deletes a present key
// of kind, right after the delete, so that what belongs to a record (its
// tags, say) goes in the same commit as the record. fn's error aborts the
// transaction. The store still knows nothing about what the records mean:
// the packages that own them register the hooks, at wiring time.
func (s *Store) OnDelete(kind string, fn func(tx *Tx, name string) error) {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	s.onDelete[kind] = append(slices.Clip(s.onDelete[kind]), fn)
}

// Each calls fn for every value of kind, in name order; fn decodes raw itself.
func (tx *Tx) Each(kind string, fn func(name string, raw []byte) error) error {
	b := tx.btx.Bucket([]byte(kind))
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error { return fn(string(k), v) })
}

// List decodes every value of kind into a fresh T, in name order.
func List[T any](tx *Tx, kind string) ([]T, error) {
	var out []T
	err := tx.Each(kind, func(name string, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("store: decode %s/%s: %w", kind, name, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// View runs fn in a read-only transaction.
func (s *Store) View(fn func(tx *Tx) error) error {
	return s.db.View(func(btx *bolt.Tx) error { return fn(&Tx{btx: btx, s: s}) })
}

// Update runs fn in a read-write transaction. If fn returns an error nothing is
// written; otherwise the transaction is committed and fsynced before Update
// returns, and watchers then hear about every key fn wrote or deleted. A
// transaction that wrote nothing is rolled back instead: idempotent writers
// (an unchanged re-apply, a steady controller) then cost no disk sync.
func (s *Store) Update(fn func(tx *Tx) error) error {
	btx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			_ = btx.Rollback() // fn failed, panicked or wrote nothing
		}
	}()
	tx := &Tx{btx: btx, s: s}
	if err := fn(tx); err != nil {
		return err
	}
	if len(tx.changed) == 0 {
		return nil // the deferred rollback ends it
	}
	committed = true
	if err := btx.Commit(); err != nil {
		return err
	}
	s.notify(tx.changed)
	return nil
}

func (s *Store) notify(keys []Key) {
	if len(keys) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.watchers {
		for _, k := range keys {
			select {
			case ch <- k:
			default:
				// A slow watcher loses events rather than stalling writers;
				// controllers also resync on a ticker, so nothing is lost for good.
			}
		}
	}
}

// Watch returns a channel of changed keys until ctx is done.
func (s *Store) Watch(ctx context.Context) <-chan Key {
	ch := make(chan Key, 1024)
	s.mu.Lock()
	id := s.nextID
	s.nextID++
	s.watchers[id] = ch
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		if _, ok := s.watchers[id]; ok {
			delete(s.watchers, id)
			close(ch)
		}
		s.mu.Unlock()
	}()
	return ch
}
