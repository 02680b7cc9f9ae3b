#!/usr/bin/env bash
# End-to-end tieredstorage (docs/manifests.md, KV cache): an
# InferenceEndpointConfig with two replicas on one ml.g5.12xlarge node and
# `l2CacheBackend: tieredstorage`, routed round robin so that a repeated
# long prompt reaches the other replica:
#   - the first request's blocks land in the node's store under the data
#     directory; the same prompt on the other replica is served from it
#     (capstan_engine_kv_tier_hits_total{tier="tieredstorage"} > 0, and
#     `capstan describe` shows a tieredstorage hit rate);
#   - block records damaged on disk (a byte flipped in each slot of the
#     node's slot file) are misses, never wrong tokens: the request still
#     succeeds and the replicas count corrupt records; a slot file truncated
#     to its header is all misses, and the request still succeeds;
#   - a store larger than the instance type's local storage is refused with
#     the field path.
# Needs CAPSTAN_BIN, jq and curl. About 20 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
for c in jq curl; do command -v "$c" >/dev/null || fail "$c is required"; done
export CAPSTAN_SERVER=$url
cap() { "$CAPSTAN_BIN" "$@"; }

model_dir="$work/data/fsx/fs-0123456789abcdef0/capstan/tinyllama"
mkdir -p "$model_dir"
cp "$here/testdata/models/tinyllama/"* "$model_dir/"
cat >"$work/kv.yaml" <<'YAML'
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata:
  name: kv-flow
  namespace: default
