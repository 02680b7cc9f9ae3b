package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/bench"
)

// TestBenchTraceFlags: the trace flags documented in docs/benchmarking.md
// reach the bench config and resolve to the same trace as the
// `--arrival trace:…` shorthand.
func TestBenchTraceFlags(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(csv, []byte("offset_seconds,rate,phase\n0,2,warm\n10,6,peak\n30,0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--target", "http://127.0.0.1:1", "--model", "m", "--workload", "random:input=8,output=2"}
	cases := []struct {
		name    string
		args    []string
		wantEnd time.Duration
		// wantSeg is the second segment's offset and rate.
		wantOff  time.Duration
		wantRate float64
		wantErr  string
	}{
		{name: "trace flag with scale and rate", args: []string{"--trace", "bursty", "--trace-scale", "0.1", "--rate", "2"},
			wantEnd: 60 * time.Second, wantOff: 12 * time.Second, wantRate: 20},
		{name: "arrival shorthand, same trace", args: []string{"--arrival", "trace:bursty,scale=0.1", "--rate", "2"},
			wantEnd: 60 * time.Second, wantOff: 12 * time.Second, wantRate: 20},
		{name: "explicit arrival with trace flags", args: []string{"--arrival", "trace", "--trace-scale", "0.5"},
			wantEnd: 300 * time.Second, wantOff: 60 * time.Second, wantRate: 10},
		{name: "trace file, scaled", args: []string{"--trace-file", csv, "--trace-scale", "2"},
			wantEnd: 60 * time.Second, wantOff: 20 * time.Second, wantRate: 6},
		{name: "unknown trace", args: []string{"--trace", "diurnal"}, wantErr: "--trace"},
		{name: "trace and file", args: []string{"--trace", "bursty", "--trace-file", csv}, wantErr: "give one"},
		{name: "scale without a trace arrival", args: []string{"--arrival", "poisson", "--rate", "1", "--trace-scale", "0.5"}, wantErr: "need --arrival trace"},
		{name: "negative scale", args: []string{"--trace", "bursty", "--trace-scale", "-1"}, wantErr: "--trace-scale"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Parse through the real command's flag set (RunE is not run: no
			// target is contacted).
			o := &benchOptions{}
			cmd := benchCommand(o)
			if err := cmd.ParseFlags(append(append([]string{}, base...), c.args...)); err != nil {
				t.Fatal(err)
			}
			cfg, err := o.config()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Arrival != bench.ArrivalTrace || cfg.TraceResolved == nil {
				t.Fatalf("arrival %q, resolved %v; want a resolved trace", cfg.Arrival, cfg.TraceResolved)
			}
			tr := cfg.TraceResolved
			if tr.End != c.wantEnd {
				t.Errorf("end = %v, want %v", tr.End, c.wantEnd)
			}
			if len(tr.Segments) < 2 || tr.Segments[1].Offset != c.wantOff || tr.Segments[1].Rate != c.wantRate {
				t.Errorf("segments = %+v, want the second at %v with rate %v", tr.Segments, c.wantOff, c.wantRate)
			}
		})
	}
}
