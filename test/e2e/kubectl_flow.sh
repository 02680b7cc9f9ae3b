#!/usr/bin/env bash
# kubectl against `capstan serve`: `capstan kubeconfig` writes the context;
# kubectl version, api-resources, get (the CRD's printer columns, -o wide,
# -o yaml, -o jsonpath, -A, -l), wait --for=condition and --for=jsonpath,
# get -w seeing an update, describe with the object's events, events, get
# namespaces, delete (waiting until the object is gone), and a field selector
# capstan does not support, refused as a Status kubectl prints.
# Objects are applied with `capstan apply` (kubectl apply is not served yet).
# Needs CAPSTAN_BIN, and kubectl: CAPSTAN_K8S_BIN/kubectl (test/k8s/binaries.sh
# builds it) or one on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
kubectl_bin=kubectl
if [ -n "${CAPSTAN_K8S_BIN:-}" ] && [ -x "$CAPSTAN_K8S_BIN/kubectl" ]; then
  kubectl_bin="$CAPSTAN_K8S_BIN/kubectl"
fi
command -v "$kubectl_bin" >/dev/null || { echo "kubectl is required" >&2; exit 1; }
cap() { "$CAPSTAN_BIN" --server "$url" "$@"; }

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
cap apply -f "$work/deepseek.yaml" >/dev/null
cap apply -f "$work/other.yaml" >/dev/null

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

# get -w sees the update capstan applies.
k get jsm deepseek -w --output-watch-events --request-timeout=60s >"$work/watch.out" 2>&1 &
watch_pid=$!
bg_pids+=("$watch_pid")
for _ in $(seq 1 100); do grep -q '^ADDED' "$work/watch.out" && break; sleep 0.1; done
jsm deepseek a 2 >"$work/deepseek.yaml"
cap apply -f "$work/deepseek.yaml" >/dev/null
for _ in $(seq 1 100); do grep -Eq '^MODIFIED +deepseek +[A-Za-z]+ +2 ' "$work/watch.out" && break; sleep 0.1; done
grep -Eq '^MODIFIED +deepseek +[A-Za-z]+ +2 ' "$work/watch.out" || fail "get -w saw no update to 2 replicas: $(cat "$work/watch.out")"
kill "$watch_pid" 2>/dev/null || true
echo "kubectl get -w sees the update"

out=$(k get jsm --field-selector spec.replicas=1 2>&1) && fail "an unsupported field selector was accepted: $out"
grep -q 'field label not supported: spec.replicas' <<<"$out" || fail "field selector refusal: $out"

out=$(k delete jsm deepseek other --timeout=60s 2>&1) || fail "delete: $out"
grep -q '"deepseek" deleted' <<<"$out" || fail "delete: $out"
out=$(k get jsm 2>&1)
grep -q '^No resources found in default namespace.$' <<<"$out" || fail "after delete: $out"
echo "kubectl delete waits until both are gone"
echo "PASS kubectl_flow"
