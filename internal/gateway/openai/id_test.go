package openai

import (
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// TestNewIDUnique: generated request ids never repeat within a process,
// also when generated concurrently, and two handlers (two processes) use
// different prefixes.
func TestNewIDUnique(t *testing.T) {
	h := NewHandler(gateway.New(gateway.Options{}), Options{})
	const workers, each = 4, 2000
	ids := make(chan string, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				ids <- h.newID()
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("id %s generated twice", id)
		}
		if !strings.HasPrefix(id, h.idPf) || len(id) != len(h.idPf)+16 {
			t.Fatalf("id %q: want the handler prefix %q and 16 hex digits", id, h.idPf)
		}
		seen[id] = true
	}
	other := NewHandler(gateway.New(gateway.Options{}), Options{})
	if other.idPf == h.idPf {
		t.Fatalf("two handlers share the id prefix %q", h.idPf)
	}
}
