#!/usr/bin/env bash
# bench/routing.sh — reproduce the cache-aware routing figures of
# docs/performance.md: N simulated Qwen3-32B replicas (H100, TP2) behind the
# gateway-only command (`capstan gateway`, the same routing code `capstan
# serve` uses), one fresh fleet per strategy, the same seeded workload each
# time, then one machine-readable RESULT line per strategy.
#
#   bench/routing.sh            full run
#   QUICK=1 bench/routing.sh    smaller run (within ~5 minutes on 2 cores)
#
# Knobs (env): CAPSTAN (binary; default: build ./cmd/capstan), REPLICAS,
# TIME_SCALE, GPU_UTIL (shrinks each replica's KV cache so the shared-prefix
# working set approaches cluster capacity, as in llm-d's benchmark), RATE,
# REQUESTS, SP_WORKLOAD, MT_WORKLOAD, MT_RATE, MT_REQUESTS, OUT (results dir).
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=${QUICK:-0}
OUT=${OUT:-$(mktemp -d /tmp/capstan-routing.XXXXXX)}
mkdir -p "$OUT"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
capstan_binary
shared_prefix_knobs
MT_WORKLOAD=${MT_WORKLOAD:-multi-turn:sessions=48,turns=5,system=1000,question=200,output=60,think=200ms}
MT_RATE=${MT_RATE:-6}
if [[ "$QUICK" == 1 ]]; then
	MT_REQUESTS=${MT_REQUESTS:-240}
else
	MT_REQUESTS=${MT_REQUESTS:-720}
	MT_WORKLOAD=${MT_WORKLOAD_FULL:-multi-turn:sessions=144,turns=5,system=1000,question=200,output=60,think=200ms}
fi

# run STRATEGY WORKLOAD RATE REQUESTS TAG: a fresh fleet, a gateway, a bench.
run() {
	local strategy=$1 workload=$2 rate=$3 requests=$4 tag=$5
	local backends=() kvs=() replays=()
	for i in $(seq 0 $((REPLICAS - 1))); do
		local kp rp
		kp=$(free_port)
		rp=$(free_port)
		"$CAPSTAN" engine sim --model qwen3-32b --gpu h100 --tensor-parallel 2 --port 0 --seed "$i" \
			--time-scale "$TIME_SCALE" --gpu-memory-utilization "$GPU_UTIL" --log-level warn \
			--kv-events "tcp://*:$kp" --kv-events-replay "tcp://*:$rp" >"$OUT/sim-$tag-$strategy-$i.log" 2>&1 &
		PIDS+=($!)
		kvs+=("--kv-events" "r$i=tcp://127.0.0.1:$kp")
		replays+=("--kv-events-replay" "r$i=tcp://127.0.0.1:$rp")
	done
	for i in $(seq 0 $((REPLICAS - 1))); do
		backends+=("--backend" "r$i=$(wait_addr "$OUT/sim-$tag-$strategy-$i.log")")
	done
	"$CAPSTAN" gateway --listen 127.0.0.1:0 --endpoint qwen3-32b --model qwen3-32b --strategy "$strategy" \
		--scrape-interval 250ms "${backends[@]}" "${kvs[@]}" "${replays[@]}" >"$OUT/gw-$tag-$strategy.log" 2>&1 &
	PIDS+=($!)
	local gw
	gw=$(wait_addr "$OUT/gw-$tag-$strategy.log")
	sleep 1 # first scrape (block size, capacity) and KV subscriptions
	run_bench "$tag-$strategy" "http://$gw/metrics" --target "http://$gw" --model qwen3-32b --workload "$workload" \
		--rate "$rate" --requests "$requests"
	cleanup
}

echo "results in $OUT (replicas=$REPLICAS time-scale=$TIME_SCALE gpu-util=$GPU_UTIL)" >&2
SP_STRATEGIES=${SP_STRATEGIES:-roundrobin prefixaware kvaware}
MT_STRATEGIES=${MT_STRATEGIES:-roundrobin session kvaware}
for s in $SP_STRATEGIES; do run "$s" "$SP_WORKLOAD" "$RATE" "$REQUESTS" sp; done
for s in $MT_STRATEGIES; do run "$s" "$MT_WORKLOAD" "$MT_RATE" "$MT_REQUESTS" mt; done

python3 - "$OUT" "$SP_WORKLOAD" <<'PY'
import json, sys, re
out, sp = sys.argv[1], sys.argv[2]
import os
def summ(name):
    d = json.load(open(f"{out}/{name}.json"))
    return d["stages"][0]["summaries"][0]
def have(name): return os.path.exists(f"{out}/{name}.json")
params = dict(kv.split("=") for kv in sp.split(":", 1)[1].split(","))
base = summ("sp-roundrobin") if have("sp-roundrobin") else None
for s in ("prefixaware", "kvaware"):
    if base is None or not have(f"sp-{s}"): continue
    x = summ(f"sp-{s}")
    # Oracle: every request but the first of its group reuses the whole
    # system prompt (and nothing else).
    groups = min(int(params["groups"]), x["requests"])
    oracle = (x["requests"] - groups) * int(params["system"]) / max(1, x["input_tokens"])
    hit = x["usage_cache_hit_rate"]
    print(f'RESULT {s} ttft_p90_speedup={base["ttft_ms"]["p90"]/max(1e-9, x["ttft_ms"]["p90"]):.2f} '
          f'throughput_gain={x["output_tokens_per_second"]/max(1e-9, base["output_tokens_per_second"]):.2f} '
          f'hit_rate={hit:.3f} oracle_hit_rate={oracle:.3f} hit_vs_oracle={hit/max(1e-9, oracle):.2f} '
          f'failed={x["failed"]} baseline_failed={base["failed"]}')
base = summ("mt-roundrobin") if have("mt-roundrobin") else None
for s in ("session", "kvaware"):
    if base is None or not have(f"mt-{s}"): continue
    x = summ(f"mt-{s}")
    print(f'RESULT multiturn-{s} ttft_p50_speedup={base["ttft_ms"]["p50"]/max(1e-9, x["ttft_ms"]["p50"]):.2f} '
          f'hit_rate={x["usage_cache_hit_rate"]:.3f} baseline_hit_rate={base["usage_cache_hit_rate"]:.3f} failed={x["failed"]}')
PY
