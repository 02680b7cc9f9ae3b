package metricstore

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// histogramBase is the ratio between successive histogram bucket bounds:
// a percentile is the geometric middle of its bucket, so it is exact to
// about 1 % (√1.02 − 1).
const histogramBase = 1.02

var logBase = math.Log(histogramBase)

// zeroBucket is the histogram key of zero and negative samples.
const zeroBucket = math.MinInt32

// Aggregate summarises the samples of one period.
type Aggregate struct {
	Start                      time.Time
	SampleCount, Sum, Min, Max float64
	// hist counts samples by log bucket (index → count); zero and negative
	// samples count under the key zeroBucket.
	hist map[int32]float64
}

func bucketOf(v float64) int32 {
	if v <= 0 {
		return zeroBucket
	}
	return int32(math.Floor(math.Log(v) / logBase))
}

// Merge adds b's samples to a (a's Start is kept): the aggregate of two
// periods, or of one period of several series.
func (a *Aggregate) Merge(b Aggregate) {
	if b.SampleCount == 0 {
		return
	}
	a.minMax(b.SampleCount, b.Sum, b.Min, b.Max)
	if a.hist == nil {
		a.hist = make(map[int32]float64, len(b.hist))
	}
	for k, n := range b.hist {
		a.hist[k] += n
	}
}

func (a *Aggregate) minMax(n, sum, lo, hi float64) {
	if a.SampleCount == 0 || lo < a.Min {
		a.Min = lo
	}
	if a.SampleCount == 0 || hi > a.Max {
		a.Max = hi
	}
	a.SampleCount += n
	a.Sum += sum
}

// mergeAgg adds a stored aggregate.
func (a *Aggregate) mergeAgg(b *agg) {
	if b.n == 0 {
		return
	}
	a.minMax(b.n, b.sum, b.min, b.max)
	if a.hist == nil {
		a.hist = map[int32]float64{}
	}
	a.hist[b.b0.k] += float64(b.b0.n)
	for _, x := range b.more {
		a.hist[x.k] += float64(x.n)
	}
}

// Average is Sum / SampleCount (0 without samples).
func (a Aggregate) Average() float64 {
	if a.SampleCount == 0 {
		return 0
	}
	return a.Sum / a.SampleCount
}

// Percentile returns the p-th percentile (0 < p < 100) of the samples
// (nearest rank), the geometric middle of its histogram bucket clamped to
// [Min, Max]: within about 1 % of the exact sample.
func (a Aggregate) Percentile(p float64) float64 {
	if a.SampleCount == 0 {
		return 0
	}
	keys := make([]int32, 0, len(a.hist))
	for k := range a.hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := math.Max(1, math.Ceil(p/100*a.SampleCount))
	var seen float64
	v := a.Max
	for _, k := range keys {
		seen += a.hist[k]
		if seen >= rank {
			if k == zeroBucket {
				v = math.Min(0, a.Max)
			} else {
				v = math.Pow(histogramBase, float64(k)+0.5)
			}
			break
		}
	}
	return math.Max(a.Min, math.Min(a.Max, v))
}

// ParsePercentile parses a CloudWatch percentile statistic, "p90" or
// "p99.9", into its percent (0 < p < 100).
func ParsePercentile(stat string) (float64, bool) {
	if len(stat) < 2 || stat[0] != 'p' {
		return 0, false
	}
	p, err := strconv.ParseFloat(stat[1:], 64)
	if err != nil || !(p > 0 && p < 100) || strings.ContainsAny(stat[1:], "eE+-xX_") {
		return 0, false
	}
	return p, true
}

// StatisticNames are the CloudWatch statistic names Value knows besides pNN.
var StatisticNames = []string{"SampleCount", "Average", "Sum", "Minimum", "Maximum"}

// Value returns the named statistic: SampleCount, Average, Sum, Minimum,
// Maximum or a percentile pNN (see ParsePercentile).
func (a Aggregate) Value(stat string) (float64, error) {
	switch stat {
	case "SampleCount":
		return a.SampleCount, nil
	case "Average":
		return a.Average(), nil
	case "Sum":
		return a.Sum, nil
	case "Minimum":
		return a.Min, nil
	case "Maximum":
		return a.Max, nil
	}
	if p, ok := ParsePercentile(stat); ok {
		return a.Percentile(p), nil
	}
	return 0, fmt.Errorf("metricstore: unknown statistic %q (want one of %s or pNN with 0 < NN < 100)", stat, strings.Join(StatisticNames, ", "))
}

// bin is one histogram bucket of a stored aggregate.
type bin struct {
	k int32
	n uint32
}

// agg is one stored aggregate (a second or a minute). It is kept small:
// most seconds of a series hold one histogram bucket (a gauge, a count of
// 1), which lives inline without an allocation.
type agg struct {
	t                int64 // start, unix seconds
	n, sum, min, max float64
	b0               bin // the first bucket (b0.n == 0: none yet)
	more             []bin
}

func (a *agg) add(v float64) {
	if a.n == 0 || v < a.min {
		a.min = v
	}
	if a.n == 0 || v > a.max {
		a.max = v
	}
	a.n++
	a.sum += v
	a.addBin(bucketOf(v), 1)
}

func (a *agg) addBin(k int32, n uint32) {
	if a.b0.n == 0 {
		a.b0 = bin{k, n}
		return
	}
	if a.b0.k == k {
		a.b0.n += n
		return
	}
	for i := range a.more {
		if a.more[i].k == k {
			a.more[i].n += n
			return
		}
	}
	a.more = append(a.more, bin{k, n})
}

func (a *agg) merge(b *agg) {
	if b.n == 0 {
		return
	}
	if a.n == 0 || b.min < a.min {
		a.min = b.min
	}
	if a.n == 0 || b.max > a.max {
		a.max = b.max
	}
	a.n += b.n
	a.sum += b.sum
	a.addBin(b.b0.k, b.b0.n)
	for _, x := range b.more {
		a.addBin(x.k, x.n)
	}
}
