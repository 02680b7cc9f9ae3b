package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

type item struct {
	Name  string
	Count int
}

func open(t *testing.T) (*Store, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "capstan.db")
	s, err := Open(p, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

func TestPutGetDeleteAndReopen(t *testing.T) {
	s, p := open(t)
	if err := s.Update(func(tx *Tx) error { return tx.Put("items", "a", item{"a", 1}) }); err != nil {
		t.Fatal(err)
	}
	// A failed transaction writes nothing.
	boom := errors.New("boom")
	err := s.Update(func(tx *Tx) error {
		if err := tx.Put("items", "b", item{"b", 2}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	s.Close()
	s2, err := Open(p, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	err = s2.View(func(tx *Tx) error {
		var got item
		found, err := tx.Get("items", "a", &got)
		if err != nil || !found || got.Count != 1 {
			return fmt.Errorf("a: found=%v got=%+v err=%v", found, got, err)
		}
		if tx.Exists("items", "b") {
			return errors.New("b was written by a failed transaction")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Update(func(tx *Tx) error { return tx.Delete("items", "a") }); err != nil {
		t.Fatal(err)
	}
	_ = s2.View(func(tx *Tx) error {
		if tx.Exists("items", "a") {
			t.Error("a survived Delete")
		}
		return nil
	})
}

func TestConcurrentWritersDoNotLoseUpdates(t *testing.T) {
	s, _ := open(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := s.Update(func(tx *Tx) error {
					var it item
					if _, err := tx.Get("items", "counter", &it); err != nil {
						return err
					}
					it.Count++
					return tx.Put("items", "counter", it)
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	var it item
	_ = s.View(func(tx *Tx) error { _, err := tx.Get("items", "counter", &it); return err })
	if it.Count != writers*each {
		t.Fatalf("count = %d, want %d", it.Count, writers*each)
	}
}

func TestWatchAndList(t *testing.T) {
	s, _ := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Watch(ctx)
	for _, n := range []string{"c", "a", "b"} {
		if err := s.Update(func(tx *Tx) error { return tx.Put("items", n, item{Name: n}) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"c", "a", "b"} {
		select {
		case k := <-ch:
			if k.Kind != "items" || k.Name != want {
				t.Fatalf("event %+v, want items/%s", k, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no watch event")
		}
	}
	var got []item
	_ = s.View(func(tx *Tx) error { var err error; got, err = List[item](tx, "items"); return err })
	if len(got) != 3 || got[0].Name != "a" || got[2].Name != "c" {
		t.Fatalf("List = %+v", got)
	}
}

func TestSecondOpenOfSameFileFails(t *testing.T) {
	_, p := open(t)
	if _, err := Open(p, 50*time.Millisecond); err == nil {
		t.Fatal("second Open of a locked database succeeded")
	}
}

// An Update that writes nothing commits nothing (no new bolt transaction, no
// watch event); one that panics leaves the store usable.
func TestUpdateWithoutWritesAndPanics(t *testing.T) {
	s, _ := open(t)
	lastTx := func() int {
		var id int
		if err := s.db.View(func(btx *bolt.Tx) error { id = btx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	if err := s.Update(func(tx *Tx) error { return tx.Put("k", "a", 1) }); err != nil {
		t.Fatal(err)
	}
	before := lastTx()
	if err := s.Update(func(tx *Tx) error {
		var v int
		_, err := tx.Get("k", "a", &v)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if after := lastTx(); after != before {
		t.Fatalf("a read-only Update committed: tx %d → %d", before, after)
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.Update(func(tx *Tx) error {
			_ = tx.Put("k", "b", 2)
			panic("boom")
		})
	}()
	if err := s.Update(func(tx *Tx) error { return tx.Put("k", "c", 3) }); err != nil {
		t.Fatalf("Update after a panicking one: %v", err)
	}
	var v int
	if err := s.View(func(tx *Tx) error {
		found, err := tx.Get("k", "b", &v)
		if found {
			t.Error("the panicking Update's write was kept")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if lastTx() != before+1 {
		t.Fatalf("tx id %d, want %d", lastTx(), before+1)
	}
}

// TestOnDelete: deleting a present key runs the kind's hooks in the same
// transaction (their writes commit or roll back with it); deleting an absent
// key or a key of another kind runs none.
func TestOnDelete(t *testing.T) {
	s, _ := open(t)
	s.OnDelete("items", func(tx *Tx, name string) error { return tx.Delete("labels", "items/"+name) })
	put := func(kind, name string) {
		t.Helper()
		if err := s.Update(func(tx *Tx) error { return tx.Put(kind, name, item{name, 1}) }); err != nil {
			t.Fatal(err)
		}
	}
	has := func(kind, name string) bool {
		var ok bool
		_ = s.View(func(tx *Tx) error { ok = tx.Exists(kind, name); return nil })
		return ok
	}
	put("items", "a")
	put("labels", "items/a")
	put("labels", "items/b")
	put("other", "a")
	put("labels", "other/a")

	// A rolled-back delete keeps both.
	boom := errors.New("boom")
	if err := s.Update(func(tx *Tx) error {
		if err := tx.Delete("items", "a"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if !has("items", "a") || !has("labels", "items/a") {
		t.Fatal("a rolled-back delete removed something")
	}
	for _, k := range []Key{{"items", "a"}, {"items", "b"}, {"other", "a"}} {
		if err := s.Update(func(tx *Tx) error { return tx.Delete(k.Kind, k.Name) }); err != nil {
			t.Fatal(err)
		}
	}
	if has("items", "a") || has("labels", "items/a") {
		t.Fatal("deleting items/a left its label")
	}
	if !has("labels", "items/b") {
		t.Fatal("deleting the absent items/b ran the hook")
	}
	if !has("labels", "other/a") {
		t.Fatal("deleting other/a ran the items hook")
	}

	// A hook's error aborts the delete.
	s.OnDelete("guarded", func(*Tx, string) error { return boom })
	put("guarded", "g")
	if err := s.Update(func(tx *Tx) error { return tx.Delete("guarded", "g") }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if !has("guarded", "g") {
		t.Fatal("a delete whose hook failed was committed")
	}
}
