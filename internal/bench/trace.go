package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ArrivalTrace replays a piecewise-constant rate trace (the built-in bursty
// one or a CSV file) as a seeded non-homogeneous Poisson process.
const ArrivalTrace = "trace"

// TraceBursty is the built-in trace's name.
const TraceBursty = "bursty"

// Limits on traces, so a stray file cannot ask for the impossible.
const (
	maxTraceSegments = 10_000
	maxTraceScale    = 1000
	maxTraceFileSize = 4 << 20
)

// TraceSegment is one piece of a trace: from Offset (since the stage start)
// until the next segment's offset (or the trace's end), arrivals come at Rate
// requests per second, counted under Phase.
type TraceSegment struct {
	Offset time.Duration `json:"offset_ns"`
	Rate   float64       `json:"rate"`
	Phase  string        `json:"phase"`
}

// Trace is a resolved schedule of rates: --trace-scale and --rate already
// applied. End is when the last segment stops (no arrival at or after it).
type Trace struct {
	Name     string         `json:"name"`
	Segments []TraceSegment `json:"segments"`
	End      time.Duration  `json:"end_ns"`
}

// burstyShape is the built-in bursty trace at scale 1, in multiples of the
// base rate: idle, a 10× spike, a slow ramp to 5×, idle (10 minutes).
// The idle phases carry the base rate (a quiet trickle, not silence), so
// the spike and the ramp are measured against a deployment that is scaled
// in but alive; scale-from-zero is measured separately.
var burstyShape = func() []struct {
	at    float64
	mult  float64
	phase string
} {
	type p = struct {
		at    float64
		mult  float64
		phase string
	}
	s := []p{{0, 1, "idle"}, {120, 10, "spike"}}
	for k := range 10 { // 180s..480s: 1.4×, 1.8×, … 5.0×, 30 s each
		s = append(s, p{180 + 30*float64(k), 1 + 0.4*float64(k+1), "ramp"})
	}
	return append(s, p{480, 1, "idle"})
}()

// burstyLength is the built-in trace's length at scale 1, in seconds.
const burstyLength = 600

// BurstyTrace returns the built-in trace with its base rate and time scale
// (offsets multiplied by scale; rates stay requests per second of wall time).
func BurstyTrace(baseRate, scale float64) Trace {
	t := Trace{Name: TraceBursty, End: secs(burstyLength * scale)}
	for _, p := range burstyShape {
		t.Segments = append(t.Segments, TraceSegment{Offset: secs(p.at * scale), Rate: p.mult * baseRate, Phase: p.phase})
	}
	return t
}

func secs(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// ParseTraceCSV reads a trace file: one `offset_seconds,rate[,phase]` row
// per segment, offsets strictly increasing from 0, rates ≥ 0 requests per
// second; blank lines, `#` comments and a header row are skipped. The last
// row ends the trace when its rate is 0; otherwise its segment runs until
// open (the caller's --duration), reported by End == 0. Rows without a phase
// are phases of their own, named seg-N (their 1-based row number among the
// segments). Rates are multiplied by mult and offsets by scale.
func ParseTraceCSV(r io.Reader, name string, mult, scale float64) (Trace, error) {
	t := Trace{Name: name}
	sc := bufio.NewScanner(io.LimitReader(r, maxTraceFileSize))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	line := 0
	last, header := 0.0, false
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Split(s, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(f) < 2 || len(f) > 3 {
			return t, fmt.Errorf("%s:%d: want offset_seconds,rate[,phase], got %q", name, line, s)
		}
		off, err1 := strconv.ParseFloat(f[0], 64)
		rate, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			if len(t.Segments) == 0 && !header && err1 != nil && err2 != nil {
				header = true // a header row, before any data
				continue
			}
			return t, fmt.Errorf("%s:%d: want numbers offset_seconds,rate, got %q", name, line, s)
		}
		if math.IsNaN(off) || math.IsInf(off, 0) || off < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 || rate > maxRate {
			return t, fmt.Errorf("%s:%d: offset must be ≥ 0 and rate in [0, %d], got %q", name, line, maxRate, s)
		}
		if len(t.Segments) == 0 && off != 0 {
			return t, fmt.Errorf("%s:%d: the first row must be at offset 0, got %v", name, line, off)
		}
		if len(t.Segments) > 0 && off <= last {
			return t, fmt.Errorf("%s:%d: offsets must increase, %v after %v", name, line, off, last)
		}
		if len(t.Segments) >= maxTraceSegments {
			return t, fmt.Errorf("%s: more than %d rows", name, maxTraceSegments)
		}
		phase := fmt.Sprintf("seg-%d", len(t.Segments)+1)
		if len(f) == 3 && f[2] != "" {
			phase = f[2]
		}
		last = off
		t.Segments = append(t.Segments, TraceSegment{Offset: secs(off * scale), Rate: rate * mult, Phase: phase})
	}
	if err := sc.Err(); err != nil {
		return t, fmt.Errorf("%s: %w", name, err)
	}
	if len(t.Segments) == 0 {
		return t, fmt.Errorf("%s: no rows (want offset_seconds,rate lines)", name)
	}
	if n := len(t.Segments); n > 1 && t.Segments[n-1].Rate == 0 {
		t.End = t.Segments[n-1].Offset
		t.Segments = t.Segments[:n-1]
	}
	return t, nil
}

// LoadTraceFile reads a trace CSV from disk (see ParseTraceCSV).
func LoadTraceFile(path string, mult, scale float64) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, fmt.Errorf("--trace-file: %w", err)
	}
	defer f.Close()
	t, err := ParseTraceCSV(f, path, mult, scale)
	if err != nil {
		return t, fmt.Errorf("--trace-file: %w", err)
	}
	t.Name = filepath.Base(path)
	return t, nil
}

