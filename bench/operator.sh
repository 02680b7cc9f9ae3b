#!/usr/bin/env bash
# bench/operator.sh — the operator figures of docs/performance.md: 500
# resources (250 JumpStartModels on A100 MIG slices, 250 MIG
# InferenceEndpointConfigs on H200 slices, the published examples under
# numbered names) created at once on a real control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes with 8
# MIG slices each), until every one is DeploymentComplete with its pod
# running on a node of its instance type. The operator is the real
# `capstan operator` binary in its own process, webhook included; its CPU
# is read from /proc. The bar (issue 21): ≤ 60 s to steady state, ≤ 0.5 CPU
# on average. N=50 for a quick run. Prints one RESULT line.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source bench/lib.sh
export CAPSTAN_OPERATOR_BENCH_N="${N:-500}"
go_k8s_bench SteadyState500
