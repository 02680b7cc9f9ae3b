package top

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// load parses testdata/name taken at at, without the lines containing any
// of drop.
func load(t *testing.T, name string, at time.Time, drop ...string) *Scrape {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		skip := false
		for _, d := range drop {
			skip = skip || strings.Contains(l, d)
		}
		if !skip {
			keep = append(keep, l)
		}
	}
	s, err := Parse(strings.NewReader(strings.Join(keep, "")), at)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDiff: two scrapes of /metrics become the rows top prints. two-endpoints-*
// were captured from a real server (a SageMaker endpoint taking streamed
// requests, a JumpStartModel deployment serving as ds-ep) 10 and 6 requests
// apart; mixed-* are written by hand to pin the arithmetic: a counter reset,
// two variants summed, a series that appears, quantiles by interpolation, the
// TTFB fallback, capstan_endpoint_replicas present or not.
func TestDiff(t *testing.T) {
	const hdr = "ENDPOINT  SOURCE  REQ/S  TTFT P50  TTFT P95  REPLICAS  KV HIT  IN-FLIGHT  QUEUED"
	qwen := map[Deployment]string{{Kind: "InferenceEndpointConfig", Namespace: "team-b", Name: "qwen"}: "qwen-chat"}
	tests := []struct {
		name      string
		prev, cur *Scrape
		routes    map[Deployment]string
		order     Order
		want      []string // squeezed lines: runs of spaces are one
	}{
		{name: "captured: a SageMaker endpoint and a deployment under its endpoint name",
			prev: load(t, "two-endpoints-1.txt", t0), cur: load(t, "two-endpoints-2.txt", t0.Add(2*time.Second)),
			routes: map[Deployment]string{{Kind: "JumpStartModel", Namespace: "team-a", Name: "deepseek"}: "ds-ep"},
			want: []string{
				"2026-01-02T03:04:07Z window 2.0s latency TTFT (streamed requests) rows 2",
				hdr,
				"chat-ep endpoint 5.00 0.5ms 0.9ms - 76% 0 0",
				"ds-ep jsm/team-a/deepseek 3.00 - - 1/1 91% 0 0",
			}},
		{name: "captured: without routes the deployment shows under its name",
			prev: load(t, "two-endpoints-1.txt", t0), cur: load(t, "two-endpoints-2.txt", t0.Add(2*time.Second)),
			want: []string{
				"2026-01-02T03:04:07Z window 2.0s latency TTFT (streamed requests) rows 3",
				hdr,
				"chat-ep endpoint 5.00 0.5ms 0.9ms - 76% 0 0",
				"deepseek jsm/team-a/deepseek 0.00 - - 1/1 - 0 0",
				"ds-ep endpoint 3.00 - - - 91% 0 0",
			}},
		{name: "reset, variants, new series, replicas, routes",
			prev: load(t, "mixed-1.txt", t0), cur: load(t, "mixed-2.txt", t0.Add(4*time.Second)), routes: qwen,
			want: []string{
				"2026-01-02T03:04:09Z window 4.0s latency TTFT (streamed requests) rows 4",
				hdr,
				"idle endpoint 0.00 - - 1/1 - 0 0",
				"llama endpoint 10.00 2.2ms 4.0ms 3/4 75% 4 2",
				"qwen-chat iec/team-b/qwen 2.00 - - 0/1 - 0 0",
				"small iec/default/small 5.00 - - 2/2 - 0 0",
			}},
		{name: "sorted by rate",
			prev: load(t, "mixed-1.txt", t0), cur: load(t, "mixed-2.txt", t0.Add(4*time.Second)), routes: qwen, order: ByRate,
			want: []string{
				"2026-01-02T03:04:09Z window 4.0s latency TTFT (streamed requests) rows 4",
				hdr,
				"llama endpoint 10.00 2.2ms 4.0ms 3/4 75% 4 2",
				"small iec/default/small 5.00 - - 2/2 - 0 0",
				"qwen-chat iec/team-b/qwen 2.00 - - 0/1 - 0 0",
				"idle endpoint 0.00 - - 1/1 - 0 0",
			}},
		{name: "no streamed requests: TTFB",
			prev: load(t, "mixed-1.txt", t0, "time_to_first_token"), cur: load(t, "mixed-2.txt", t0.Add(4*time.Second), "time_to_first_token"), routes: qwen,
			want: []string{
				"2026-01-02T03:04:09Z window 4.0s latency TTFB (no streamed requests in the window) rows 4",
				"ENDPOINT  SOURCE  REQ/S  TTFB P50  TTFB P95  REPLICAS  KV HIT  IN-FLIGHT  QUEUED",
				"idle endpoint 0.00 - - 1/1 - 0 0",
				"llama endpoint 10.00 - - 3/4 75% 4 2",
				"qwen-chat iec/team-b/qwen 2.00 - - 0/1 - 0 0",
				"small iec/default/small 5.00 2.0ms 3.8ms 2/2 - 0 0",
			}},
		{name: "no requests in the window",
			prev: load(t, "mixed-2.txt", t0), cur: load(t, "mixed-2.txt", t0.Add(2*time.Second)), routes: qwen,
			want: []string{
				"2026-01-02T03:04:07Z window 2.0s latency TTFB (no streamed requests in the window) rows 4",
				"ENDPOINT  SOURCE  REQ/S  TTFB P50  TTFB P95  REPLICAS  KV HIT  IN-FLIGHT  QUEUED",
				"idle endpoint 0.00 - - 1/1 - 0 0",
				"llama endpoint 0.00 - - 3/4 - 4 2",
				"qwen-chat iec/team-b/qwen 0.00 - - 0/1 - 0 0",
				"small iec/default/small 0.00 - - 2/2 - 0 0",
			}},
		{name: "a server with nothing on it",
			prev: load(t, "empty.txt", t0), cur: load(t, "empty.txt", t0.Add(time.Second)),
			want: []string{
				"2026-01-02T03:04:06Z window 1.0s latency TTFB (no streamed requests in the window) rows 0",
				"ENDPOINT  SOURCE  REQ/S  TTFB P50  TTFB P95  REPLICAS  KV HIT  IN-FLIGHT  QUEUED",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.prev, tc.cur, tc.routes, tc.order).Lines()
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = squeeze(w)
			}
			sq := make([]string, len(got))
			for i, g := range got {
				sq[i] = squeeze(g)
			}
			if strings.Join(sq, "\n") != strings.Join(want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestQuantile(t *testing.T) {
	inf := math.Inf(+1)
	tests := []struct {
		name string
		q    float64
		h    histogram
		want float64
	}{
		{"empty", 0.5, histogram{[]float64{1, inf}, []float64{0, 0}}, math.NaN()},
		{"only +Inf", 0.5, histogram{[]float64{inf}, []float64{3}}, math.NaN()},
		{"first bucket starts at 0", 0.5, histogram{[]float64{0.1, 0.2, inf}, []float64{4, 4, 4}}, 0.05},
		{"interpolates inside a bucket", 0.5, histogram{[]float64{1, 2, 4, inf}, []float64{2, 9, 18, 20}}, 2 + 2*(1.0/9)},
		{"rank in +Inf: highest finite bound", 0.95, histogram{[]float64{1, 2, 4, inf}, []float64{2, 9, 18, 20}}, 4},
		{"exact bucket edge", 0.5, histogram{[]float64{1, 2, inf}, []float64{5, 10, 10}}, 1},
		{"negative first bound", 0.5, histogram{[]float64{-1, 1, inf}, []float64{5, 10, 10}}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := quantile(tc.q, tc.h)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-12) {
				t.Errorf("quantile(%g) = %g, want %g", tc.q, got, tc.want)
			}
		})
	}
}

// Histograms with different bucket layouts (an older server's, say) still
// add up: each is read at the union of the bounds.
func TestMergeLayouts(t *testing.T) {
	inf := math.Inf(+1)
	got := merge(histogram{[]float64{1, 4, inf}, []float64{1, 3, 4}}, histogram{[]float64{2, inf}, []float64{2, 2}})
	want := histogram{[]float64{1, 2, 4, inf}, []float64{1, 3, 5, 6}}
	if len(got.bounds) != len(want.bounds) {
		t.Fatalf("%+v", got)
	}
	for i := range want.bounds {
		if got.bounds[i] != want.bounds[i] || got.counts[i] != want.counts[i] {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("capstan_gateway_requests_total{endpoint=\"x\" 1\n"), t0); err == nil {
		t.Fatal("want an error")
	}
}

func TestWriteScreenAndPlain(t *testing.T) {
	f := Diff(load(t, "mixed-1.txt", t0), load(t, "mixed-2.txt", t0.Add(4*time.Second)), nil, ByRate)
	var screen, plain strings.Builder
	if err := f.WriteScreen(&screen, "q quits", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.WritePlain(&plain); err != nil {
		t.Fatal(err)
	}
	s := screen.String()
	if !strings.HasPrefix(s, ClearHome+"2026-01-02T03:04:09Z") || !strings.HasSuffix(s, "\r\n\r\nq quits\r\n") || strings.Contains(strings.ReplaceAll(s, "\r\n", ""), "\n") {
		t.Errorf("screen: %q", s)
	}
	p := plain.String()
	if strings.Contains(p, "\x1b") || strings.Contains(p, "\r") || !strings.HasSuffix(p, "\n\n") || strings.Count(p, "\n") != len(f.Lines())+1 {
		t.Errorf("plain: %q", p)
	}
}

var update = flag.Bool("update", false, "rewrite the sample output in docs/top.md")

// docPath is the page whose sample output TestDocSample holds equal to
// what top renders.
const docPath = "../../docs/top.md"

// sampleBlock matches the ```text block that follows the sample's
// introduction in docs/top.md.
var sampleBlock = regexp.MustCompile("(?s)(<!-- sample: internal/top TestDocSample -->\n```text\n)(.*?)(```)")

// TestDocSample: the sample output in docs/top.md is what top prints over a
// pipe for the mixed-* scrapes taken 2 s apart; a change to the format fails
// here until the page is regenerated (go test ./internal/top -run DocSample
// -update).
func TestDocSample(t *testing.T) {
	routes := map[Deployment]string{{Kind: "InferenceEndpointConfig", Namespace: "team-b", Name: "qwen"}: "qwen-chat"}
	var b strings.Builder
	if err := Diff(load(t, "mixed-1.txt", t0), load(t, "mixed-2.txt", t0.Add(2*time.Second)), routes, ByName).WritePlain(&b); err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(b.String(), "\n") // the block's own end
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	m := sampleBlock.FindSubmatchIndex(raw)
	if m == nil {
		t.Fatalf("%s has no sample block (<!-- sample: internal/top TestDocSample --> then ```text)", docPath)
	}
	if got := string(raw[m[4]:m[5]]); got != want {
		if *update {
			out := append(append(append([]byte{}, raw[:m[4]]...), want...), raw[m[5]:]...)
			if err := os.WriteFile(docPath, out, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the sample in %s drifted from the output; rerun with -update.\ngot in doc:\n%s\nrendered:\n%s", docPath, got, want)
	}
}

// A small terminal gets what fits: lines cut at its width, rows beyond its
// height counted instead of shown.
func TestWriteScreenFits(t *testing.T) {
	f := Diff(load(t, "mixed-1.txt", t0), load(t, "mixed-2.txt", t0.Add(4*time.Second)), nil, ByRate)
	tests := []struct {
		name          string
		width, height int
		want          []string
	}{
		{"roomy", 200, 50, append(f.Lines(), "", "q quits")},
		{"short", 200, 7, append(f.Lines()[:3:3], "… 4 more (make the terminal taller)", "", "q quits")},
		{"tiny keeps the header", 200, 2, append(f.Lines()[:2:2], "… 5 more (make the terminal taller)", "", "q quits")},
		{"narrow", 20, 50, func() []string {
			var out []string
			for _, l := range append(f.Lines(), "", "q quits") {
				if r := []rune(l); len(r) > 20 {
					l = string(r[:20])
				}
				out = append(out, l)
			}
			return out
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := f.WriteScreen(&b, "q quits", tc.width, tc.height); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(strings.TrimPrefix(b.String(), ClearHome), "\r\n"), "\r\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
