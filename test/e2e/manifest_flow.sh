#!/usr/bin/env bash
# End-to-end manifest flow against a real S3-compatible server: start moto's
# standalone server, upload model folders (config.json of real models) with the
# aws CLI, start `capstan serve --s3-endpoint`, `capstan apply -f` a manifest
# whose modelSourceConfig points at the bucket, wait for DeploymentComplete,
# invoke it through SageMaker InvokeEndpoint (endpointName registers it) and the
# OpenAI API, see it in ListEndpoints, re-apply unchanged, apply every example
# manifest of examples.md unchanged with kubectl apply, twice
# (internal/manifest/testdata/examples-*.yaml; the MIG ones on ml-cluster's
# groups once update-cluster gives them MIG layouts), then `capstan delete`.
# Needs CAPSTAN_BIN (path to the capstan binary), the aws CLI, moto_server, jq.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${CAPSTAN_BIN:?set CAPSTAN_BIN to the capstan binary}"
for c in aws jq python3; do command -v "$c" >/dev/null || { echo "$c is required" >&2; exit 1; }; done

# lib/serve.sh (sourced below, once moto is up) takes over work, bg_pids and
# the cleanup.
work=$(mktemp -d)
bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- server log (tail)" >&2
  tail -n 60 "$work/server.log" >&2 || true
  exit 1
}

export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_PAGER="" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

# 1. The S3-compatible server and the model folders.
# shellcheck source=lib/moto.sh
source "$(dirname "$0")/lib/moto.sh"
s3cli mb s3://models >/dev/null
for m in tinyllama llama-3.1-8b-instruct qwen2.5-7b-instruct; do
  s3cli cp --recursive --only-show-errors "$here/testdata/models/$m" "s3://models/$m"
done
s3cli ls s3://models/tinyllama/ | grep config.json >/dev/null || { echo "FAIL: upload to moto" >&2; exit 1; }
echo "moto S3 at $s3 with 3 model folders"

# 2. capstan serve with the S3 endpoint configured.
serve_args=(--s3-endpoint "$s3")
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
export CAPSTAN_SERVER=$url
cap() { "$CAPSTAN_BIN" "$@"; }

# wait_state KIND NAME STATE
wait_state() {
  local kind=$1 name=$2 want=$3 s=""
  for _ in $(seq 1 240); do
    s=$(cap get "$kind" "$name" -o json 2>/dev/null | jq -r '.status.state // ""') || true
    [ "$s" = "$want" ] && return 0
    [ "$s" = DeploymentFailed ] && fail "$kind/$name DeploymentFailed: $(cap get "$kind" "$name" -o json | jq -c .status)"
    sleep 0.25
  done
  fail "$kind/$name not $want (last: $s)"
}

# 3. Apply the S3-backed manifest and serve it.
manifest="$here/testdata/manifest-flow.yaml"
out=$(cap apply -f "$manifest" 2>&1) || fail "apply: $out"
grep -q created <<<"$out" || fail "first apply did not create: $out"
wait_state iec mf-demo DeploymentComplete
cap get iec mf-demo -o json >"$work/mf.json"
[ "$(jq -r '.status.replicas // 0' "$work/mf.json")" -ge 1 ] || fail "no replica: $(jq -c .status "$work/mf.json")"
cap describe iec mf-demo >"$work/describe.txt" 2>&1 || fail "describe: $(cat "$work/describe.txt")"
echo "mf-demo DeploymentComplete"

# SageMaker InvokeEndpoint: the body goes to the container's invocationEndpoint
# (v1/chat/completions).
echo '{"messages":[{"role":"user","content":"What is a GPU?"}],"max_tokens":8}' >"$work/in.json"
smr invoke-endpoint --endpoint-name mf-demo --body "fileb://$work/in.json" \
  --content-type application/json "$work/out.json" >"$work/invoke.json" 2>"$work/invoke.err" ||
  fail "invoke-endpoint: $(cat "$work/invoke.err")"