// resolveTrace builds the trace a validated trace config describes.
func (c *Config) resolveTrace() (Trace, error) {
	if c.TraceFile != "" {
		return LoadTraceFile(c.TraceFile, c.Rate, c.TraceScale)
	}
	return BurstyTrace(c.Rate, c.TraceScale), nil
}

// parseTraceArrival accepts the compact form `trace:bursty,scale=0.1` or
// `trace:file=PATH,scale=0.1` of --arrival, so scripts need no extra flags.
func (c *Config) parseTraceArrival() error {
	spec, ok := strings.CutPrefix(c.Arrival, ArrivalTrace+":")
	if !ok {
		return nil
	}
	c.Arrival = ArrivalTrace
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		k, v, hasV := strings.Cut(part, "=")
		switch {
		case part == "":
		case !hasV && k == TraceBursty:
			c.Trace = TraceBursty
		case k == "file" && hasV:
			c.TraceFile = v
		case k == "scale" && hasV:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("--arrival %s: scale: want a number, got %q", ArrivalTrace, v)
			}
			c.TraceScale = f
		default:
			return fmt.Errorf("--arrival %s: unknown part %q (want bursty, file=PATH, scale=F)", ArrivalTrace, part)
		}
	}
	return nil
}

// validateTrace checks the trace flags and resolves the trace into c.
func (c *Config) validateTrace() error {
	if c.Trace != "" && c.TraceFile != "" {
		return errors.New("--trace and --trace-file: give one")
	}
	if c.Trace == "" && c.TraceFile == "" {
		c.Trace = TraceBursty
	}
	if c.Trace != "" && c.Trace != TraceBursty {
		return fmt.Errorf("--trace: want %s (or --trace-file FILE), got %q", TraceBursty, c.Trace)
	}
	if c.TraceScale == 0 {
		c.TraceScale = 1
	}
	if !(c.TraceScale > 0 && c.TraceScale <= maxTraceScale) {
		return fmt.Errorf("--trace-scale: want (0, %d], got %v", maxTraceScale, c.TraceScale)
	}
	if c.Rate == 0 {
		c.Rate = 1
	}
	if c.Rate < 0 || c.Rate > maxRate {
		return fmt.Errorf("--rate: a trace's base rate must be in (0, %d]", maxRate)
	}
	t, err := c.resolveTrace()
	if err != nil {
		return err
	}
	if t.End == 0 && c.Duration == 0 && c.Requests == 0 {
		return errors.New("--trace-file: the last row's rate is not 0, so the trace has no end: add a final `OFFSET,0` row or set --duration/--requests")
	}
	c.TraceResolved = &t
	return nil
}

// traceSchedule draws arrivals of a non-homogeneous Poisson process with a
// piecewise-constant rate by time rescaling: unit-mean exponential gaps are
// spent against the rate's integral, so each segment gets Poisson(rate ×
// length) arrivals, uniformly spread, whatever the segment lengths.
type traceSchedule struct {
	segs []TraceSegment
	end  float64 // seconds; 0 = the last segment never ends
	i    int
	t    float64
	rng  interface{ ExpFloat64() float64 }
}

