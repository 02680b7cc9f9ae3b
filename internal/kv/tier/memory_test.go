package tier

import (
	"context"
	"errors"
	"testing"
)

func TestMemoryL2(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryL2()
	if err := m.Put(ctx, hs(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		query []uint64
		want  int
	}{
		{"full", []uint64{1, 2, 3}, 3},
		{"longer query", []uint64{1, 2, 3, 4}, 3},
		{"hole", []uint64{1, 5, 3}, 1},
		{"miss", []uint64{9}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.MatchPrefix(ctx, hs(tt.query...))
			if err != nil || got != tt.want {
				t.Fatalf("MatchPrefix = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	boom := errors.New("boom")
	m.SetError(boom)
	if _, err := m.MatchPrefix(ctx, hs(1)); !errors.Is(err, boom) {
		t.Fatalf("injected error not returned: %v", err)
	}
	m.SetError(nil)
	if got := m.Calls(); got.MatchPrefix != 5 || got.Put != 1 || got.PutBlocks != 3 {
		t.Fatalf("Calls = %+v", got)
	}
	_ = m.Close()
	if err := m.Put(ctx, hs(4)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if m.Len() != 3 || !m.Contains(2) {
		t.Fatal("contents changed")
	}
}
