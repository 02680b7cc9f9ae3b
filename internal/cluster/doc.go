// Package cluster is the pool of nodes that manifest deployments run on,
// across every HyperPod cluster: nodes join when they are ready and leave
// when they go (package hyperpod decides both), and Place bin-packs replicas
// onto the uncordoned nodes of their own cluster by their resource requests
// (GPUs, CPU, memory). Replicas that fit nowhere are recorded as pending,
// which is what the node autoscaler provisions for.
//
// It owns only the bookkeeping of who sits on which node. It starts no
// processes (the runtime does) and knows nothing of manifests, endpoints or
// reservations; the deployment controller calls Place before it starts a
// replica and Release after it stops one, and reschedules the replicas a
// leaving node evicts.
package cluster
