// Package triggers turns a manifest autoScalingSpec into an autoscale.Config
// and the autoscale.Triggers the deployment controller feeds its Scaler:
//
//   - prometheusTrigger: an instant PromQL query against any
//     Prometheus-compatible server, with KEDA's prometheus scaler semantics
//     (one series or a scalar; more than one series is an error; an empty
//     result reads 0, KEDA's ignoreNullValues default).
//   - cloudWatchTrigger in namespace AWS/SageMaker: SageMaker's endpoint
//     metrics (Invocations, InvocationsPerInstance, ModelLatency,
//     OverheadLatency, the error counts, ConcurrentRequestsPerModel) read by
//     CloudWatchReader from the metric store the gateway records into
//     (package metricstore), over the metric collection period — exactly
//     what the CloudWatch metrics API serves for the same query.
//   - cloudWatchTrigger in namespace capstan: the built-in triggers
//     QueueDepth, InFlightPerReplica, KVCacheUtilization, TimeToFirstToken
//     and ArrivalRate, from the same store.
//
// Every cloudWatchTrigger reads in-memory numbers, so it is an
// autoscale.Peeker: the controller may read it between polls.
//
// It owns the mapping only: the HPA/KEDA arithmetic is package autoscale's,
// and the live numbers from a Source (the gateway and its metric store). See
// docs/autoscaling.md for the field mapping and metric table.
package triggers
