package metricstore

import (
	"math"
	"slices"
	"time"
)

// histogramBase is the ratio between successive histogram bucket bounds:
// percentiles are exact to about 1 %.
const histogramBase = 1.02

// Aggregate summarises the samples of one period.
type Aggregate struct {
	Start                      time.Time
	SampleCount, Sum, Min, Max float64
	// hist counts samples by log bucket (index → count); zero and negative
	// samples count under the key math.MinInt32.
	hist map[int32]float64
}

func bucketOf(v float64) int32 {
	if v <= 0 {
		return math.MinInt32
	}
	return int32(math.Floor(math.Log(v) / math.Log(histogramBase)))
}

func (a *Aggregate) add(v float64) {
	if a.SampleCount == 0 || v < a.Min {
		a.Min = v
	}
	if a.SampleCount == 0 || v > a.Max {
		a.Max = v
	}
	a.SampleCount++
	a.Sum += v
	if a.hist == nil {
		a.hist = map[int32]float64{}
	}
	a.hist[bucketOf(v)]++
}

func (a *Aggregate) merge(b *Aggregate) {
	if b.SampleCount == 0 {
		return
	}
	if a.SampleCount == 0 || b.Min < a.Min {
		a.Min = b.Min
	}
	if a.SampleCount == 0 || b.Max > a.Max {
		a.Max = b.Max
	}
	a.SampleCount += b.SampleCount
	a.Sum += b.Sum
	if a.hist == nil {
		a.hist = map[int32]float64{}
	}
	for k, n := range b.hist {
		a.hist[k] += n
	}
}

// Average is Sum / SampleCount (0 without samples).
func (a Aggregate) Average() float64 {
	if a.SampleCount == 0 {
		return 0
	}
	return a.Sum / a.SampleCount
}

// Percentile returns the p-th percentile (0 < p < 100) of the samples,
// the geometric middle of its histogram bucket clamped to [Min, Max].
func (a Aggregate) Percentile(p float64) float64 {
	if a.SampleCount == 0 {
		return 0
	}
	keys := make([]int32, 0, len(a.hist))
	for k := range a.hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := math.Ceil(p / 100 * a.SampleCount)
	var seen float64
	v := a.Max
	for _, k := range keys {
		seen += a.hist[k]
		if seen >= rank {
			if k == math.MinInt32 {
				v = math.Min(0, a.Max)
			} else {
				v = math.Pow(histogramBase, float64(k)+0.5)
			}
			break
		}
	}
	return math.Max(a.Min, math.Min(a.Max, v))
}