spec:
  modelName: kv-flow
  endpointName: kv-flow
  instanceType: ml.g5.12xlarge
  replicas: 2
  invocationEndpoint: v1/completions
  modelSourceConfig:
    modelSourceType: fsx
    fsxStorage: {fileSystemId: fs-0123456789abcdef0, mountName: capstan}
    modelLocation: tinyllama
  worker:
    image: capstan/sim
    modelInvocationPort: {containerPort: 8000, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
  intelligentRoutingSpec: {enabled: true, routingStrategy: roundrobin}
  kvCacheSpec:
    enableL1Cache: true
    enableL2Cache: true
    l2CacheSpec:
      l2CacheBackend: tieredstorage
      l2CacheSize: 1Gi
YAML

# --- too big for the node's local storage: refused, naming the field
sed 's/l2CacheSize: 1Gi/l2CacheSize: 4T/' "$work/kv.yaml" >"$work/big.yaml"
if cap apply -f "$work/big.yaml" >"$work/big.out" 2>&1; then fail "a 4T store on ml.g5.12xlarge was accepted"; fi
grep -q "spec.kvCacheSpec.l2CacheSpec.l2CacheSize: 4T is more than" "$work/big.out" || fail "refusal: $(cat "$work/big.out")"
echo "a store beyond the instance's local storage is refused with the field path"

cap apply -f "$work/kv.yaml" >"$work/apply.out" 2>&1 || fail "apply: $(cat "$work/apply.out")"
name=kv-flow
# shellcheck source=lib/deployment.sh
source "$here/lib/deployment.sh"
wait_state DeploymentComplete
targets=$(curl -fsS "$url/_capstan/prometheus/targets")
[ "$(jq '[.[] | select(.labels.deployment == "kv-flow")] | length' <<<"$targets")" = 2 ] || fail "targets: $targets"
# Each replica's metrics through capstan: its own port wants its API key.
replicas=$(jq -r '.[] | select(.labels.deployment == "kv-flow") | .labels.replica' <<<"$targets")
stores=("$work"/data/tieredstorage/*/*)
[ "${#stores[@]}" = 1 ] || fail "want one node's store, got: ${stores[*]}"
echo "2 replicas on one node, store ${stores[0]#"$work"/}"

# metric NAME [LABEL-MATCH]: the sum over both replicas.
metric() {
  local a sum=0 v
  for a in $replicas; do
    v=$(curl -fsS "$url/_capstan/replicas/$a/metrics" | awk -v n="$1" -v m="${2:-}" '$1 ~ "^"n"({|$)" && index($1, m) {s += $2} END {print s + 0}')
    sum=$(python3 -c "print($sum + $v)")
  done
  echo "$sum"
}
# slots [damage]: the records in the node's slot files (<ns>-<block>-<n>.kvs:
# a 4 KiB header, then 64-byte slots, a record starting "CKVB"); with
# damage, a payload byte of each is flipped, so every one fails its checksum.
slots() {
  python3 - "${stores[0]}" "$@" <<'PY'
import glob, os, sys
n = 0
for p in glob.glob(os.path.join(sys.argv[1], "*.kvs")):
    with open(p, "r+b") as f:
        data = f.read()
        for off in range(4096, len(data) - 63, 64):
            if data[off:off + 4] == b"CKVB":
                n += 1
                if len(sys.argv) > 2:
                    f.seek(off + 40)
                    f.write(bytes([data[off + 40] ^ 0x55]))
print(n)
PY
}
records() { slots; }
complete() { # PROMPT
  local code
  code=$(curl -sS -o "$work/out.json" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"kv-flow\",\"prompt\":\"$1\",\"max_tokens\":4}")
  [ "$code" = 200 ] || fail "HTTP $code $(head -c 300 "$work/out.json")"
  jq -e '.choices[0].text | length > 0' "$work/out.json" >/dev/null || fail "no text: $(cat "$work/out.json")"
}
wait_records() { # N: the writes are off the engine's goroutine, and a
  # chain is written tail first, so wait until the count holds still.
  local n last=-1
  for _ in $(seq 1 100); do
    n=$(records)
    [ "$n" -ge "$1" ] && [ "$n" = "$last" ] && return 0
    last=$n
    sleep 0.2
  done
  fail "store holds $(records) records, want ≥ $1"
}

long=$(python3 -c 'print(" ".join("shared context word %d" % i for i in range(250)))')
before=$(records)
complete "$long"
wait_records $((before + 100))
complete "$long" # round robin: the other replica
hits=$(metric capstan_engine_kv_tier_hits_total 'tier="tieredstorage"')
python3 -c "import sys; sys.exit(0 if $hits > 0 else 1)" || fail "no tieredstorage hits ($hits)"
echo "the other replica loaded $hits blocks from the node's store"
# describe's rates come from the gateway's last read of the replicas'
# /metrics (each second): the tieredstorage hit rate shows within a read.
for _ in $(seq 1 20); do
  cap describe iec kv-flow >"$work/describe.txt"
  grep -E '^\s+tieredstorage\s+per node' "$work/describe.txt" | grep -qE '[1-9][0-9.]*%\s*$|0\.[0-9]*[1-9][0-9]*%\s*$' && break
  sleep 0.25
done
grep -A5 'KV Cache Tiers:' "$work/describe.txt"
grep -E '^\s+tieredstorage\s+per node' "$work/describe.txt" | grep -qE '[1-9][0-9.]*%\s*$|0\.[0-9]*[1-9][0-9]*%\s*$' ||
  fail "describe shows no tieredstorage hit rate: $(cat "$work/describe.txt")"

# --- records damaged on disk: misses, the request still answered
other=$(python3 -c 'print(" ".join("another document line %d" % i for i in range(250)))')
before=$(records)
complete "$other"
wait_records $((before + 100))
damaged=$(slots damage)
corrupt0=$(metric capstan_engine_kv_tieredstorage_corrupt_total)
complete "$other" # the other replica finds only broken records
corrupt=$(metric capstan_engine_kv_tieredstorage_corrupt_total)
python3 -c "import sys; sys.exit(0 if $corrupt > $corrupt0 else 1)" || fail "corrupt records not counted ($corrupt0 → $corrupt)"
echo "$damaged damaged records: $((${corrupt%.*} - ${corrupt0%.*})) read as corrupt, the request answered"

# --- the slot file truncated to its header: misses, the request answered
for f in "${stores[0]}"/*.kvs; do truncate -s 4096 "$f"; done
third=$(python3 -c 'print(" ".join("a third text line %d" % i for i in range(250)))')
complete "$third"
wait_records 100 # written again: the store grows back
echo "truncated store: the request answered, $(records) records written again"

cap delete iec kv-flow >/dev/null
echo "kvtier flow passed"
