// Package metricstore keeps CloudWatch-style metric data points in memory:
// series named by namespace, metric name and dimensions, each holding
// aggregates (SampleCount, Sum, Minimum, Maximum and a mergeable
// log-bucket histogram whose percentiles are exact to about 1 %) on the
// injected clock.
//
// Two tiers, like CloudWatch: per-second aggregates kept for Retention
// (3 h) and per-minute aggregates kept for MinuteRetention (15 days).
// A second is rolled into its minute once the minute is over. Statistics
// answers from seconds when the whole range is within 3 h and the period
// is under a minute or not a multiple of one, else from minutes (reading
// the seconds of a minute that a period or range boundary splits while they
// are kept, so answers within 3 h are exact to the second either way).
//
// Memory is bounded: at most Options.MaxSeries series (Record then returns
// ErrTooManySeries), a series holds only the seconds and minutes that had
// samples within retention, and Run prunes every series on a tick of the
// clock (Prune), forgetting one without a sample for 15 days. A stored
// aggregate is about 72 bytes (plus 8 per extra histogram bucket), so a
// gauge sampled every second holds about 0.8 MB of seconds and, after 15
// days, 1.6 MB of minutes. Handle
// records into one series without building its key: the gateway's
// per-request path allocates nothing.
//
// It is the one store behind the CloudWatch metrics API (package
// cloudwatch), the cloudWatchTrigger of manifests and Application Auto
// Scaling (package autoscale/triggers, CloudWatchReader): all of them read
// what the gateway records here (package gateway, cloudwatch.go).
//
// It owns storage, retention and aggregation only; the metric names are
// the gateway's, and the wire protocols and CloudWatch's validation rules
// are package cloudwatch's.
package metricstore
