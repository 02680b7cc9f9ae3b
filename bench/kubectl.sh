#!/usr/bin/env bash
# bench/kubectl.sh — the kubectl figures of docs/performance.md: the same
# kubectl commands against `capstan serve` and against the operator's real
# kube-apiserver (etcd, the CRDs, the webhook and the operator), in one run:
# `kubectl apply -f` of one file of 500 JumpStartModels (created), the same
# file again (unchanged), and `kubectl get jsm -A` over them. Prints one
# RESULT line per command with both times in seconds and their ratio.
# N=50 for a quick run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source bench/lib.sh
export CAPSTAN_KUBECTL_BENCH_N="${N:-500}"
go_k8s_bench Kubectl500
