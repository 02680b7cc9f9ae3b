package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Ratio compares one target's stage figures with the first target's
// (value / first's value; latency ratios below 1 mean faster).
type Ratio struct {
	Target string             `json:"target"`
	Versus string             `json:"versus"`
	Values map[string]float64 `json:"values"`
}

// ratioMetrics are the figures --compare divides.
var ratioMetrics = []struct {
	name string
	get  func(*Summary) float64
}{
	{"requests_per_second", func(s *Summary) float64 { return s.RequestsPerSecond }},
	{"output_tokens_per_second", func(s *Summary) float64 { return s.OutputTokensPerSecond }},
	{"ttft_p50", func(s *Summary) float64 { return s.TTFT.P50 }},
	{"ttft_p99", func(s *Summary) float64 { return s.TTFT.P99 }},
	{"tpot_p50", func(s *Summary) float64 { return s.TPOT.P50 }},
	{"e2e_p50", func(s *Summary) float64 { return s.E2E.P50 }},
	{"e2e_p99", func(s *Summary) float64 { return s.E2E.P99 }},
	{"goodput_per_second", func(s *Summary) float64 {
		if s.Goodput == nil {
			return 0
		}
		return s.Goodput.PerSecond
	}},
}

func ratios(sums []Summary) []Ratio {
	if len(sums) < 2 {
		return nil
	}
	var out []Ratio
	base := &sums[0]
	for i := 1; i < len(sums); i++ {
		r := Ratio{Target: sums[i].Target, Versus: base.Target, Values: map[string]float64{}}
		for _, m := range ratioMetrics {
			if b := m.get(base); b != 0 {
				r.Values[m.name] = m.get(&sums[i]) / b
			}
		}
		out = append(out, r)
	}
	return out
}

// printTable writes the final human-readable table: one block per stage,
// one column per target.
func printTable(w io.Writer, res *Result) {
	for _, st := range res.Stages {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		head := []string{"stage " + st.Name}
		for _, s := range st.Summaries {
			head = append(head, s.Target)
		}
		row := func(label string, f func(*Summary) string) {
			cells := []string{label}
			for i := range st.Summaries {
				cells = append(cells, f(&st.Summaries[i]))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		row("offered", func(s *Summary) string {
			if s.Arrival == ArrivalConcurrency {
				return fmt.Sprintf("concurrency %d", s.Concurrency)
			}
			if s.Arrival == ArrivalTrace {
				return fmt.Sprintf("trace, base %.3g req/s", s.OfferedRate)
			}
			return fmt.Sprintf("%s %.3g req/s", s.Arrival, s.OfferedRate)
		})
		row("requests ok/failed", func(s *Summary) string { return fmt.Sprintf("%d/%d", s.Succeeded, s.Failed) })
		row("duration s", func(s *Summary) string { return fmt.Sprintf("%.2f", s.DurationSeconds) })
		row("req/s", func(s *Summary) string { return fmt.Sprintf("%.2f", s.RequestsPerSecond) })
		row("output tok/s (peak)", func(s *Summary) string {
			return fmt.Sprintf("%.1f (%.1f)", s.OutputTokensPerSecond, s.PeakOutputTokensPerSecond)
		})
		row("total tok/s", func(s *Summary) string { return fmt.Sprintf("%.1f", s.TotalTokensPerSecond) })
		row("tokens in/out/cached", func(s *Summary) string {
			return fmt.Sprintf("%d/%d/%d", s.InputTokens, s.OutputTokens, s.CachedTokens)
		})
		lat := func(name string, get func(*Summary) Stats) {
			row(name+" ms mean/p50/p90/p95/p99", func(s *Summary) string {
				x := get(s)
				return fmt.Sprintf("%.1f/%.1f/%.1f/%.1f/%.1f", x.Mean, x.P50, x.P90, x.P95, x.P99)
			})
		}
		lat("TTFT", func(s *Summary) Stats { return s.TTFT })
		lat("TPOT", func(s *Summary) Stats { return s.TPOT })
		lat("ITL", func(s *Summary) Stats { return s.ITL })
		lat("E2E", func(s *Summary) Stats { return s.E2E })
		if st.Summaries[0].Goodput != nil {
			row("goodput req/s (attainment)", func(s *Summary) string {
				return fmt.Sprintf("%.2f (%.1f%%)", s.Goodput.PerSecond, 100*s.Goodput.Attainment)
			})
		}
		for k := range st.Summaries[0].Phases {
			ph := st.Summaries[0].Phases[k]
			label := fmt.Sprintf("phase %s %.0f-%.0fs ok/failed, TTFT p95 ms, SLO", ph.Phase, ph.StartSeconds, ph.EndSeconds)
			row(label, func(s *Summary) string {
				if k >= len(s.Phases) {
					return "-"
				}
				p := s.Phases[k]
				slo := "-"
				if p.SLOAttainment != nil {
					slo = fmt.Sprintf("%.1f%%", 100**p.SLOAttainment)
				}
				return fmt.Sprintf("%d/%d, %.1f, %s", p.Succeeded, p.Failed, p.TTFT.P95, slo)
			})
		}
		row("cache hit rate usage/server", func(s *Summary) string {
			server := "-"
			if s.Server != nil && s.Server.CacheHitRate != nil {
				server = fmt.Sprintf("%.1f%%", 100**s.Server.CacheHitRate)
			}
			return fmt.Sprintf("%.1f%%/%s", 100*s.UsageCacheHitRate, server)
		})
		row("errors", func(s *Summary) string {
			if len(s.Errors) == 0 {
				return "-"
			}
			var parts []string
			for _, k := range sortedKeys(s.Errors) {
				parts = append(parts, fmt.Sprintf("%s=%d", k, s.Errors[k]))
			}
			return strings.Join(parts, " ")
		})
		_ = tw.Flush()
		for _, r := range st.Ratios {
			var parts []string
			for _, m := range ratioMetrics {
				if v, ok := r.Values[m.name]; ok {
					parts = append(parts, fmt.Sprintf("%s %.2fx", m.name, v))
				}
			}
			fmt.Fprintf(w, "  %s vs %s: %s\n", r.Target, r.Versus, strings.Join(parts, ", "))
		}
		fmt.Fprintln(w)
	}
}

// writeOutputs writes the JSON and HTML files the config asks for.
func writeOutputs(cfg Config, res *Result) error {
	if cfg.Out != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("results json: %w", err)
		}
		if err := os.WriteFile(cfg.Out, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write --out: %w", err)
		}
	}
	if cfg.Report != "" {
		f, err := os.Create(cfg.Report)
		if err != nil {
			return fmt.Errorf("write --report: %w", err)
		}
		if err := WriteHTML(f, res); err != nil {
			f.Close()
			return fmt.Errorf("write --report: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write --report: %w", err)
		}
	}
	return nil
}

