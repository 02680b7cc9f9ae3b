// Package workspace owns the kinds of HyperPod spaces, apiVersion
// workspace.jupyter.org/v1alpha1: Workspace (an interactive development
// environment such as JupyterLab, created from a template) and
// WorkspaceTemplate (its defaults and the ranges a workspace may ask for).
// It holds their Go types, strict decoding with field paths, defaulting, the
// checks a workspace needs against its template, and the two templates
// SageMaker provides by default.
//
// Field names follow the open-source jupyter-k8s operator that HyperPod
// spaces run on. Fields capstan accepts but cannot honour on one machine
// (pod security contexts, affinity, volumes from PVCs…) are listed by
// Ignored, so the API answers them with a warning instead of a silent
// no-op.
//
// Like package manifest it is a pure library: no store, process or network.
package workspace
