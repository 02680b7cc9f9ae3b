package top

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Latency says which histogram a frame's quantiles come from.
type Latency string

const (
	// LatencyTTFT: streamed requests' time to the first generated token.
	LatencyTTFT Latency = "TTFT"
	// LatencyTTFB: time to the first response byte, used when no streamed
	// request finished in the window (non-streamed answers record no TTFT).
	LatencyTTFB Latency = "TTFB"
)

// Row is one endpoint or manifest deployment over one window. A NaN float
// is "no data" (rendered "-").
type Row struct {
	// Endpoint is the gateway's endpoint name: the SageMaker endpoint, or
	// the route a manifest deployment serves under.
	Endpoint string
	// Source is "endpoint" for a SageMaker endpoint, else the deployment
	// ("iec/NAMESPACE/NAME", "jsm/NAMESPACE/NAME").
	Source string
	// Rate is finished requests per second over the window.
	Rate float64
	// P50 and P95 are the frame's latency quantiles, in seconds; NaN when
	// no request was observed in the window.
	P50, P95 float64
	// Ready and Desired replicas; NaN when the server does not export them.
	Ready, Desired float64
	// KVHit is the share of prompt tokens served from the KV cache in the
	// window; NaN when no prompt tokens were counted.
	KVHit float64
	// InFlight and Queued are gauges at the later scrape.
	InFlight, Queued float64
}

// Frame is what top shows for one refresh: the rows over the window
// between two scrapes.
type Frame struct {
	At      time.Time     // the later scrape
	Window  time.Duration // between the scrapes
	Latency Latency
	Rows    []Row
}

// Order sorts a frame's rows.
type Order int

const (
	// ByName sorts by endpoint, then source: stable lines for pipes.
	ByName Order = iota
	// ByRate puts the busiest first (the terminal view), then by name.
	ByRate
)

// Diff computes the frame between two scrapes of the same server. routes
// maps a deployment to the endpoint name it serves under (spec's
// endpointName or sageMakerEndpoint.name); a deployment missing from it is
// taken to serve under its own name, which is the default.
func Diff(prev, cur *Scrape, routes map[Deployment]string, order Order) Frame {
	f := Frame{At: cur.At, Window: cur.At.Sub(prev.At), Latency: LatencyTTFT}
	secs := f.Window.Seconds()

	reqs := counterDelta(prev.requests, cur.requests)
	cached := counterDelta(prev.cachedServed, cur.cachedServed)
	tokIn := counterDelta(prev.tokensIn, cur.tokensIn)
	ttft := histogramDelta(prev.ttft, cur.ttft)
	ttfb := histogramDelta(prev.ttfb, cur.ttfb)
	lat := ttft
	if len(ttft) == 0 { // no streamed request finished in the window
		f.Latency, lat = LatencyTTFB, ttfb
	}

	// Every endpoint name the later scrape knows.
	names := map[string]bool{}
	for _, m := range []map[series]float64{cur.requests, cur.cachedServed, cur.tokensIn} {
		for s := range m {
			names[s.owner] = true
		}
	}
	for _, m := range []map[series]histogram{cur.ttft, cur.ttfb} {
		for s := range m {
			names[s.owner] = true
		}
	}
	for _, m := range []map[string]float64{cur.inFlight, cur.queued} {
		for ep := range m {
			names[ep] = true
		}
	}
	for ep := range cur.endpointReplicas {
		names[ep] = true
	}

	row := func(ep, source string) Row {
		r := Row{Endpoint: ep, Source: source, Rate: math.NaN(), P50: math.NaN(), P95: math.NaN(),
			Ready: math.NaN(), Desired: math.NaN(), KVHit: math.NaN(),
			InFlight: cur.inFlight[ep], Queued: cur.queued[ep]}
		if secs > 0 {
			r.Rate = reqs[ep] / secs
		}
		if h, ok := lat[ep]; ok {
			r.P50, r.P95 = quantile(0.5, h), quantile(0.95, h)
		}
		if in := tokIn[ep]; in > 0 {
			r.KVHit = cached[ep] / in
		}
		return r
	}
	for _, d := range cur.Deployments() {
		ep := routes[d]
		if ep == "" {
			ep = d.Name
		}
		delete(names, ep)
		r := row(ep, d.Short())
		rep := cur.deployments[d]
		r.Ready, r.Desired = rep.ready, rep.desired
		f.Rows = append(f.Rows, r)
	}
	for ep := range names {
		r := row(ep, "endpoint")
		if cur.endpointReplicas != nil {
			if rep, ok := cur.endpointReplicas[ep]; ok {
				r.Ready, r.Desired = rep.ready, rep.desired
			}
		}
		f.Rows = append(f.Rows, r)
	}
	slices.SortFunc(f.Rows, func(a, b Row) int {
		if order == ByRate {
			if c := cmp.Compare(zeroNaN(b.Rate), zeroNaN(a.Rate)); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.Source, b.Source))
	})
	return f
}

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// counterDelta is each endpoint's increase: per series the later value
// less the earlier one, or the later value when the series is new or was
// reset (the later value is then all that happened since).
func counterDelta(prev, cur map[series]float64) map[string]float64 {
	out := map[string]float64{}
	for s, v := range cur {
		if p, ok := prev[s]; ok && v >= p {
			v -= p
		}
		out[s.owner] += v
	}
	return out
}

