// Package spaces runs HyperPod spaces: Workspaces (package workspace) as
// processes on the cluster's nodes. It stores workspaces and their
// templates (with SageMaker's two templates present by default), checks a
// workspace against its template and its cluster when it is applied,
// places it on a node through the same pool as the deployments' replicas
// (package cluster: GPUs and MIG slices are counted once for both, and a
// space that fits nowhere is pending for the node autoscaler like a
// replica), and runs the template's program there: Jupyter by default, in
// the space's own home directory under the data dir, with a token capstan
// makes at each start and its proxy sends, and an environment that says
// which GPUs or MIG slice the space holds.
//
// Stopping a space (desiredStatus: Stopped, or idle shutdown after the
// configured time without activity in the Jupyter server) ends the process
// and frees its slice but keeps its files; Running brings it back with them;
// deleting it removes both. Every process a space starts carries
// CAPSTAN_SPACES_DIR in its environment, so after a crash of capstan
// (kill -9) the next start finds and kills whatever is left, kernels
// included, before it starts anything.
//
// It serves no HTTP: package manifestapi serves the resources and package
// spaceproxy the spaces themselves.
package spaces
