// Package appautoscaling owns capstan's Application Auto Scaling API for
// SageMaker endpoint variants and the target-tracking controller behind it.
//
// The API speaks AWS JSON 1.1 (POST /, X-Amz-Target:
// AnyScaleFrontendService.<Operation>) so that `aws application-autoscaling
// --endpoint-url` and the AWS SDKs work unchanged: RegisterScalableTarget,
// DescribeScalableTargets, DeregisterScalableTarget, PutScalingPolicy
// (TargetTrackingScaling only), DescribeScalingPolicies, DeleteScalingPolicy
// and DescribeScalingActivities. Only ServiceNamespace "sagemaker" with
// ResourceId "endpoint/<name>/variant/<variant>" and ScalableDimension
// "sagemaker:variant:DesiredInstanceCount" is served. Targets, policies and
// scaling activities live in the bbolt store under this package's own buckets.
//
// The Controller evaluates every target-tracking policy once per Interval on
// the injected clock, the way CloudWatch evaluates the two alarms AWS creates
// for a target-tracking policy: the "high" alarm fires after ScaleOutDatapoints
// consecutive one-minute datapoints above the target, the "low" alarm after
// ScaleInDatapoints consecutive datapoints below 90% of it. The new capacity is
// ceil(current × metric / target), clamped to [MinCapacity, MaxCapacity] and
// to the variant's reservation (Variants.Variant's limit), and applied through
// Variants.SetDesired. Scale-out respects ScaleOutCooldown; scale-in waits for
// ScaleInCooldown after any scaling activity, needs every policy that may
// scale in to agree, and never happens for DisableScaleIn policies. Every
// action (and every "not scaled" decision) is a scaling activity, a slog line
// with its inputs, and the capstan_appautoscaling_* gauges.
//
// Errors are mapped to the wire in exactly one function (API.toWire).
package appautoscaling
