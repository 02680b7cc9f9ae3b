// Package nodeapi is the administrative HTTP surface of nodes: it stores the
// Karpenter NodePool and HyperPod HyperpodNodeClass manifests that
// `capstan apply` sends, and shows clusters and nodes to `capstan get` and
// `capstan describe` (with the pool's allocations), and takes the
// fault-injection call behind `capstan node fail`.
//
// It answers in Kubernetes' shapes (lists with items, Status errors) like
// the manifests API, so the CLI reads both the same way. The SageMaker
// cluster operations are the sagemaker package's; this package adds what
// SageMaker has no call for.
package nodeapi
