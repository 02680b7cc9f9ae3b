package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// drain returns every arrival of a trace schedule.
func drain(t *testing.T, s *traceSchedule) []time.Duration {
	t.Helper()
	var out []time.Duration
	for {
		off, ok := s.next()
		if !ok {
			return out
		}
		if len(out) > 0 && off < out[len(out)-1] {
			t.Fatalf("arrival %d at %v before the previous %v", len(out), off, out[len(out)-1])
		}
		out = append(out, off)
		if len(out) > 10_000_000 {
			t.Fatal("schedule does not end")
		}
	}
}

func TestBurstyTraceShape(t *testing.T) {
	tr := BurstyTrace(2, 0.5)
	if tr.End != 300*time.Second {
		t.Fatalf("end %v, want 300s (600s × 0.5)", tr.End)
	}
	var names []string
	for _, sp := range tr.spans() {
		names = append(names, sp.name)
	}
	if got := strings.Join(names, ","); got != "idle,spike,ramp,idle" {
		t.Fatalf("phases %s", got)
	}
	peak, base := 0.0, math.Inf(1)
	for _, sg := range tr.Segments {
		peak, base = max(peak, sg.Rate), min(base, sg.Rate)
	}
	if peak != 20 || base != 2 {
		t.Fatalf("rates from %v to %v, want base 2 and a 10× spike of 20", base, peak)
	}
	// The ramp rises monotonically.
	var prev float64
	for _, sg := range tr.Segments {
		if sg.Phase == "ramp" {
			if sg.Rate <= prev {
				t.Fatalf("ramp not rising: %v after %v", sg.Rate, prev)
			}
			prev = sg.Rate
		}
	}
}

func TestTraceScheduleIsSeededAndCountsMatchPhases(t *testing.T) {
	tr := BurstyTrace(20, 1)
	a := drain(t, newTraceSchedule(tr, 7, 0))
	b := drain(t, newTraceSchedule(tr, 7, 0))
	c := drain(t, newTraceSchedule(tr, 8, 0))
	if len(a) != len(b) {
		t.Fatalf("same seed, %d vs %d arrivals", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, arrival %d at %v vs %v", i, a[i], b[i])
		}
	}
	if len(a) == len(c) && a[len(a)/2] == c[len(c)/2] {
		t.Fatal("another seed gave the same arrivals")
	}
	if last := a[len(a)-1]; last >= tr.End {
		t.Fatalf("arrival at %v, after the trace's end %v", last, tr.End)
	}
	// Every segment's count is Poisson(rate × length): within 5 standard
	// deviations (a false failure has probability < 1e-6 per segment).
	for i, sg := range tr.Segments {
		end := tr.End
		if i+1 < len(tr.Segments) {
			end = tr.Segments[i+1].Offset
		}
		n := 0
		for _, x := range a {
			if x >= sg.Offset && x < end {
				n++
			}
		}
		want := sg.Rate * (end - sg.Offset).Seconds()
		if math.Abs(float64(n)-want) > 5*math.Sqrt(want) {
			t.Errorf("segment %d (%s, %v req/s from %v): %d arrivals, want %.0f ± %.0f", i, sg.Phase, sg.Rate, sg.Offset, n, want, 5*math.Sqrt(want))
		}
	}
	// And the phase summaries count the same requests, by scheduled arrival.
	recs := make([]Record, len(a))
	for i, x := range a {
		recs[i] = Record{Scheduled: x, TTFT: time.Millisecond}
	}
	total := 0
	for _, p := range phaseSummaries(tr, recs, SLO{}) {
		total += p.Requests
		if math.Abs(float64(p.Requests)-p.OfferedRequests) > 5*math.Sqrt(p.OfferedRequests) {
			t.Errorf("phase %s: %d requests, offered %.0f", p.Phase, p.Requests, p.OfferedRequests)
		}
	}
	if total != len(a) {
		t.Fatalf("phases hold %d requests, the schedule made %d", total, len(a))
	}
}

func TestTraceScheduleSkipsSilentSegments(t *testing.T) {
	tr, err := ParseTraceCSV(strings.NewReader("0,50\n1,0\n3,50\n4,0\n"), "t.csv", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, newTraceSchedule(tr, 1, 0))
	for _, x := range got {
		if x >= time.Second && x < 3*time.Second {
			t.Fatalf("arrival at %v inside the silent segment 1s..3s", x)
		}
		if x >= 4*time.Second {
			t.Fatalf("arrival at %v after the end", x)
		}
	}
	if len(got) < 50 { // Poisson(100): far above 50
		t.Fatalf("only %d arrivals", len(got))
	}
}

