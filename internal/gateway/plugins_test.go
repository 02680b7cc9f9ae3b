package gateway

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func cands(inflight ...int) []Candidate {
	out := make([]Candidate, len(inflight))
	for i, n := range inflight {
		out[i] = Candidate{Backend: Backend{ID: string(rune('a' + i))}, InFlight: n}
	}
	return out
}

func ids(cs []Candidate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Backend.ID)
	}
	return out
}

func TestLeastOutstandingScorer(t *testing.T) {
	tests := []struct {
		name     string
		inflight []int
		want     []float64
	}{
		{name: "empty", inflight: nil, want: []float64{}},
		{name: "all equal", inflight: []int{2, 2, 2}, want: []float64{1, 1, 1}},
		{name: "spread", inflight: []int{0, 5, 10}, want: []float64{1, 0.5, 0}},
		{name: "one busy", inflight: []int{3, 1}, want: []float64{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&leastOutstanding{}).Score(context.Background(), &SchedRequest{}, cands(tt.inflight...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Score = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRoundRobinScorer(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		calls int
		want  []int // index scored 1 on each call
	}{
		{name: "three backends", n: 3, calls: 5, want: []int{0, 1, 2, 0, 1}},
		{name: "one backend", n: 1, calls: 3, want: []int{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := &roundRobin{}
			for call := 0; call < tt.calls; call++ {
				scores := rr.Score(context.Background(), &SchedRequest{}, cands(make([]int, tt.n)...))
				for i, s := range scores {
					want := 0.0
					if i == tt.want[call] {
						want = 1
					}
					if s != want {
						t.Fatalf("call %d: scores %v, want 1 at %d", call, scores, tt.want[call])
					}
				}
			}
		})
	}
}

func TestRandomScorer(t *testing.T) {
	seq := []float64{0.25, 0.75, 0.5}
	i := 0
	r := &random{rand: func() float64 { v := seq[i%len(seq)]; i++; return v }}
	tests := []struct {
		name string
		n    int
		want []float64
	}{
		{name: "draws per candidate", n: 3, want: []float64{0.25, 0.75, 0.5}},
		{name: "none", n: 0, want: []float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Score(context.Background(), &SchedRequest{}, cands(make([]int, tt.n)...)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Score = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	base := cands(0, 0, 0)
	draining := cands(0, 0, 0)
	draining[1].Draining = true
	tests := []struct {
		name   string
		filter Filter
		req    *SchedRequest
		in     []Candidate
		want   []string
	}{
		{name: "exclude tried none", filter: &excludeTried{}, req: &SchedRequest{}, in: base, want: []string{"a", "b", "c"}},
		{name: "exclude tried keeps order", filter: &excludeTried{}, req: &SchedRequest{Tried: map[string]bool{"b": true}}, in: base, want: []string{"a", "c"}},
		{name: "exclude tried all", filter: &excludeTried{}, req: &SchedRequest{Tried: map[string]bool{"a": true, "b": true, "c": true}}, in: base, want: []string{}},
		{name: "not draining", filter: &notDraining{}, req: &SchedRequest{}, in: draining, want: []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(tt.filter.Filter(context.Background(), tt.req, tt.in)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Filter = %v, want %v", got, tt.want)
			}
		})
	}
}

// constScorer returns fixed scores, to test the framework's weighting.
type constScorer struct {
	name   string
	scores []float64
}

func (c *constScorer) Name() string { return c.name }
func (c *constScorer) Score(context.Context, *SchedRequest, []Candidate) []float64 {
	return c.scores
}

func TestSchedulerWeightsAndTies(t *testing.T) {
	tests := []struct {
		name    string
		scorers []weighted
		rand    float64
		want    string
	}{
		{name: "single scorer", scorers: []weighted{{&constScorer{"x", []float64{0.1, 0.9, 0.5}}, 1}}, want: "b"},
		{name: "weights decide", scorers: []weighted{
			{&constScorer{"x", []float64{1, 0, 0}}, 1},
			{&constScorer{"y", []float64{0, 1, 0}}, 3},
		}, want: "b"},
		{name: "out of range clamped", scorers: []weighted{{&constScorer{"x", []float64{5, 1, -3}}, 1}}, rand: 0.99, want: "b"},
		{name: "tie low draw", scorers: []weighted{{&constScorer{"x", []float64{1, 1, 0}}, 1}}, rand: 0.1, want: "a"},
		{name: "tie high draw", scorers: []weighted{{&constScorer{"x", []float64{1, 1, 0}}, 1}}, rand: 0.9, want: "b"},
		{name: "short score slice counts as zero", scorers: []weighted{{&constScorer{"x", []float64{0}}, 1}, {&constScorer{"y", []float64{0, 0, 0.5}}, 1}}, want: "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scheduler{scorers: tt.scorers, rand: func() float64 { return tt.rand }}
			got, ok := s.pick(context.Background(), &SchedRequest{}, cands(0, 0, 0))
			if !ok || got.Backend.ID != tt.want {
				t.Fatalf("pick = %v %v, want %s", got.Backend.ID, ok, tt.want)
			}
		})
	}
}

func TestRegistryStrategies(t *testing.T) {
	reg := NewRegistry()
	tests := []struct {
		strategy     string
		scorer       string // the first scorer
		extraFilters int
	}{
		{"", leastOutstandingName, 0},
		{"LEAST_OUTSTANDING_REQUESTS", leastOutstandingName, 0},
		{"least_outstanding_requests", leastOutstandingName, 0},
		{"RANDOM", randomName, 0},
		{"roundrobin", roundRobinName, 0},
		{"ROUND-ROBIN", roundRobinName, 0},
		{"prefixaware", prefixName, 1},
		{"kvaware", kvPreciseName, 1},
		{"KV_AWARE", kvPreciseName, 1},
		{"session", sessionName, 1},
	}
	for _, tt := range tests {
		t.Run("strategy="+tt.strategy, func(t *testing.T) {
			p, ok := reg.profile(tt.strategy)
			if !ok {
				t.Fatalf("strategy %q not registered", tt.strategy)
			}
			s, err := reg.newScheduler(p, Deps{Rand: func() float64 { return 0 }, KV: newKVIndex(nil)})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.scorers) == 0 || s.scorers[0].Name() != tt.scorer {
				t.Fatalf("scorers = %+v", s.scorers)
			}
			if len(s.filters) != len(alwaysFilters)+tt.extraFilters {
				t.Fatalf("filters = %d, want the %d always-on + %d", len(s.filters), len(alwaysFilters), tt.extraFilters)
			}
		})
	}
	if _, ok := reg.profile("bogus"); ok {
		t.Fatal("unknown strategy resolved")
	}
	if _, err := reg.newScheduler(Profile{Filters: []string{roundRobinName}}, Deps{}); err == nil {
		t.Fatal("scorer used as filter: want error")
	}
	if _, err := reg.newScheduler(Profile{Scorers: []WeightedScorer{{"nope", 1}}}, Deps{}); err == nil {
		t.Fatal("unknown scorer: want error")
	}
}

// Strategies and IsStrategy are what settings outside the gateway validate
// against: every listed name resolves, spelled as registered.
func TestExportedStrategies(t *testing.T) {
	names := Strategies()
	if want := "LEAST_OUTSTANDING_REQUESTS,RANDOM,kvaware,prefixaware,roundrobin,session"; strings.Join(names, ",") != want {
		t.Fatalf("Strategies() = %v, want %s", names, want)
	}
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"kvaware", true}, {"KV-Aware", true}, {"least_outstanding_requests", true}, {"", false}, {"bogus", false}} {
		if got := IsStrategy(tt.name); got != tt.ok {
			t.Errorf("IsStrategy(%q) = %v, want %v", tt.name, got, tt.ok)
		}
	}
}
