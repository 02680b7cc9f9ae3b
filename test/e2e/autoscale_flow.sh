#!/usr/bin/env bash
# End-to-end autoscaling with real engine processes: apply an
# InferenceEndpointConfig that scales 0..3 on the built-in in-flight-per-replica
# trigger (polling 1 s, stabilisation and cooldown in seconds), drive load up and
# down with `capstan bench`, and check, from `capstan get iec as-flow -o json`,
# that replicas go 1 → N (>1) → 1 → 0 → 1 (the last on the first request after
# zero, which the gateway's activator holds) with no failed request.
# Needs CAPSTAN_BIN (path to the capstan binary). About 1–2 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
command -v jq >/dev/null || fail "jq is required"
export CAPSTAN_SERVER=$url
cap() { "$CAPSTAN_BIN" "$@"; }
name=as-flow

# The model folder lives under the server's default fsxRoot (<dataDir>/fsx):
# fsxRoot/<fileSystemId>/<mountName>/<modelLocation>.
model_dir="$work/data/fsx/fs-0123456789abcdef0/capstan/tinyllama"
mkdir -p "$model_dir"
cp "$here/testdata/models/tinyllama/"* "$model_dir/"

cap apply -f "$here/testdata/autoscale-flow.yaml" >"$work/apply.out" 2>&1 || fail "apply: $(cat "$work/apply.out")"
grep -q created "$work/apply.out" || fail "apply did not create: $(cat "$work/apply.out")"

# shellcheck source=lib/deployment.sh
source "$here/lib/deployment.sh"

wait_state DeploymentComplete
[ "$(replicas)" = 1 ] || fail "replicas after deployment: $(replicas), want 1"
echo "deployed with 1 replica"

# Sample the replica count for the whole run; the sequence is checked at the end.
# It starts with the 1 just observed: under load the first sample can come
# after the scale-out.
echo 1 >"$work/replicas.log"
(
  while :; do
    r=$(replicas 2>/dev/null) && echo "$r" >>"$work/replicas.log"
    sleep 0.25
  done
) &
sampler=$!
stop_sampler() { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }
trap 'stop_sampler; cleanup' EXIT

# Load: 6 requests always outstanding against a target of 1 per replica, so the
# scaler wants 6 and stops at the maximum, 3.
echo "load: concurrency 6 for 20s"
cap bench --target "$url" --model "$name" --workload random:input=64,output=64 --concurrency 6 \
  --duration 20s --timeout 2m --progress 0 --no-metrics --out "$work/load.json" >"$work/load.txt" 2>&1 ||
  fail "bench (load): $(tail -20 "$work/load.txt")"
failed=$(jq '.stages[0].summaries[0].failed' "$work/load.json")
ok=$(jq '.stages[0].summaries[0].succeeded' "$work/load.json")
[ "$failed" = 0 ] || fail "$failed requests failed under load: $(jq -c '.stages[0].summaries[0].errors' "$work/load.json")"
[ "$ok" -gt 0 ] || fail "no request succeeded under load"
peak=$(sort -n "$work/replicas.log" | tail -1)
[ "$peak" -gt 1 ] || fail "replicas never went above 1 under load (peak $peak)"
echo "load: $ok requests ok, 0 failed; peak replicas $peak"

# Idle: down to 1 after the scale-down window, then to 0 after the cooldown.
wait_replicas -eq 1 60
echo "scaled in to 1"
wait_replicas -eq 0 90
# From here on the script itself records what it observes: the stay at zero
# can be shorter than the sampler's period.
stop_sampler
echo 0 >>"$work/replicas.log"
echo "scaled to 0"

# The first request after zero is held by the activator until a replica is up.
cap bench --target "$url" --model "$name" --workload random:input=16,output=8 --concurrency 1 \
  --requests 1 --timeout 2m --progress 0 --no-metrics --out "$work/wake.json" >"$work/wake.txt" 2>&1 ||
  fail "bench (wake): $(tail -20 "$work/wake.txt")"
[ "$(jq '.stages[0].summaries[0].failed' "$work/wake.json")" = 0 ] || fail "the request at zero failed: $(jq -c '.stages[0].summaries[0].errors' "$work/wake.json")"
[ "$(jq '.stages[0].summaries[0].succeeded' "$work/wake.json")" = 1 ] || fail "the request at zero did not succeed"
wake_ms=$(jq '.stages[0].summaries[0].e2e_ms.max' "$work/wake.json")
wait_replicas -eq 1 30
echo 1 >>"$work/replicas.log"
echo "woke from 0 on the first request (${wake_ms} ms end to end)"

# The sampled sequence, consecutive repeats collapsed, must contain
# 1, N>1, 1, 0, 1 in that order.
seq=$(uniq "$work/replicas.log" | tr '\n' ' ')
echo "replica sequence: $seq"
python3 - "$seq" <<'PY' || fail "replica sequence $seq lacks 1 → N → 1 → 0 → 1"
import sys
vals = [int(v) for v in sys.argv[1].split()]
want = [lambda v: v == 1, lambda v: v > 1, lambda v: v == 1, lambda v: v == 0, lambda v: v == 1]
i = 0
for v in vals:
    if i < len(want) and want[i](v):
        i += 1
sys.exit(0 if i == len(want) else 1)
PY

cap delete iec "$name" >/dev/null || fail "delete $name"
echo "autoscale flow passed"