jq -e '.choices[0].message.content | length > 0' "$work/out.json" >/dev/null ||
  fail "invoke-endpoint answered: $(head -c 400 "$work/out.json")"
echo "InvokeEndpoint: $(jq -c '.choices[0].message.content' "$work/out.json")"

# The OpenAI API: the gateway routes on the model name.
code=$(curl -sS -o "$work/openai.json" -w '%{http_code}' "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"mf-demo","messages":[{"role":"user","content":"Hello"}],"max_tokens":8}')
[ "$code" = 200 ] || fail "OpenAI API: HTTP $code $(head -c 400 "$work/openai.json")"
jq -e '.choices[0].message.content | length > 0' "$work/openai.json" >/dev/null || fail "OpenAI API answered: $(head -c 400 "$work/openai.json")"
echo "OpenAI API: $(jq -c '.usage' "$work/openai.json")"

sm list-endpoints --query 'Endpoints[].EndpointName' --output text | tr '\t' '\n' | grep -x mf-demo >/dev/null ||
  fail "list-endpoints lacks mf-demo: $(sm list-endpoints)"
[ "$(sm describe-endpoint --endpoint-name mf-demo --query EndpointStatus --output text)" = InService ] ||
  fail "mf-demo not InService: $(sm describe-endpoint --endpoint-name mf-demo)"
echo "ListEndpoints shows mf-demo InService"

# 4. Re-applying the unchanged manifest changes nothing.
gen=$(jq -r '.metadata.generation // 0' "$work/mf.json")
out=$(cap apply -f "$manifest" 2>&1) || fail "re-apply: $out"
grep -q unchanged <<<"$out" || fail "re-apply not unchanged: $out"
[ "$(cap get iec mf-demo -o json | jq -r '.metadata.generation // 0')" = "$gen" ] || fail "re-apply bumped the generation"
echo "re-apply: unchanged"

# 5. Every example manifest of examples.md, unchanged. The MIG ones need
# partitioned GPUs: ml-cluster's p4d group is cut 7g.40gb and its p5en group
# 3g.71gb + 4g.71gb through update-cluster (the nvidia.com/mig.config label,
# as on HyperPod); the group's nodes are replaced with the new layout.
advance() { cap clock advance "$1" --server "$url" >/dev/null || fail "clock advance $1"; }
role="arn:aws:iam::000000000000:role/capstan-default-cluster"
sm update-cluster --cluster-name ml-cluster --instance-groups '[
  {"InstanceGroupName":"p4d-24xlarge","InstanceType":"ml.p4d.24xlarge","InstanceCount":2,"ExecutionRole":"'"$role"'",
   "KubernetesConfig":{"Labels":{"nvidia.com/mig.config":"all-7g.40gb"}}},
  {"InstanceGroupName":"p5en-48xlarge","InstanceType":"ml.p5en.48xlarge","InstanceCount":2,"ExecutionRole":"'"$role"'",
   "KubernetesConfig":{"Labels":{"nvidia.com/mig.config":"mixed-1-3g.71gb-1-4g.71gb"}}}]' >/dev/null || fail "update-cluster MIG layouts"
for _ in $(seq 1 40); do
  [ "$(sm describe-cluster --cluster-name ml-cluster --query ClusterStatus --output text)" = InService ] && break
  advance 1m
  sleep 0.25
done
[ "$(sm describe-cluster --cluster-name ml-cluster --query ClusterStatus --output text)" = InService ] ||
  fail "ml-cluster not InService after the layout change: $(sm describe-cluster --cluster-name ml-cluster)"
echo "ml-cluster: p4d cut all-7g.40gb, p5en cut 3g.71gb + 4g.71gb"

# The examples go in with kubectl, as the HyperPod guide applies them:
# created, then unchanged.
kubectl_bin=kubectl
if [ -n "${CAPSTAN_K8S_BIN:-}" ] && [ -x "$CAPSTAN_K8S_BIN/kubectl" ]; then
  kubectl_bin="$CAPSTAN_K8S_BIN/kubectl"
