#!/usr/bin/env bash
# End-to-end with a real engine through the manifests door: `capstan apply`
# of InferenceEndpointConfigs whose worker.image is llama.cpp's server image,
# the tiny GGUF model (test/engines/llamacpp.sh) under the server's fsxRoot.
#   - kvaware routing on llama.cpp (no KV events) falls back to prefixaware
#     with a Warning event, and KV tiers warn that they have no effect;
#   - two replicas: repeated requests sharing a long prefix all land on one
#     replica, and that llama-server's own counter of prompt tokens reused
#     from its cache shows the hits;
#   - kill -9 of the llama-server serving a stream: that stream fails, the
#     requests after it succeed, and the replica is replaced;
#   - a deployment at zero replicas starts a real llama-server on the first
#     request, which the activator holds until it answers.
# Needs CAPSTAN_BIN, jq, curl and llama-server: CAPSTAN_LLAMACPP_DIR
# (test/engines/llamacpp.sh prints it; the script runs it when unset).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
llama=${CAPSTAN_LLAMACPP_DIR:-$("$here/../engines/llamacpp.sh" | tail -1)}
[ -x "$llama/llama-server" ] && [ -s "$llama/tiny.gguf" ] || { echo "no llama-server and tiny.gguf in $llama" >&2; exit 1; }

work=$(mktemp -d)
cat >"$work/capstan.yaml" <<YAML
engines:
  llamacpp:
    binary: $llama/llama-server
    args: ["--threads", "1"]
YAML
serve_args=(--config "$work/capstan.yaml")
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
for c in jq curl; do command -v "$c" >/dev/null || fail "$c is required"; done
export CAPSTAN_SERVER=$url
cap() { "$CAPSTAN_BIN" "$@"; }

model_dir="$work/data/fsx/fs-0123456789abcdef0/capstan/tiny"
mkdir -p "$model_dir"
cp "$llama/tiny.gguf" "$model_dir/"

# manifest NAME REPLICAS EXTRA: an IEC on llama.cpp.
manifest() {
  cat <<YAML
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: $1, namespace: default}
spec:
  modelName: $1
  endpointName: $1
  instanceType: ml.g5.12xlarge
  replicas: $2
  invocationEndpoint: v1/completions
  modelSourceConfig:
    modelSourceType: fsx
    fsxStorage: {fileSystemId: fs-0123456789abcdef0, mountName: capstan}
    modelLocation: tiny
  worker:
    image: ghcr.io/ggml-org/llama.cpp:server
    modelInvocationPort: {containerPort: 8080, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "1", memory: 2Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
$3
YAML
}

# 1. Two replicas, kvaware asked, KV tiers asked.
manifest pfx 2 "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}
  kvCacheSpec: {enableL1Cache: true}" >"$work/pfx.yaml"
cap apply -f "$work/pfx.yaml" >"$work/apply.out" 2>&1 || fail "apply: $(cat "$work/apply.out")"
name=pfx
# shellcheck source=lib/deployment.sh
source "$here/lib/deployment.sh"
wait_state DeploymentComplete
cap describe iec pfx >"$work/describe.txt"
grep -q "KVEventsUnsupported.*falls back to prefixaware" "$work/describe.txt" || fail "no kvaware fallback event: $(cat "$work/describe.txt")"
grep -q "KVTiersUnsupported" "$work/describe.txt" || fail "no KV tiers warning: $(cat "$work/describe.txt")"
echo "kvaware on llama.cpp: falls back to prefixaware, with Warning events"

targets=$(curl -fsS "$url/_capstan/prometheus/targets")
mapfile -t addrs < <(jq -r '.[] | select(.labels.deployment == "pfx") | .labels.replica' <<<"$targets")
[ "${#addrs[@]}" = 2 ] || fail "want 2 replica targets, got: $targets"
declare -A addr_of
while read -r id addr; do addr_of[$id]=$addr; done < <(jq -r '.[] | select(.labels.deployment == "pfx") | "\(.labels.replica) \(.targets[0])"' <<<"$targets")
# The replicas' own ports want their API keys: without, llama-server refuses.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://${addr_of[${addrs[0]}]}/v1/completions" -H 'Content-Type: application/json' -d '{"prompt":"x","max_tokens":1}')
[ "$code" = 401 ] || fail "a replica's own port answered $code without its API key"
echo "a replica's own port refuses a caller without its key (401)"
# engine_metric REPLICA NAME: one llama-server's counter, read through capstan.
engine_metric() { curl -fsS "$url/_capstan/replicas/$1/metrics" | awk -v n="$2" '$1 == n {print $2}'; }
for a in "${addrs[@]}"; do
  curl -fsS "$url/_capstan/replicas/$a/metrics" | grep -q '^llamacpp:prompt_tokens_total' || fail "replica $a is not llama-server"
done

