package promdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// BenchmarkAppend appends a scrape's worth of samples (1000 series: half
// counters growing steadily, half gauges wandering) per iteration, one
// second apart, and reports the chunks' bytes per sample: what a series
// costs in memory for its retention.
func BenchmarkAppend(b *testing.B) {
	db := NewDB(time.Hour, 2000)
	const series = 1000
	ls := make([]labels.Labels, series)
	for i := range ls {
		ls[i] = labels.FromStrings(labels.MetricName, "m", "i", fmt.Sprint(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		t := int64(n) * 1000
		for i, l := range ls {
			v := float64(n * (i + 1)) // a counter
			if i%2 == 1 {
				v = float64((n*7+i)%50) / 10 // a gauge
			}
			if _, err := db.Append(l, t, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	var bytes, samples int
	for _, list := range db.series {
		for _, s := range list {
			for _, c := range s.chunks {
				bytes += len(c.c.Bytes())
				samples += c.c.NumSamples()
			}
		}
	}
	if samples > 0 {
		b.ReportMetric(float64(bytes)/float64(samples), "bytes/sample")
	}
}

// BenchmarkRangeQuery evaluates a dashboard-shaped query (a sum of rates by
// one label) over an hour of 1000 series scraped every 5 s, at Grafana's
// resolution for a 1 h panel (a point every 10 s).
func BenchmarkRangeQuery(b *testing.B) {
	db := NewDB(2*time.Hour, 2000)
	start := t0
	for n := 0; n < 720; n++ {
		t := start.Add(time.Duration(n) * 5 * time.Second).UnixMilli()
		for i := 0; i < 1000; i++ {
			l := labels.FromStrings(labels.MetricName, "capstan_gateway_requests_total", "endpoint", fmt.Sprint("ep", i%20), "replica", fmt.Sprint(i))
			if _, err := db.Append(l, t, float64(n*i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	api := NewAPI(db, nil)
	end := start.Add(time.Hour)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		q, err := api.engine.NewRangeQuery(context.Background(), db, nil, `sum by (endpoint) (rate(capstan_gateway_requests_total[20s]))`, start, end, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if res := q.Exec(context.Background()); res.Err != nil {
			b.Fatal(res.Err)
		}
		q.Close()
	}
}
