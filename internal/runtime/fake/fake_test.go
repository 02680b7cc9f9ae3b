package fake_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
)

func spec(id string) runtime.ReplicaSpec {
	return runtime.ReplicaSpec{ID: id, Endpoint: "ep", Variant: "AllTraffic", Engine: "sim", Model: "llama-3.1-8b", GPU: "h100", TensorParallel: 1}
}

type recorder struct {
	mu   sync.Mutex
	seen []runtime.Replica
	ch   chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 100)} }

func (r *recorder) fn(rep runtime.Replica) {
	r.mu.Lock()
	r.seen = append(r.seen, rep)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *recorder) wait(t *testing.T, n int) []runtime.Replica {
	t.Helper()
	for {
		r.mu.Lock()
		if len(r.seen) >= n {
			out := append([]runtime.Replica(nil), r.seen...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("want %d notifications, got %d", n, len(r.seen))
		}
	}
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name      string
		opts      []fake.Option
		wantState runtime.State
	}{
		{name: "healthy at once", wantState: runtime.StateHealthy},
		{name: "manual", opts: []fake.Option{fake.Manual()}, wantState: runtime.StateStarting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt := fake.New(tt.opts...)
			rec := newRecorder()
			rt.Subscribe(ctx, rec.fn)
			rt.SetAddr("a", "127.0.0.1:1234")
			if err := rt.Start(ctx, spec("a")); err != nil {
				t.Fatal(err)
			}
			got, err := rt.Get("a")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.wantState || got.Addr != "127.0.0.1:1234" {
				t.Fatalf("got %+v", got)
			}
			if err := rt.Start(ctx, spec("a")); err == nil {
				t.Fatal("second Start of a running replica: want error")
			}
			if err := rt.SetState("a", runtime.StateFailed, "boom"); err != nil {
				t.Fatal(err)
			}
			if err := rt.Stop(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if err := rt.Stop(ctx, "a"); err != nil {
				t.Fatalf("Stop is idempotent: %v", err)
			}
			seen := rec.wait(t, 3)
			wantSeq := []runtime.State{tt.wantState, runtime.StateFailed, runtime.StateStopped}
			for i, st := range wantSeq {
				if seen[i].State != st {
					t.Fatalf("notification %d: state %s, want %s", i, seen[i].State, st)
				}
			}
			if seen[1].Message != "boom" || seen[1].Restarts != 1 {
				t.Fatalf("failed notification: %+v", seen[1])
			}
			if got := rt.Stops(); len(got) != 2 {
				t.Fatalf("Stops() = %v", got)
			}
			if got := rt.Running(); len(got) != 0 {
				t.Fatalf("Running() = %v", got)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	boom := errors.New("no capacity")
	tests := []struct {
		name    string
		errID   string
		startID string
		wantErr bool
	}{
		{name: "matching id", errID: "a", startID: "a", wantErr: true},
		{name: "other id", errID: "b", startID: "a", wantErr: false},
		{name: "every id", errID: "", startID: "a", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fake.New()
			rt.SetStartError(tt.errID, boom)
			err := rt.Start(context.Background(), spec(tt.startID))
			if tt.wantErr != errors.Is(err, boom) {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(rt.Starts()) != 1 {
				t.Fatalf("Starts() = %v", rt.Starts())
			}
			rt.SetStartError(tt.errID, nil)
			if tt.wantErr {
				if err := rt.Start(context.Background(), spec(tt.startID)); err != nil {
					t.Fatalf("after clearing: %v", err)
				}
			}
		})
	}
}

func TestUnknownAndClose(t *testing.T) {
	rt := fake.New()
	if _, err := rt.Get("x"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
	if err := rt.SetState("x", runtime.StateHealthy, ""); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("SetState unknown: %v", err)
	}
	ctx := context.Background()
	for _, id := range []string{"b", "a"} {
		if err := rt.Start(ctx, spec(id)); err != nil {
			t.Fatal(err)
		}
	}
	if got := rt.List(); len(got) != 2 || got[0].Spec.ID != "a" {
		t.Fatalf("List() = %+v", got)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rt.Running(); len(got) != 0 {
		t.Fatalf("Running after Close = %v", got)
	}
	if err := rt.Start(ctx, spec("c")); err == nil {
		t.Fatal("Start after Close: want error")
	}
}
