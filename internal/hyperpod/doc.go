// Package hyperpod owns HyperPod clusters and their nodes: the records the
// SageMaker cluster operations (CreateCluster … BatchDeleteClusterNodes)
// read and write, and the controller that makes nodes come and go.
//
// A cluster is instance groups; each group's nodes come from the capacity
// calendar (on-demand or spot from the fleet, reserved from a training plan
// that targets hyperpod-cluster) through placement's seams. A launched node
// is Pending for its instance type's launch time and then Running, when it
// joins the node pool (package cluster) that deployments are placed on. A
// node that leaves (scale-in, consolidation, a spot interruption, its plan's
// end, a failure) leaves the pool first, which evicts its replicas; their
// controller reschedules them.
//
// It words nothing for a wire: the sagemaker package maps its errors and
// shapes. It decides no autoscaling: the node autoscaler (autoscale/nodes)
// calls AddNodes and DeleteNodes like any other client.
package hyperpod
