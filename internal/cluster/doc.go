// Package cluster is the HyperPod-style pool of nodes that manifest
// deployments run on: instance groups (an instance type and a count) become
// nodes whose capacity comes from the catalog, and Place bin-packs replicas
// onto them by their resource requests (GPUs, CPU, memory).
//
// It owns only the bookkeeping of who sits on which node. It starts no
// processes (the runtime does) and knows nothing of manifests, endpoints or
// reservations; the deployment controller calls Place before it starts a
// replica and Release after it stops one.
package cluster
