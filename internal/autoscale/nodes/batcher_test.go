package nodes

import (
	"testing"
	"time"
)

func TestBatcher(t *testing.T) {
	type step struct {
		at      time.Duration // since t0
		pending []string
		ready   bool
	}
	cases := []struct {
		name  string
		b     Batcher
		steps []step
	}{
		{
			name: "ready after idle with no new replica",
			steps: []step{
				{0, []string{"a"}, false},
				{500 * time.Millisecond, []string{"a", "b"}, false},
				{1400 * time.Millisecond, []string{"a", "b"}, false},
				{1500 * time.Millisecond, []string{"a", "b"}, true},
				{1600 * time.Millisecond, []string{"a", "b"}, true}, // they waited already
				{1700 * time.Millisecond, []string{"a", "b", "c"}, false},
				{2700 * time.Millisecond, []string{"a", "b", "c"}, true},
			},
		},
		{
			name: "ready at max while replicas keep arriving",
			b:    Batcher{Idle: time.Second, Max: 3 * time.Second},
			steps: []step{
				{0, []string{"a"}, false},
				{900 * time.Millisecond, []string{"a", "b"}, false},
				{1800 * time.Millisecond, []string{"a", "b", "c"}, false},
				{2700 * time.Millisecond, []string{"a", "b", "c", "d"}, false},
				{3 * time.Second, []string{"a", "b", "c", "d"}, true},
			},
		},
		{
			name: "default max is 10s",
			steps: []step{
				{0, []string{"r0"}, false},
				{900 * time.Millisecond, []string{"r1"}, false},
				{1800 * time.Millisecond, []string{"r2"}, false},
				{2700 * time.Millisecond, []string{"r3"}, false},
				{3600 * time.Millisecond, []string{"r4"}, false},
				{4500 * time.Millisecond, []string{"r5"}, false},
				{5400 * time.Millisecond, []string{"r6"}, false},
				{6300 * time.Millisecond, []string{"r7"}, false},
				{7200 * time.Millisecond, []string{"r8"}, false},
				{8100 * time.Millisecond, []string{"r9"}, false},
				{9000 * time.Millisecond, []string{"ra"}, false},
				{9900 * time.Millisecond, []string{"rb"}, false},
				{10 * time.Second, []string{"rb"}, true},
			},
		},
		{
			name: "nothing pending resets the window",
			steps: []step{
				{0, []string{"a"}, false},
				{900 * time.Millisecond, nil, false},
				{1000 * time.Millisecond, []string{"a"}, false},
				{1900 * time.Millisecond, []string{"a"}, false},
				{2000 * time.Millisecond, []string{"a"}, true},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			for _, s := range tc.steps {
				if got := b.Observe(t0.Add(s.at), s.pending); got != s.ready {
					t.Fatalf("at %v with %v: ready = %v, want %v", s.at, s.pending, got, s.ready)
				}
			}
		})
	}
}
