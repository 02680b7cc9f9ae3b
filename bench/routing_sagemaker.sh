#!/usr/bin/env bash
# bench/routing_sagemaker.sh — the shared-prefix comparison of
# bench/routing.sh on a SageMaker endpoint: the full `capstan serve`, the
# endpoint created with the aws CLI (model → endpoint config → endpoint),
# its routing strategy chosen by the endpoint config tag
# capstan:routing-strategy, and the load sent through
# InvokeEndpointWithResponseStream (`capstan bench --api sagemaker`). One
# fresh server per strategy, the same seeded workload each time, then one
# machine-readable RESULT line per cache-aware strategy against round robin.
#
#   bench/routing_sagemaker.sh                    full run
#   QUICK=1 bench/routing_sagemaker.sh            smaller run
#   QUICK=1 REPLICAS=4 RATE=36 bench/routing_sagemaker.sh   half the fleet at half the rate
#
# Knobs (env): CAPSTAN (binary; default: build ./cmd/capstan), REPLICAS,
# TIME_SCALE, GPU_UTIL, RATE, REQUESTS, SP_WORKLOAD, STRATEGIES, OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v aws >/dev/null || { echo "the aws CLI is required" >&2; exit 1; }

QUICK=${QUICK:-0}
OUT=${OUT:-$(mktemp -d /tmp/capstan-routing-sm.XXXXXX)}
mkdir -p "$OUT"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
capstan_binary
# The replicas and workload of bench/routing.sh (see bench/lib.sh for the
# sizing): Qwen3-32B on one H100 pair per replica, each KV cache shrunk by
# GPU_UTIL.
shared_prefix_knobs
STRATEGIES=${STRATEGIES:-roundrobin kvaware}

export AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_DEFAULT_REGION=us-east-1
export AWS_PAGER="" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

# Every replica runs TP2 (an ml.p5.4xlarge has one H100; the flag, after the
# runtime's own, overrides it) with the benchmark's cache size; the fleet
# holds exactly the replicas.
cat >"$OUT/capstan.yaml" <<EOF
engine:
  timeScale: $TIME_SCALE
  args: ["--tensor-parallel", "2", "--gpu-memory-utilization", "$GPU_UTIL", "--log-level", "warn"]
fleet:
  ml.p5.4xlarge: {us-east-1a: $REPLICAS}
EOF

# run STRATEGY: a fresh server, an endpoint tagged with STRATEGY, a bench.
run() {
	local strategy=$1 url
	"$CAPSTAN" serve --config "$OUT/capstan.yaml" --listen 127.0.0.1:0 --data-dir "$OUT/data-$strategy" \
		--log-level warn >"$OUT/serve-$strategy.out" 2>"$OUT/serve-$strategy.log" &
	PIDS+=($!)
	url=$(wait_serving "$OUT/serve-$strategy.out" "$OUT/serve-$strategy.log")
	sm() { aws sagemaker --endpoint-url "$url" "$@"; }
	sm create-model --model-name qwen --execution-role-arn arn:aws:iam::000000000000:role/capstan \
		--primary-container '{"Image":"capstan/sim","Environment":{"SM_MODEL_ID":"qwen3-32b"}}' >/dev/null
	sm create-endpoint-config --endpoint-config-name "cfg-$strategy" \
		--tags "Key=capstan:routing-strategy,Value=$strategy" --production-variants \
		"[{\"VariantName\":\"AllTraffic\",\"ModelName\":\"qwen\",\"InitialInstanceCount\":$REPLICAS,\"InstanceType\":\"ml.p5.4xlarge\"}]" >/dev/null
	sm create-endpoint --endpoint-name qwen --endpoint-config-name "cfg-$strategy" >/dev/null
	local status=""
	for _ in $(seq 600); do
		status=$(sm describe-endpoint --endpoint-name qwen --query EndpointStatus --output text)
		[[ "$status" == InService || "$status" == Failed ]] && break
		sleep 0.25
	done
	[[ "$status" == InService ]] || { echo "endpoint $status" >&2; cat "$OUT/serve-$strategy.log" >&2; exit 1; }
	sleep 2 # first scrape (block size, capacity) and KV subscriptions
	run_bench "sp-$strategy" "$url/metrics" --api sagemaker --target "$url" --endpoint qwen --workload "$SP_WORKLOAD" \
		--rate "$RATE" --requests "$REQUESTS"
	cleanup
}

echo "results in $OUT (replicas=$REPLICAS time-scale=$TIME_SCALE gpu-util=$GPU_UTIL rate=$RATE requests=$REQUESTS)" >&2
for s in $STRATEGIES; do run "$s"; done

python3 - "$OUT" "$SP_WORKLOAD" "$STRATEGIES" <<'PY'
import json, os, sys
out, sp, strategies = sys.argv[1], sys.argv[2], sys.argv[3].split()
def summ(name):
    return json.load(open(f"{out}/{name}.json"))["stages"][0]["summaries"][0]
if "roundrobin" not in strategies:
    sys.exit(0)
params = dict(kv.split("=") for kv in sp.split(":", 1)[1].split(","))
base = summ("sp-roundrobin")
for s in strategies:
    if s == "roundrobin":
        continue
    x = summ(f"sp-{s}")
    groups = min(int(params["groups"]), x["requests"])
    oracle = (x["requests"] - groups) * int(params["system"]) / max(1, x["input_tokens"])
    hit, bhit = x["usage_cache_hit_rate"], base["usage_cache_hit_rate"]
    print(f'RESULT sagemaker-{s} hit_rate={hit:.3f} baseline_hit_rate={bhit:.3f} oracle_hit_rate={oracle:.3f} '
          f'hit_vs_oracle={hit/max(1e-9, oracle):.2f} '
          f'ttft_p50_speedup={base["ttft_ms"]["p50"]/max(1e-9, x["ttft_ms"]["p50"]):.2f} '
          f'ttft_p99_speedup={base["ttft_ms"]["p99"]/max(1e-9, x["ttft_ms"]["p99"]):.2f} '
          f'ttft_p90_speedup={base["ttft_ms"]["p90"]/max(1e-9, x["ttft_ms"]["p90"]):.2f} '
          f'throughput_gain={x["output_tokens_per_second"]/max(1e-9, base["output_tokens_per_second"]):.2f} '
          f'failed={x["failed"]} baseline_failed={base["failed"]}')
PY
