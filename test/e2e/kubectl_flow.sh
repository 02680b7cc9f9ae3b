#!/usr/bin/env bash
# kubectl against `capstan serve`: `capstan kubeconfig` writes the context;
# kubectl version, api-resources, apply (twice: the second is unchanged; a
# changed file is configured), apply --server-side (repeated; conflicts
# between field managers; --force-conflicts), create (AlreadyExists the second time), get
# (the CRD's printer columns, -o wide, -o yaml, -o jsonpath, -A, -l), wait
# --for=condition and --for=jsonpath, get -w seeing a scale, scale, patch
# (merge and JSON), label, explain (OpenAPI v3 and v2), describe with the object's events,
# events, get namespaces, get nodes (-L, -l, jsonpath), describe node with
# the replicas' pods, get in chunks
# (limit and continue), the documentation's Workspace (apply, server-side,
# create, patch, wait, status, explain, bad input, delete), the NodePool and
# HyperpodNodeClass of docs/clusters.md, replace of a stale
# read (Conflict), bad input
# (unknown field, a MIG profile the GPU lacks) shown with capstan's field
# messages, a field selector capstan does not support, and delete (waiting
# until the objects are gone).
# Needs CAPSTAN_BIN, and kubectl: CAPSTAN_K8S_BIN/kubectl (test/k8s/binaries.sh
# builds it) or one on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
repo=$(cd "$here/../.." && pwd)
kubectl_bin=kubectl
if [ -n "${CAPSTAN_K8S_BIN:-}" ] && [ -x "$CAPSTAN_K8S_BIN/kubectl" ]; then
  kubectl_bin="$CAPSTAN_K8S_BIN/kubectl"
fi
command -v "$kubectl_bin" >/dev/null || { echo "kubectl is required" >&2; exit 1; }

"$CAPSTAN_BIN" --server "$url" kubeconfig >"$work/kubeconfig"
export KUBECONFIG="$work/kubeconfig"
k() { "$kubectl_bin" "$@"; }

out=$(k version 2>&1) || fail "kubectl version: $out"
grep -q '^Server Version: v1\.[0-9]*\.[0-9]*+capstan' <<<"$out" || fail "kubectl version: $out"
out=$(k api-resources 2>&1)
grep -Eq '^jumpstartmodels +jsm +inference.sagemaker.aws.amazon.com/v1 +true +JumpStartModel' <<<"$out" || fail "api-resources: $out"
echo "kubectl $($kubectl_bin version --client 2>/dev/null | head -1) reads capstan's discovery"

jsm() {
  cat <<EOF
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: $1, labels: {team: $2}}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
  replicas: $3