# 2. Eight requests sharing a ~300-token prefix, each with its own ending.
prefix=$(printf 'The capstan is a rotating machine developed for use on sailing ships to multiply the pulling force of seamen when hauling ropes, cables, and hawsers. %.0s' 1 2 3 4 5 6 7 8 9 10)
for i in 1 2 3 4 5 6 7 8; do
  jq -n --arg p "$prefix Question $i: why?" '{model: "pfx", prompt: $p, max_tokens: 2}' >"$work/req.json"
  curl -fsS "$url/v1/completions" -H 'Content-Type: application/json' --data-binary @"$work/req.json" -o /dev/null ||
    fail "request $i failed"
done
declare -A prompt cached
busy=""
for a in "${addrs[@]}"; do
  prompt[$a]=$(engine_metric "$a" llamacpp:prompt_tokens_total)
  cached[$a]=$(engine_metric "$a" llamacpp:prompt_tokens_cached_total)
  echo "replica $a: prompt tokens computed ${prompt[$a]}, reused from its cache ${cached[$a]}"
  [ "${prompt[$a]%.*}" -gt 0 ] && busy="$busy $a"
done
[ "$(wc -w <<<"$busy")" = 1 ] || fail "the shared-prefix requests were spread over:$busy"
busy=${busy# }
# 7 of the 8 requests reuse the prefix: at least 7 x 250 tokens.
[ "${cached[$busy]%.*}" -ge 1750 ] || fail "replica $busy reused only ${cached[$busy]} prompt tokens"
echo "prefixaware: all 8 on one replica, ${cached[$busy]} prompt tokens reused"

# 3. kill -9 the llama-server a stream is on.
port=${addr_of[$busy]##*:}
pid=$(pgrep -f "llama-server .*--port $port " | head -1)
[ -n "$pid" ] || fail "no llama-server process on port $port"
jq -n --arg p "$prefix Tell a long story." '{model: "pfx", prompt: $p, max_tokens: 4000, stream: true, ignore_eos: true}' >"$work/long.json"
curl -sN "$url/v1/completions" -H 'Content-Type: application/json' --data-binary @"$work/long.json" >"$work/stream.out" 2>&1 &
streamer=$!
for _ in $(seq 1 100); do [ -s "$work/stream.out" ] && break; sleep 0.05; done
[ -s "$work/stream.out" ] || fail "the stream did not start"
kill -9 "$pid"
wait "$streamer" || true
grep -q '^data: \[DONE\]' "$work/stream.out" && fail "the killed replica's stream completed"
echo "the stream on the killed replica failed ($(grep -c '^data:' "$work/stream.out") events)"
for i in 1 2 3 4 5; do
  jq -n --arg p "$prefix After the crash $i." '{model: "pfx", prompt: $p, max_tokens: 2}' >"$work/req.json"
  curl -fsS "$url/v1/completions" -H 'Content-Type: application/json' --data-binary @"$work/req.json" -o /dev/null ||
    fail "request $i after the kill failed"
done
echo "5 requests after the kill succeeded"
running() { pgrep -f 'llama-server ' | grep -vx "$pid" | wc -l; }
for _ in $(seq 1 120); do
  [ "$(running)" -ge 2 ] && [ "$(obj | jq -r '.status.state')" = DeploymentComplete ] && break
  sleep 0.25
done
[ "$(running)" -ge 2 ] || fail "the killed replica was not replaced"
echo "the killed replica was replaced"

# 4. From zero: the first request starts a real llama-server.
manifest zero 0 "  autoScalingSpec:
    minReplicaCount: 0
    maxReplicaCount: 1
    pollingInterval: 1
    cooldownPeriod: 300
    cloudWatchTrigger: {namespace: capstan, metricName: InFlightPerReplica, metricType: Value, targetValue: 1, activationTargetValue: 0, metricCollectionPeriod: 1, metricCollectionStartTime: 1}" >"$work/zero.yaml"
cap apply -f "$work/zero.yaml" >"$work/apply.out" 2>&1 || fail "apply zero: $(cat "$work/apply.out")"
name=zero
for _ in $(seq 1 40); do [ "$(replicas)" = 0 ] && [ -n "$(obj | jq -r '.status.state // ""')" ] && break; sleep 0.25; done
[ "$(replicas)" = 0 ] || fail "zero has $(replicas) replicas before any request"
before=$(pgrep -fc 'llama-server ' || true)
start=$(date +%s%N)
curl -fsS --max-time 120 "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"zero","prompt":"Hello","max_tokens":4}' -o "$work/zero.json" || fail "the request at zero failed"
took=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q text_completion "$work/zero.json" || fail "zero answered: $(cat "$work/zero.json")"
[ "$(pgrep -fc 'llama-server ')" -gt "$before" ] || fail "no new llama-server started"
echo "from zero: first answer after ${took} ms (llama-server start and model load)"

cap delete iec pfx >/dev/null
cap delete iec zero >/dev/null
echo "PASS llamacpp_manifest_flow"