fi
cap kubeconfig >"$work/kubeconfig"
examples=("$repo"/internal/manifest/testdata/examples-*.yaml)
[ "${#examples[@]}" -ge 3 ] || fail "expected the examples.md manifests in internal/manifest/testdata, found ${examples[*]}"
for f in "${examples[@]}"; do
  base=$(basename "$f")
  out=$("$kubectl_bin" --kubeconfig "$work/kubeconfig" apply -f "$f" 2>&1) || fail "$base: kubectl apply: $out"
  grep -q ' created$' <<<"$out" || fail "$base: not created: $out"
  out=$("$kubectl_bin" --kubeconfig "$work/kubeconfig" apply -f "$f" 2>&1) || fail "$base: kubectl apply again: $out"
  grep -q ' unchanged$' <<<"$out" || fail "$base: not unchanged the second time: $out"
  echo "$base: kubectl apply: created, then unchanged"
done
wait_state jsm deepseek DeploymentComplete
wait_state iec qwen-mig DeploymentComplete
cap describe node "$(cap get nodes -o json | jq -r '[.items[] | select(.instanceType=="ml.p5en.48xlarge") | select(any(.slices[]?; .replicaID != null and .replicaID != ""))][0].name')" \
  >"$work/mig-node.txt" 2>&1 || fail "describe the MIG node: $(cat "$work/mig-node.txt")"
grep -q "4g.71gb" "$work/mig-node.txt" || fail "describe node does not show the slice: $(cat "$work/mig-node.txt")"
for ep in deepseek qwen-mig; do
  code=$(curl -sS -o "$work/mig-openai.json" -w '%{http_code}' "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"'"$ep"'","messages":[{"role":"user","content":"Hello"}],"max_tokens":8}')
  [ "$code" = 200 ] || fail "$ep over the OpenAI API: HTTP $code $(head -c 400 "$work/mig-openai.json")"
done
smr invoke-endpoint --endpoint-name qwen-mig --body "fileb://$work/in.json" \
  --content-type application/json "$work/mig-out.json" >/dev/null 2>"$work/invoke.err" || fail "invoke qwen-mig: $(cat "$work/invoke.err")"
jq -e '.choices[0].message.content | length > 0' "$work/mig-out.json" >/dev/null || fail "qwen-mig answered: $(head -c 400 "$work/mig-out.json")"
echo '{"inputs":"What is a GPU slice?","parameters":{"max_new_tokens":8}}' >"$work/tgi.json"
smr invoke-endpoint --endpoint-name deepseek --body "fileb://$work/tgi.json" \
  --content-type application/json "$work/mig-out2.json" >/dev/null 2>"$work/invoke.err" || fail "invoke deepseek: $(cat "$work/invoke.err")"
[ -s "$work/mig-out2.json" ] || fail "deepseek answered nothing"
echo "on MIG slices: deepseek (JumpStartModel, 7g.40gb) and qwen-mig (4g.71gb) deploy and answer"

# 6. Delete.
cap delete -f "$manifest" >"$work/delete.out" 2>&1 || fail "delete: $(cat "$work/delete.out")"
for _ in $(seq 1 120); do
  cap get iec mf-demo >/dev/null 2>&1 || break
  sleep 0.25
done
cap get iec mf-demo >/dev/null 2>&1 && fail "mf-demo still there after delete"
for _ in $(seq 1 120); do
  sm list-endpoints --query 'Endpoints[].EndpointName' --output text | tr '\t' '\n' | grep -x mf-demo >/dev/null || break
  sleep 0.25
done
sm list-endpoints --query 'Endpoints[].EndpointName' --output text | tr '\t' '\n' | grep -x mf-demo >/dev/null &&
  fail "mf-demo still listed after delete"
cap delete jsm deepseek >/dev/null && cap delete iec qwen-mig >/dev/null || fail "delete examples"
cap delete -f "$repo/internal/manifest/testdata/examples-iec-kv-routing.yaml" >/dev/null || fail "delete demo"
echo "manifest flow passed"