// histogramDelta is each endpoint's bucket increases, summed over its
// series (variants) by upper bound, as histogram_quantile(sum by (le)
// (increase(...))) sees them. A series whose count went down was reset and
// counts whole.
func histogramDelta(prev, cur map[series]histogram) map[string]histogram {
	out := map[string]histogram{}
	for s, h := range cur {
		d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
		if p, ok := prev[s]; ok && slices.Equal(p.bounds, h.bounds) && p.counts[len(p.counts)-1] <= h.counts[len(h.counts)-1] {
			for i := range d.counts {
				d.counts[i] = max(0, d.counts[i]-p.counts[i])
			}
		}
		acc, ok := out[s.owner]
		switch {
		case !ok:
			out[s.owner] = d
		case slices.Equal(acc.bounds, d.bounds):
			for i := range acc.counts {
				acc.counts[i] += d.counts[i]
			}
		default:
			out[s.owner] = merge(acc, d)
		}
	}
	for ep, h := range out {
		if h.counts[len(h.counts)-1] == 0 {
			delete(out, ep) // nothing observed in the window
		}
	}
	return out
}

// merge adds two cumulative histograms with different bucket layouts by
// evaluating each at the union of their bounds (a cumulative count at a
// bound one lacks is its count at the next lower bound it has).
func merge(a, b histogram) histogram {
	bounds := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a.bounds), b.bounds...))))
	at := func(h histogram, ub float64) float64 {
		c := 0.0
		for i, x := range h.bounds {
			if x > ub {
				break
			}
			c = h.counts[i]
		}
		return c
	}
	out := histogram{bounds: bounds, counts: make([]float64, len(bounds))}
	for i, ub := range bounds {
		out.counts[i] = at(a, ub) + at(b, ub)
	}
	return out
}

// quantile is Prometheus' histogram_quantile on cumulative buckets (+Inf
// last): linear interpolation inside the bucket the rank falls in, the
// first bucket starting at 0, and the highest finite bound when the rank
// falls in +Inf. NaN when the histogram is empty.
func quantile(q float64, h histogram) float64 {
	n := len(h.counts)
	if n < 2 || h.counts[n-1] == 0 {
		return math.NaN()
	}
	rank := q * h.counts[n-1]
	b := 0
	for b < n-1 && h.counts[b] < rank {
		b++
	}
	if b == n-1 {
		return h.bounds[n-2]
	}
	if b == 0 && h.bounds[0] <= 0 {
		return h.bounds[0]
	}
	start, end, count := 0.0, h.bounds[b], h.counts[b]
	if b > 0 {
		start = h.bounds[b-1]
		count -= h.counts[b-1]
		rank -= h.counts[b-1]
	}
	if count == 0 {
		return end
	}
	return start + (end-start)*(rank/count)
}
