// Package promdb is capstan's own Prometheus, for the console's dashboards
// on a machine with nothing else installed.
//
// A Scraper reads capstan serve's registry and every ready replica's
// /metrics (the targets of package observability's service discovery, with
// the same labels and the same renames of each engine's series to the
// catalog's names as the generated prometheus.yml) on a tick of the
// injected clock, and appends the samples to a DB. The DB keeps each series
// in memory as Prometheus' own compressed XOR chunks for a retention (3 h
// by default), at most a number of series (10000 by default), and
// writes a staleness marker when a series or a target disappears, as
// Prometheus does. Queries run on Prometheus' PromQL engine; API serves the
// Prometheus HTTP API's read endpoints (query, query_range, labels, label
// values, series) in its JSON shapes, so the console, promtool or a Grafana
// datasource read it alike.
//
// BenchmarkAppend measures the chunks' bytes a sample (5.4 on its mix of
// steadily growing counters and wandering gauges; a constant series costs
// well under 1), so the defaults bound the samples to about 10000 series ×
// 2160 samples (3 h at 5 s) × 5.4 B ≈ 117 MB.
//
// It owns scraping, storage and the query API only; the dashboards' queries
// are package dashboards', the metric names package metrics'.
package promdb
