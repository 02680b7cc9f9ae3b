package top

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Header is a frame's first line: when, over what window, and which
// latency the quantile columns show.
func (f Frame) Header() string {
	lat := "TTFT (streamed requests)"
	if f.Latency == LatencyTTFB {
		lat = "TTFB (no streamed requests in the window)"
	}
	return fmt.Sprintf("%s  window %.1fs  latency %s  rows %d",
		f.At.UTC().Format(time.RFC3339), f.Window.Seconds(), lat, len(f.Rows))
}

// columns of the table; right marks the numeric (right-aligned) ones.
var columns = []struct {
	name  string
	right bool
}{
	{"ENDPOINT", false}, {"SOURCE", false}, {"REQ/S", true}, {"%s P50", true}, {"%s P95", true},
	{"REPLICAS", true}, {"KV HIT", true}, {"IN-FLIGHT", true}, {"QUEUED", true},
}

// Lines renders the frame as its header line, a column header and one
// aligned line per row (no line ends).
func (f Frame) Lines() []string {
	cells := [][]string{make([]string, len(columns))}
	for i, c := range columns {
		cells[0][i] = c.name
		if strings.Contains(c.name, "%s") {
			cells[0][i] = fmt.Sprintf(c.name, f.Latency)
		}
	}
	for _, r := range f.Rows {
		cells = append(cells, []string{r.Endpoint, r.Source, fixed(r.Rate, 2), seconds(r.P50), seconds(r.P95),
			ratio(r.Ready, r.Desired), percent(r.KVHit), count(r.InFlight), count(r.Queued)})
	}
	width := make([]int, len(columns))
	for _, row := range cells {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	out := []string{f.Header()}
	for _, row := range cells {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if columns[i].right {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

// WritePlain writes the frame as plain lines followed by an empty line:
// one block per refresh, for pipes and files.
func (f Frame) WritePlain(w io.Writer) error {
	_, err := io.WriteString(w, strings.Join(f.Lines(), "\n")+"\n\n")
	return err
}

// ClearHome is the ANSI sequence that moves the cursor home and clears the
// screen.
const ClearHome = "\x1b[H\x1b[2J"

// WriteScreen redraws a terminal with the frame and a footer line, fitted
// to width × height cells when they are known (> 0): long lines are cut,
// and rows that do not fit give way to a line saying how many are hidden.
// Lines end in CR LF: the terminal is in raw mode while top reads keys.
func (f Frame) WriteScreen(w io.Writer, footer string, width, height int) error {
	lines := f.Lines()
	if room := height - 3; height > 0 && len(lines) > room { // footer, its gap, the cursor's line
		keep := max(room-1, 2) // header and column names stay
		hidden := len(lines) - keep
		lines = append(lines[:keep:keep], fmt.Sprintf("… %d more (make the terminal taller)", hidden))
	}
	if footer != "" {
		lines = append(lines, "", footer)
	}
	if width > 0 {
		for i, l := range lines {
			if r := []rune(l); len(r) > width {
				lines[i] = string(r[:width])
			}
		}
	}
	_, err := io.WriteString(w, ClearHome+strings.Join(lines, "\r\n")+"\r\n")
	return err
}

func fixed(v float64, prec int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// seconds prints a latency in ms below a second, else in s.
func seconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v < 1:
		return strconv.FormatFloat(v*1000, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(v, 'f', 2, 64) + "s"
	}
}

func ratio(ready, desired float64) string {
	if math.IsNaN(ready) || math.IsNaN(desired) {
		return "-"
	}
	return count(ready) + "/" + count(desired)
}

func percent(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v*100, 'f', 0, 64) + "%"
}

func count(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