func newTraceSchedule(tr Trace, seed uint64, stageIdx int) *traceSchedule {
	return &traceSchedule{segs: tr.Segments, end: tr.End.Seconds(), rng: rngFor(seed, streamArrival, stageIdx)}
}

// next returns the next arrival's offset, or false when the trace has ended.
func (s *traceSchedule) next() (time.Duration, bool) {
	e := s.rng.ExpFloat64()
	for s.i < len(s.segs) {
		segEnd := math.Inf(1)
		if s.i+1 < len(s.segs) {
			segEnd = s.segs[s.i+1].Offset.Seconds()
		} else if s.end > 0 {
			segEnd = s.end
		}
		rate := s.segs[s.i].Rate
		if rate > 0 && e <= rate*(segEnd-s.t) {
			s.t += e / rate
			return secs(s.t), true
		}
		if math.IsInf(segEnd, 1) { // an endless segment of rate 0
			return 0, false
		}
		if rate > 0 {
			e -= rate * (segEnd - s.t)
		}
		s.i++
		s.t = segEnd
	}
	return 0, false
}

// PhaseSummary is one phase of a trace for one target: the requests whose
// scheduled arrival fell in it and how they fared.
type PhaseSummary struct {
	Phase        string  `json:"phase"`
	StartSeconds float64 `json:"start_seconds"`
	EndSeconds   float64 `json:"end_seconds"` // 0 = open-ended
	// OfferedRequests is the trace's expected count (rate × length).
	OfferedRequests float64 `json:"offered_requests"`
	Requests        int     `json:"requests"`
	Succeeded       int     `json:"succeeded"`
	Failed          int     `json:"failed"`
	TTFT            Stats   `json:"ttft_ms"`
	E2E             Stats   `json:"e2e_ms"`
	// Good counts requests that succeeded and met every --slo objective;
	// SLOAttainment = Good / Requests (failures count against it). Both are
	// absent without --slo.
	Good          *int     `json:"good,omitempty"`
	SLOAttainment *float64 `json:"slo_attainment,omitempty"`
}

// phaseSpan is a run of consecutive segments with the same phase name.
type phaseSpan struct {
	name       string
	start, end time.Duration // end 0 = open
	offered    float64
}

func (t Trace) spans() []phaseSpan {
	var out []phaseSpan
	for i, sg := range t.Segments {
		end := t.End
		if i+1 < len(t.Segments) {
			end = t.Segments[i+1].Offset
		}
		offered := 0.0
		if end > 0 {
			offered = sg.Rate * (end - sg.Offset).Seconds()
		}
		if n := len(out); n > 0 && out[n-1].name == sg.Phase {
			out[n-1].end = end
			out[n-1].offered += offered
			continue
		}
		out = append(out, phaseSpan{name: sg.Phase, start: sg.Offset, end: end, offered: offered})
	}
	return out
}

// phaseSummaries splits a target's records by the phase of their scheduled
// arrival.
func phaseSummaries(t Trace, recs []Record, slo SLO) []PhaseSummary {
	spans := t.spans()
	if len(spans) == 0 {
		return nil
	}
	buckets := make([][]Record, len(spans))
	for _, r := range recs {
		k := 0
		for k+1 < len(spans) && r.Scheduled >= spans[k+1].start {
			k++
		}
		buckets[k] = append(buckets[k], r)
	}
	out := make([]PhaseSummary, len(spans))
	for k, sp := range spans {
		p := PhaseSummary{Phase: sp.name, StartSeconds: sp.start.Seconds(), EndSeconds: sp.end.Seconds(),
			OfferedRequests: sp.offered, Requests: len(buckets[k])}
		var ttft, e2e []float64
		good := 0
		for i := range buckets[k] {
			r := &buckets[k][i]
			if !r.OK() {
				p.Failed++
				continue
			}
			p.Succeeded++
			ttft = append(ttft, ms(r.TTFT))
			e2e = append(e2e, ms(r.E2E))
			if meetsSLO(r, slo) {
				good++
			}
		}
		p.TTFT, p.E2E = computeStats(ttft), computeStats(e2e)
		if !slo.IsZero() {
			att := 0.0
			if p.Requests > 0 {
				att = float64(good) / float64(p.Requests)
			}
			p.Good, p.SLOAttainment = &good, &att
		}
		out[k] = p
	}
	return out
}