// progress prints the stage's progress every ProgressInterval until the
// returned stop is called.
func (sr *stageRun) progress(ctx context.Context) (stop func()) {
	w := sr.deps.Progress
	iv := sr.cfg.ProgressInterval
	if w == nil || iv <= 0 {
		return func() {}
	}
	t := sr.deps.Clock.NewTicker(iv)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-t.C():
				sr.printProgress(w, false)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		t.Stop()
		close(done)
		wg.Wait()
		sr.printProgress(w, true)
	}
}

func (sr *stageRun) printProgress(w io.Writer, final bool) {
	var done, failed, inflight int64
	for _, tr := range sr.targets {
		done += tr.done.Load()
		failed += tr.failed.Load()
		inflight += tr.inflight.Load()
	}
	el := sr.elapsed()
	frac := -1.0
	switch {
	case sr.cfg.Requests > 0:
		frac = float64(done) / float64(sr.cfg.Requests*len(sr.targets))
	case sr.cfg.Duration > 0:
		frac = min(1, float64(el)/float64(sr.cfg.Duration))
	}
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el.Seconds()
	}
	line := fmt.Sprintf("%s %6.1fs done %d failed %d in-flight %d %.1f req/s", sr.st.Name, el.Seconds(), done, failed, inflight, rate)
	if !sr.deps.ProgressTTY {
		fmt.Fprintln(w, "progress: "+line)
		return
	}
	bar := ""
	if frac >= 0 {
		const width = 30
		n := int(frac * width)
		bar = "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + fmt.Sprintf("] %3.0f%% ", 100*frac)
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(w, "\r\033[K%s%s%s", bar, line, end)
}

// ProgressDefault is the progress interval: often on a terminal, sparse in logs.
func ProgressDefault(tty bool) time.Duration {
	if tty {
		return 200 * time.Millisecond
	}
	return 5 * time.Second
}
