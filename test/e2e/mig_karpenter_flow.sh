#!/usr/bin/env bash
# End-to-end MIG under Karpenter, in the HyperPod guide's order, with the
# real aws CLI and capstan's CLI against `capstan serve --dev-clock`
# (docs/mig.md#node-autoscaling):
#   - turn Karpenter on for the default cluster (the guide's command);
#   - add a p5 group of one node whose nvidia.com/mig.config label is
#     all-1g.10gb (update-cluster);
#   - apply a JumpStartModel that asks for a mig-1g.10gb slice on
#     ml.p5.48xlarge and scales 0..2: it lands on a slice of that group's
#     node (launched for it when the hand-added node was already
#     consolidated away), and answers;
#   - idle, it scales to zero and the p5 node is consolidated away;
#   - the next request brings a partitioned node and the replica back on a
#     slice, and is answered.
# Needs CAPSTAN_BIN, jq. About a minute.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cat >"$work/capstan.yaml" <<'YAML'
cluster:
  launchTime: 2s
  spot: {meanTimeToInterruption: -1s}
YAML
serve_args=(--config "$work/capstan.yaml")
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
command -v jq >/dev/null || fail "jq is required"
export CAPSTAN_SERVER=$url
cap() { "$CAPSTAN_BIN" "$@"; }
role=arn:aws:iam::000000000000:role/hyperpod-exec
p5_nodes() { cap get nodes --cluster ml-cluster -o json | jq '[.items[] | select(.instanceType=="ml.p5.48xlarge")] | length'; }
replicas() { cap get jsm mig-flow -o json | jq -r '.status.replicas // 0'; }

# --- 1. Karpenter on (the guide's command, with --endpoint-url)
aws sagemaker update-cluster --endpoint-url "$url" --cluster-name ml-cluster \
  --auto-scaling '{ "Mode": "Enable", "AutoScalerType": "Karpenter" }' --cluster-role "$role" >/dev/null ||
  fail "update-cluster --auto-scaling"
echo "Karpenter on for ml-cluster"

# --- 2. a p5 group of one node split into 1g.10gb slices
sm update-cluster --cluster-name ml-cluster --instance-groups "[{\"InstanceGroupName\":\"p5-mig\",
  \"InstanceType\":\"ml.p5.48xlarge\",\"InstanceCount\":1,\"ExecutionRole\":\"$role\",
  \"LifeCycleConfig\":{\"SourceS3Uri\":\"s3://bucket/lc/\",\"OnCreate\":\"on_create.sh\"},
  \"KubernetesConfig\":{\"Labels\":{\"nvidia.com/mig.config\":\"all-1g.10gb\"}}}]" >/dev/null ||
  fail "update-cluster --instance-groups"
echo "p5-mig group added with nvidia.com/mig.config=all-1g.10gb"

# --- 3. a JumpStartModel on a mig-1g.10gb slice
cap apply -f "$here/testdata/mig-karpenter.yaml" >/dev/null || fail "apply"
for _ in $(seq 1 240); do
  [ "$(cap get jsm mig-flow -o json | jq -r '.status.state')" = DeploymentComplete ] && break
  sleep 0.25
done
[ "$(cap get jsm mig-flow -o json | jq -r '.status.state')" = DeploymentComplete ] ||
  fail "mig-flow not deployed: $(cap describe jsm mig-flow)"
invoke() {
  curl -s --fail-with-body --max-time 180 "$url/v1/chat/completions" \
    -d '{"model":"mig-flow","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' >"$work/answer.json" ||
    fail "invoke: $(cat "$work/answer.json")"
  jq -e '.choices[0].message.content | length > 0' "$work/answer.json" >/dev/null || fail "no answer: $(cat "$work/answer.json")"
}
invoke
# The p5 node that holds the replica (another may be launching or leaving:
# the provisioner may launch for the replica before the group's own node
# shows, and the empty one is consolidated).
holder() {
  local n
  for n in $(cap get nodes --cluster ml-cluster -o json | jq -r '.items[] | select(.instanceType=="ml.p5.48xlarge" and .status=="Running") | .name'); do
    cap describe node "$n" >"$work/node.txt" 2>/dev/null || continue
    grep -q "jsm.default.mig-flow" "$work/node.txt" && { echo "$n"; return; }
  done
}
node=$(holder)
[ -n "$node" ] || fail "no running p5 node holds mig-flow: $(cap get nodes --cluster ml-cluster)"
grep -q "MIG layout: all-1g.10gb" "$work/node.txt" || fail "$node is not partitioned: $(cat "$work/node.txt")"
echo "mig-flow serves on a 1g.10gb slice of $node"

# --- 4. idle: zero replicas, the p5 node consolidated away
for _ in $(seq 1 480); do
  [ "$(replicas)" = 0 ] && [ "$(p5_nodes)" = 0 ] && break
  sleep 0.25
done
[ "$(replicas)" = 0 ] || fail "replicas did not reach 0: $(cap describe jsm mig-flow)"
[ "$(p5_nodes)" = 0 ] || fail "p5 nodes left at zero replicas: $(cap get nodes --cluster ml-cluster)"
echo "scaled to 0 replicas and 0 p5 nodes"

# --- 5. the next request brings a partitioned node and a slice back
start=$(date +%s%N)
invoke
cold_ms=$(( ($(date +%s%N) - start) / 1000000 ))
node=$(holder)
[ -n "$node" ] && grep -q "MIG layout: all-1g.10gb" "$work/node.txt" ||
  fail "the replica is not back on a slice: $(cap get nodes --cluster ml-cluster)"
echo "cold start from zero p5 nodes: ${cold_ms} ms (node launch 2s + replica start), answered on a slice of $node"

cap delete jsm mig-flow >/dev/null || fail "delete jsm"
echo "MIG under Karpenter flow passed"
