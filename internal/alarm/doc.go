// Package alarm owns capstan's alarms: named thresholds on capstan's own
// Prometheus metrics, the stand-in for the CloudWatch alarms a deployment's
// automatic rollback names. An Alarm is configuration (capstan.yaml's
// alarms list, checked by Validate); an Evaluator reads a
// prometheus.Gatherer; Arm snapshots the named alarms' series of one
// endpoint when a deployment starts, and the returned Watch's Check
// re-gathers and compares what changed since with each threshold.
//
// Evaluation is on demand (the caller's reconcile loop decides when), so the
// package needs no clock. It carries no wire wording: protocol packages map
// UnknownAlarmError to their own errors.
package alarm