func TestParseTraceCSV(t *testing.T) {
	tests := []struct {
		name, in  string
		mult      float64
		scale     float64
		wantErr   string
		wantSegs  int
		wantEnd   time.Duration
		wantRate0 float64
		wantPhase string
	}{
		{name: "header comments and phases", in: "# my trace\noffset_seconds,rate,phase\n0,1,quiet\n\n10, 5 ,busy\n20,0\n", mult: 1, scale: 1,
			wantSegs: 2, wantEnd: 20 * time.Second, wantRate0: 1, wantPhase: "quiet"},
		{name: "scaled and multiplied", in: "0,1\n10,2\n20,0\n", mult: 3, scale: 0.1, wantSegs: 2, wantEnd: 2 * time.Second, wantRate0: 3, wantPhase: "seg-1"},
		{name: "open ended", in: "0,1\n10,2\n", mult: 1, scale: 1, wantSegs: 2, wantEnd: 0, wantRate0: 1, wantPhase: "seg-1"},
		{name: "first not at zero", in: "5,1\n10,0\n", mult: 1, scale: 1, wantErr: "first row must be at offset 0"},
		{name: "not increasing", in: "0,1\n10,2\n10,0\n", mult: 1, scale: 1, wantErr: "offsets must increase"},
		{name: "negative rate", in: "0,-1\n10,0\n", mult: 1, scale: 1, wantErr: "rate in [0"},
		{name: "too many fields", in: "0,1,a,b\n", mult: 1, scale: 1, wantErr: "want offset_seconds,rate[,phase]"},
		{name: "not numbers", in: "0,1\nten,2\n", mult: 1, scale: 1, wantErr: "want numbers"},
		{name: "empty", in: "# nothing\n", mult: 1, scale: 1, wantErr: "no rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := ParseTraceCSV(strings.NewReader(tc.in), "t.csv", tc.mult, tc.scale)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Segments) != tc.wantSegs || tr.End != tc.wantEnd || tr.Segments[0].Rate != tc.wantRate0 || tr.Segments[0].Phase != tc.wantPhase {
				t.Fatalf("got %+v", tr)
			}
		})
	}
}

func TestTraceConfigValidation(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.csv")
	if err := os.WriteFile(open, []byte("0,1\n10,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{name: "compact form", edit: func(c *Config) { c.Arrival = "trace:bursty,scale=0.1"; c.Rate = 3 }, check: func(t *testing.T, c Config) {
			if c.Arrival != ArrivalTrace || c.Trace != TraceBursty || c.TraceScale != 0.1 || c.TraceResolved == nil || c.TraceResolved.End != 60*time.Second {
				t.Fatalf("%+v", c)
			}
			if c.TraceResolved.Segments[1].Rate != 30 {
				t.Fatalf("spike rate %v, want 10 × 3", c.TraceResolved.Segments[1].Rate)
			}
		}},
		{name: "trace flag implies the arrival, rate defaults to 1", edit: func(c *Config) { c.Arrival = ""; c.Trace = TraceBursty }, check: func(t *testing.T, c Config) {
			if c.Arrival != ArrivalTrace || c.Rate != 1 || c.TraceScale != 1 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "file without an end needs a duration", edit: func(c *Config) { c.Arrival = ArrivalTrace; c.TraceFile = open }, wantErr: "has no end"},
		{name: "file without an end and a duration", edit: func(c *Config) { c.Arrival = ArrivalTrace; c.TraceFile = open; c.Duration = 5 * time.Second }},
		{name: "missing file", edit: func(c *Config) { c.Arrival = ArrivalTrace; c.TraceFile = filepath.Join(dir, "nope.csv") }, wantErr: "--trace-file"},
		{name: "both", edit: func(c *Config) { c.Arrival = ArrivalTrace; c.Trace = TraceBursty; c.TraceFile = open }, wantErr: "give one"},
		{name: "unknown trace", edit: func(c *Config) { c.Arrival = ArrivalTrace; c.Trace = "diurnal" }, wantErr: "--trace: want bursty"},
		{name: "bad scale", edit: func(c *Config) { c.Arrival = ArrivalTrace; c.TraceScale = -1 }, wantErr: "--trace-scale"},
		{name: "trace flags without trace arrival", edit: func(c *Config) { c.Arrival = ArrivalPoisson; c.Rate = 1; c.TraceScale = 0.5 }, wantErr: "need --arrival trace"},
		{name: "bad compact part", edit: func(c *Config) { c.Arrival = "trace:bursty,speed=2" }, wantErr: "unknown part"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := baseConfig("http://127.0.0.1:1")
			c.Concurrency, c.Requests = 0, 0
			tc.edit(&c)
			err := c.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
			// Validate is idempotent (Run validates what the CLI validated).
			again := c
			if err := again.Validate(); err != nil || again.TraceResolved.End != c.TraceResolved.End {
				t.Fatalf("second Validate: %v", err)
			}
		})
	}
}

