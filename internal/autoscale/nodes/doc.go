// Package nodes is capstan's node autoscaler, with Karpenter's semantics
// (/work/shared/reference/autoscaling.md §4): it owns the decision of which
// nodes to add to a HyperPod cluster for replicas that fit nowhere
// (Provision: batching, bin-packing, cheapest offering with the capacity-type
// preference reserved > spot > on-demand, NodePool limits, the 3-minute
// insufficient-capacity cache) and which managed nodes to take away
// (Consolidate: empty nodes first, then one under-used node whose replicas fit
// elsewhere, within the NodePools' disruption budgets). It also parses the
// NodePool (karpenter.sh/v1) and HyperpodNodeClass
// (karpenter.sagemaker.amazonaws.com/v1) manifests that configure it.
//
// The decisions are pure functions over snapshots; the Controller reads the
// snapshots from a State and acts through an Actuator, both small interfaces
// that the cluster API implements, and reads time only from an injected
// clock.Clock. Karpenter behaviours left out: multi-node and replace
// consolidation, drift, expiry, the 15 s validation delay and budget
// schedules (the parser warns where a manifest asks for them).
package nodes
