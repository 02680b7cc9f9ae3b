// Package autoscale owns the replica-count arithmetic of capstan's autoscaler:
// the Kubernetes HPA algorithm (per-metric proposals, tolerance, max over
// metrics, stabilisation windows, rate-limit policies, min/max clamps) and the
// KEDA layer on top of it (activation 0 ↔ 1, cooldown before scaling to zero,
// the initial cooldown after creation, and fallback on trigger errors).
//
// It is a pure library: no HTTP, no metric clients, no goroutines. A controller
// owns one Scaler per deployment, feeds it Triggers (Prometheus queries,
// CloudWatch-style metrics, built-in queue depth or KV utilisation — each a
// small implementation of Trigger, built from a manifest by the subpackage
// triggers) and calls Scaler.Reconcile every polling
// interval with the current replica count; the returned Decision says what to
// set and why, for logging and metrics. Time is read only from the injected
// clock.Clock so tests step it with clock.NewFake.
//
// The semantics follow /work/shared/reference/autoscaling.md §1 (HPA) and §2
// (KEDA) and the HyperPod autoScalingSpec defaults (hyperpod-inference-crds.md
// §4); comments cite the upstream function each step mirrors.
package autoscale