EOF
}
jsm deepseek a 1 >"$work/deepseek.yaml"
jsm other b 1 >"$work/other.yaml"
out=$(k apply -f "$work/deepseek.yaml")
[ "$out" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek created" ] || fail "apply: $out"
out=$(k apply -f "$work/deepseek.yaml")
[ "$out" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek unchanged" ] || fail "apply again: $out"
out=$(k create -f "$work/other.yaml")
[ "$out" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/other created" ] || fail "create: $out"
out=$(k create -f "$work/other.yaml" 2>&1) && fail "create of an existing object: $out"
grep -q 'AlreadyExists.*jumpstartmodels.inference.sagemaker.aws.amazon.com "other" already exists' <<<"$out" || fail "create again: $out"
echo "kubectl apply (created, unchanged) and create (AlreadyExists the second time)"

out=$(k wait --for=condition=Ready jsm/deepseek --timeout=60s 2>&1) || fail "wait Ready: $out"
out=$(k wait --for=jsonpath='{.status.state}'=DeploymentComplete jsm/other --timeout=60s 2>&1) || fail "wait jsonpath: $out"

out=$(k get jsm)
head -1 <<<"$out" | grep -Eq '^NAME +STATE +REPLICAS +READY +AGE$' || fail "get jsm header: $out"
grep -Eq '^deepseek +DeploymentComplete +1 +1 +[0-9]+s$' <<<"$out" || fail "get jsm row: $out"
out=$(k get jsm -l team=a -o name)
[ "$out" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek" ] || fail "get -l team=a: $out"
out=$(k get jsm -A -o wide)
grep -Eq '^default +other +DeploymentComplete' <<<"$out" || fail "get -A -o wide: $out"
[ "$(k get jsm deepseek -o jsonpath='{.spec.model.modelId}')" = deepseek-llm-r1-distill-qwen-1-5b ] || fail "get -o jsonpath"
out=$(k get jsm deepseek -o yaml)
grep -q '^  uid: ' <<<"$out" || fail "get -o yaml lacks metadata.uid: $out"
echo "kubectl get: printer columns, labels, -A, -o wide/yaml/jsonpath"

out=$(k describe jsm deepseek)
grep -q '^Events:' <<<"$out" || fail "describe has no events: $out"
grep -Eq 'Warning +EngineSimulated +.* +capstan +JumpStart serves deepseek-llm-r1-distill-qwen-1-5b' <<<"$out" || fail "describe events: $out"
out=$(k events --for jsm/deepseek 2>&1) || fail "kubectl events: $out"
grep -q 'JumpStartModel/deepseek' <<<"$out" || fail "kubectl events: $out"
out=$(k get ns -o name)
grep -qx 'namespace/default' <<<"$out" || fail "get ns: $out"
echo "kubectl describe and events show the object's events"

# capstan's cluster nodes as core/v1 Nodes: the instance-type label, GPU
# capacity, and what the replicas hold (deepseek's one GPU on a g5.8xlarge).
out=$(k get nodes -L node.kubernetes.io/instance-type)
head -1 <<<"$out" | grep -Eq '^NAME +STATUS +INSTANCE TYPE +CAPACITY TYPE +GPUS +AGE +INSTANCE-TYPE$' || fail "get nodes header: $out"
grep -Eq '^hyperpod-i-[0-9a-f]+ +Running +ml\.g5\.8xlarge +on-demand +1 ' <<<"$out" || fail "get nodes: $out"
out=$(k get nodes -l node.kubernetes.io/instance-type=ml.g5.8xlarge -o jsonpath='{range .items[*]}{.metadata.annotations.capstan\.dev/allocated}{"\n"}{end}')
grep -q '^nvidia.com/gpu=1,' <<<"$out" || fail "no g5.8xlarge node holds deepseek's GPU: $out"
# What runs there, as pods: describe node lists deepseek's replica and
# what it requests.
node=$(k get pods -l capstan.dev/owner-name=deepseek -o jsonpath='{.items[0].spec.nodeName}')
[ -n "$node" ] || fail "no pod for deepseek: $(k get pods -A -o wide)"
out=$(k describe node "$node")
grep -Eq '^Non-terminated Pods: +\([1-9][0-9]* in total\)' <<<"$out" || fail "describe node lists no pods: $out"
grep -Eq '^ +default +jsm\.default\.deepseek\.r[0-9]+\.0 ' <<<"$out" || fail "describe node lacks deepseek's replica: $out"
grep -Eq '^ +nvidia\.com/gpu +1 +1$' <<<"$out" || fail "describe node's allocated GPUs: $out"
echo "kubectl get nodes: instance types, GPUs and what the replicas hold; describe node lists their pods"

# get -w sees a scale; apply of a changed file, patch and label change it.
k get jsm deepseek -w --output-watch-events --request-timeout=60s >"$work/watch.out" 2>&1 &
watch_pid=$!
bg_pids+=("$watch_pid")
for _ in $(seq 1 100); do grep -q '^ADDED' "$work/watch.out" && break; sleep 0.1; done
out=$(k scale jsm deepseek --replicas=2)
[ "$out" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek scaled" ] || fail "scale: $out"
for _ in $(seq 1 100); do grep -Eq '^MODIFIED +deepseek +[A-Za-z]+ +2 ' "$work/watch.out" && break; sleep 0.1; done
grep -Eq '^MODIFIED +deepseek +[A-Za-z]+ +2 ' "$work/watch.out" || fail "get -w saw no scale to 2 replicas: $(cat "$work/watch.out")"
kill "$watch_pid" 2>/dev/null || true
jsm deepseek a 3 >"$work/deepseek.yaml"
out=$(k apply -f "$work/deepseek.yaml")
[ "$out" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek configured" ] || fail "apply of a change: $out"
[ "$(k get jsm deepseek -o jsonpath='{.spec.replicas}')" = 3 ] || fail "apply did not set 3 replicas"
k patch jsm deepseek --type=merge -p '{"spec":{"replicas":1}}' >/dev/null
k patch jsm other --type=json -p '[{"op":"replace","path":"/spec/replicas","value":2}]' >/dev/null
out=$(k get jsm deepseek other -o jsonpath='{.items[*].spec.replicas}')
[ "$out" = "1 2" ] || fail "patch: replicas $out"
k label jsm other tier=gold >/dev/null
[ "$(k get jsm -l tier=gold -o name)" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/other" ] || fail "label"
out=$(k explain jsm.spec.server)
{ grep -q '^KIND: *JumpStartModel' <<<"$out" && grep -q 'instanceType' <<<"$out"; } || fail "explain: $out"
out=$(k explain jsm.spec.server --output=plaintext-openapiv2)
{ grep -q '^KIND: *JumpStartModel' <<<"$out" && grep -q 'instanceType' <<<"$out"; } || fail "explain from OpenAPI v2: $out"
echo "kubectl get -w sees a scale; apply of a change, patch (merge and JSON), label and explain work"

# Server-side apply: repeated, it changes nothing; another field manager's
# value for a field it owns is a conflict until forced.
jsm ssa c 1 >"$work/ssa.yaml"
out=$(k apply --server-side -f "$work/ssa.yaml")
[ "$out" = "jumpstartmodel.inference.sagemaker.aws.amazon.com/ssa serverside-applied" ] || fail "apply --server-side: $out"
rv=$(k get jsm ssa -o jsonpath='{.metadata.resourceVersion}')
k apply --server-side -f "$work/ssa.yaml" >/dev/null
[ "$(k get jsm ssa -o jsonpath='{.metadata.resourceVersion}')" = "$rv" ] || fail "a repeated server-side apply wrote"
[ "$(k get jsm ssa -o jsonpath='{.metadata.managedFields[0].manager}')" = kubectl ] || fail "managedFields: $(k get jsm ssa -o yaml --show-managed-fields)"
jsm ssa c 2 >"$work/ssa-ops.yaml"
out=$(k apply --server-side --field-manager=ops -f "$work/ssa-ops.yaml" 2>&1) && fail "a conflicting server-side apply went through: $out"
grep -q 'conflict with "kubectl": .spec.replicas' <<<"$out" || fail "server-side apply conflict: $out"
k apply --server-side --field-manager=ops --force-conflicts -f "$work/ssa-ops.yaml" >/dev/null
[ "$(k get jsm ssa -o jsonpath='{.spec.replicas}')" = 2 ] || fail "forced server-side apply"
k delete jsm ssa >/dev/null
# capstan apply records its fields too, under capstan-apply.
jsm byhand c 1 >"$work/byhand.yaml"
"$CAPSTAN_BIN" --server "$url" apply -f "$work/byhand.yaml" >/dev/null
jsm byhand c 2 >"$work/byhand-ssa.yaml"
out=$(k apply --server-side -f "$work/byhand-ssa.yaml" 2>&1) && fail "server-side apply over capstan apply's replicas went through: $out"
grep -q 'conflict with "capstan-apply"' <<<"$out" || fail "server-side apply over capstan apply: $out"
k delete jsm byhand >/dev/null
echo "kubectl apply --server-side: idempotent, conflicts between field managers (capstan apply's too), --force-conflicts"

# A replace of what was read before another write is a conflict.
k get jsm deepseek -o yaml >"$work/read.yaml"
k scale jsm deepseek --replicas=2 >/dev/null
out=$(k replace -f "$work/read.yaml" 2>&1) && fail "replace of a stale read: $out"
grep -q 'Conflict.*Operation cannot be fulfilled on jumpstartmodels.inference.sagemaker.aws.amazon.com "deepseek": the object has been modified' <<<"$out" || fail "stale replace: $out"

# Bad input shows capstan's field messages through kubectl; nothing is stored.
sed 's/^  replicas: 1$/  replicaz: 1/' "$work/other.yaml" >"$work/unknown.yaml"
out=$(k apply -f "$work/unknown.yaml" 2>&1) && fail "an unknown field was accepted: $out"
grep -q 'spec.replicaz: unknown field' <<<"$out" || fail "unknown field: $out"
cat >"$work/mig.yaml" <<'EOF'
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: migbad}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.p4d.24xlarge, acceleratorPartitionType: mig-4g.71gb}
EOF
out=$(k apply -f "$work/mig.yaml" 2>&1) && fail "a MIG profile the GPU lacks was accepted: $out"
grep -q 'spec.server.acceleratorPartitionType: .*unknown MIG profile "mig-4g.71gb" for GPU a100-40gb' <<<"$out" || fail "MIG profile: $out"
out=$(k get jsm migbad 2>&1) && fail "the refused manifest was stored: $out"
out=$(k get jsm --field-selector spec.replicas=1 2>&1) && fail "an unsupported field selector was accepted: $out"
grep -q 'field label not supported: spec.replicas' <<<"$out" || fail "field selector refusal: $out"
echo "kubectl shows a stale replace as Conflict and bad input with capstan's messages"

out=$(k get jsm --chunk-size=1 -o name 2>&1) || fail "get in chunks: $out"
[ "$(wc -l <<<"$out")" = 2 ] || fail "get in chunks of one: $out"
echo "kubectl get --chunk-size=1 pages through limit and continue"

# The spaces' kinds take the same verbs: the documentation's Workspace,
# applied twice, server-side, patched, waited for, refused with capstan's
# messages and deleted.
ws="$repo/internal/workspace/testdata/examples-workspace.yaml"
out=$(k apply -f "$ws")
[ "$out" = "workspace.workspace.jupyter.org/my-space created" ] || fail "apply the Workspace: $out"
out=$(k apply -f "$ws")
[ "$out" = "workspace.workspace.jupyter.org/my-space unchanged" ] || fail "apply the Workspace again: $out"
out=$(k apply --server-side -f "$ws" 2>&1)
[ "$out" = "workspace.workspace.jupyter.org/my-space serverside-applied" ] || fail "apply the Workspace --server-side: $out"
out=$(k create -f "$ws" 2>&1) && fail "create of an existing Workspace: $out"
grep -q 'AlreadyExists.*workspaces.workspace.jupyter.org "my-space" already exists' <<<"$out" || fail "create the Workspace again: $out"
grep -Eq '^NAME +PHASE +DESIRED +NODE +AGE$' <<<"$(k get ws | head -1)" || fail "Workspace columns: $(k get ws)"
k patch ws my-space --type=merge -p '{"spec":{"desiredStatus":"Stopped"}}' >/dev/null
out=$(k wait --for=jsonpath='{.status.phase}'=Stopped ws/my-space --timeout=60s 2>&1) || fail "wait for the stopped Workspace: $out"
[ "$(k get ws my-space --subresource=status -o jsonpath='{.status.phase}')" = Stopped ] || fail "Workspace status subresource"
out=$(k explain ws.spec.idleShutdown)
grep -q 'idleTimeoutInMinutes' <<<"$out" || fail "explain ws: $out"
sed 's/^  desiredStatus: Running$/  desiredStatuz: Running/' "$ws" >"$work/ws-unknown.yaml"
out=$(k apply -f "$work/ws-unknown.yaml" 2>&1) && fail "a Workspace with an unknown field was accepted: $out"
grep -q 'spec.desiredStatuz: unknown field' <<<"$out" || fail "Workspace unknown field: $out"
out=$(k delete ws my-space --timeout=60s 2>&1) || fail "delete the Workspace: $out"
echo "kubectl applies, patches, waits for and deletes the documentation's Workspace"

# The node kinds too: docs/clusters.md's HyperpodNodeClass and NodePool,
# applied twice, listed with their printer columns, patched, refused with
# capstan's messages, seen by capstan's CLI, and deleted.
awk '/<!-- docs-test: file nodepool.yaml -->/{f=1; next} f && /^```yaml/{next} f && /^```/{exit} f' "$repo/docs/clusters.md" >"$work/nodepool.yaml"
grep -q '^kind: NodePool$' "$work/nodepool.yaml" || fail "no NodePool in docs/clusters.md: $(cat "$work/nodepool.yaml")"
out=$(k apply -f "$work/nodepool.yaml")
[ "$out" = $'hyperpodnodeclass.karpenter.sagemaker.amazonaws.com/inf-groups created\nnodepool.karpenter.sh/inference created' ] || fail "apply the node kinds: $out"
out=$(k apply -f "$work/nodepool.yaml")
[ "$out" = $'hyperpodnodeclass.karpenter.sagemaker.amazonaws.com/inf-groups unchanged\nnodepool.karpenter.sh/inference unchanged' ] || fail "apply the node kinds again: $out"
out=$(k apply --server-side -f "$work/nodepool.yaml" 2>&1) || fail "apply the node kinds --server-side: $out"
out=$(k get np)
grep -Eq '^inference +inf-groups +[0-9]+ +True +' <<<"$out" || fail "get np: $out"
k patch np inference --type=merge -p '{"spec":{"weight":20}}' >/dev/null
[ "$(k get np inference -o jsonpath='{.spec.weight} {.metadata.generation}')" = "20 2" ] || fail "patch np: $(k get np inference -o yaml)"
out=$(k patch np inference --type=merge -p '{"spec":{"weight":500}}' 2>&1) && fail "a weight past 100 was accepted: $out"
grep -q 'spec.weight' <<<"$out" || fail "np weight refusal: $out"
out=$("$CAPSTAN_BIN" --server "$url" get nodepools)
grep -Eq '^inference +inf-cluster +inf-groups +' <<<"$out" || fail "capstan get nodepools: $out"
k delete hpnc inf-groups >/dev/null
[ "$(k get np inference -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = False ] || fail "np without its class: $(k get np inference -o yaml)"
k delete np inference --timeout=60s >/dev/null
echo "kubectl applies, lists, patches and deletes docs/clusters.md's NodePool and HyperpodNodeClass"

out=$(k delete jsm deepseek other --timeout=60s 2>&1) || fail "delete: $out"
grep -q '"deepseek" deleted' <<<"$out" || fail "delete: $out"
out=$(k get jsm 2>&1)
grep -q '^No resources found in default namespace.$' <<<"$out" || fail "after delete: $out"
echo "kubectl delete waits until both are gone"
echo "PASS kubectl_flow"
