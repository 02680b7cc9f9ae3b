// Package triggers turns a manifest autoScalingSpec into an autoscale.Config
// and the autoscale.Triggers the deployment controller feeds its Scaler:
//
//   - prometheusTrigger: an instant PromQL query against any
//     Prometheus-compatible server, with KEDA's prometheus scaler semantics
//     (one series or a scalar; more than one series is an error; an empty
//     result reads 0, KEDA's ignoreNullValues default).
//   - cloudWatchTrigger in namespace AWS/SageMaker: SageMaker's endpoint
//     metric names (Invocations, InvocationsPerInstance, ModelLatency, …)
//     computed by CloudWatchReader from deltas of the gateway's cumulative
//     EndpointSnapshot counters over the metric collection period.
//   - cloudWatchTrigger in namespace capstan: the built-in triggers
//     QueueDepth, InFlightPerReplica, KVCacheUtilization, TimeToFirstToken
//     and ArrivalRate.
//
// Every cloudWatchTrigger reads in-memory numbers, so it is an
// autoscale.Peeker: the controller may read it between polls.
//
// It owns the mapping only: the HPA/KEDA arithmetic is package autoscale's,
// and the live numbers come from a Source (the gateway). See
// docs/autoscaling.md for the field mapping and metric table.
package triggers
