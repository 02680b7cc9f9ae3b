// Package metricstore keeps CloudWatch-style metric data points in memory:
// series named by namespace, metric name and dimensions, each holding
// per-second aggregates (SampleCount, Sum, Minimum, Maximum and a
// mergeable log-bucket histogram for percentiles) on the injected clock.
//
// It is the one store behind the CloudWatch metrics API (package
// cloudwatch) and the cloudWatchTrigger of manifests (package
// autoscale/triggers): both read what the gateway records here.
//
// It owns storage, retention and aggregation only; the wire protocols and
// CloudWatch's validation rules are package cloudwatch's.
package metricstore