func TestPhaseSummariesSLOAttainment(t *testing.T) {
	tr, err := ParseTraceCSV(strings.NewReader("0,1,a\n10,1,b\n20,1,b\n30,0\n"), "t.csv", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{Scheduled: 1 * time.Second, TTFT: 50 * time.Millisecond},
		{Scheduled: 2 * time.Second, TTFT: 150 * time.Millisecond},
		{Scheduled: 12 * time.Second, TTFT: 10 * time.Millisecond},
		{Scheduled: 25 * time.Second, TTFT: 20 * time.Millisecond},
		{Scheduled: 26 * time.Second, Error: errConnect},
	}
	ps := phaseSummaries(tr, recs, SLO{TTFT: 100 * time.Millisecond})
	if len(ps) != 2 {
		t.Fatalf("%d phases, want a and b (b's two segments merged)", len(ps))
	}
	a, b := ps[0], ps[1]
	if a.Phase != "a" || a.Requests != 2 || *a.Good != 1 || *a.SLOAttainment != 0.5 || a.OfferedRequests != 10 {
		t.Fatalf("a: %+v", a)
	}
	if b.Phase != "b" || b.StartSeconds != 10 || b.EndSeconds != 30 || b.Requests != 3 || b.Failed != 1 || *b.Good != 2 {
		t.Fatalf("b: %+v", b)
	}
	if math.Abs(*b.SLOAttainment-2.0/3) > 1e-9 || b.TTFT.Max != 20 {
		t.Fatalf("b attainment %v ttft %+v (the failure counts against attainment, not in TTFT)", *b.SLOAttainment, b.TTFT)
	}
	if ps := phaseSummaries(tr, recs, SLO{}); ps[0].SLOAttainment != nil {
		t.Fatal("attainment without an SLO")
	}
}

// A whole run over a short trace against the fake server: every request is
// counted in the phase of its scheduled arrival, and the JSON carries them.
func TestRunTraceReportsPhases(t *testing.T) {
	srv := newFakeServer(t, time.Millisecond, 0)
	trace := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(trace, []byte("offset_seconds,rate,phase\n0,20,low\n0.5,80,high\n1,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(srv.URL)
	cfg.Arrival, cfg.Concurrency, cfg.Requests = "trace:file="+trace, 0, 0
	cfg.SLO = SLO{TTFT: 5 * time.Second}
	cfg.Out = filepath.Join(t.TempDir(), "out.json")
	res := runOK(t, cfg)
	s := res.Stages[0].Summaries[0]
	if s.Failed != 0 || len(s.Phases) != 2 {
		t.Fatalf("failed %d, phases %+v", s.Failed, s.Phases)
	}
	want := drain(t, newTraceSchedule(*res.Config.TraceResolved, cfg.Seed, 0))
	low := 0
	for _, x := range want {
		if x < 500*time.Millisecond {
			low++
		}
	}
	if s.Requests != len(want) || s.Phases[0].Requests != low || s.Phases[1].Requests != len(want)-low {
		t.Fatalf("requests %d (low %d high %d), schedule %d (low %d)", s.Requests, s.Phases[0].Requests, s.Phases[1].Requests, len(want), low)
	}
	if *s.Phases[1].SLOAttainment != 1 || s.Phases[1].TTFT.Count != s.Phases[1].Requests {
		t.Fatalf("high phase %+v", s.Phases[1])
	}
	data, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"phases"`, `"slo_attainment"`, `"trace_resolved"`, `"phase": "high"`} {
		if !strings.Contains(string(data), k) {
			t.Fatalf("JSON lacks %s", k)
		}
	}
}
