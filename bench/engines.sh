#!/usr/bin/env bash
# bench/engines.sh — the "Real engines (llama.cpp)" figures of
# docs/performance.md, all measured in one run on real llama-server
# replicas: llama.cpp built by test/engines/llamacpp.sh, its tiny.gguf (a
# 2-layer, width-128 llama with random weights and a real 32k vocabulary),
# `--threads 1` each. One RESULT line per figure:
#
#   1. gateway-overhead: one llama-server, the same non-streaming workload
#      sent to it directly and through `capstan gateway`, ROUNDS rounds in
#      rotating order, a fresh seed per run (llama-server caches prompts, so
#      a repeated prompt would be a cache hit for whichever target ran
#      second); ratios gateway ÷ direct of the medians over rounds.
#   2. routing: a fresh pair of llama-servers per strategy behind `capstan
#      gateway`, the same seeded shared-prefix workload (a long system prompt
#      per group, so prefix reuse saves real prefill compute), Poisson
#      arrivals; prefixaware against roundrobin.
#   3. cold-start: `capstan serve` with engines.llamacpp pointed at
#      llama-server, one manifest per repetition at 0 replicas (as in
#      test/e2e/llamacpp_manifest_flow.sh); the time from the first request
#      to its answer (the activator holds it while a replica starts and
#      loads the model). For scale, llama-server alone: exec to /health 200.
#   4. calibration: `capstan engine sim` with a config.json of the tiny model
#      on a CPU instance profile (SIM_GPU) against the real llama-server,
#      same workload and prompt tokens, the same sequences and tokens per
#      step, streaming, closed loop at concurrency 1, 4 and 8: TTFT and
#      inter-token latency, ratios sim ÷ real of the medians over rounds.
#
#   bench/engines.sh            full run (about 8 minutes on 2 cores)
#   QUICK=1 bench/engines.sh    shorter (about 4 minutes on 2 cores)
#   FIGURES="routing calibration" bench/engines.sh   only those figures
#
# Knobs (env): CAPSTAN (binary; default: build ./cmd/capstan), LLAMA_DIR
# (llama-server + tiny.gguf; default: test/engines/llamacpp.sh), OUT (results
# dir), FIGURES, ROUNDS, OVERHEAD_WORKLOAD, OVERHEAD_CONCURRENCY,
# OVERHEAD_DURATION, SP_WORKLOAD, SP_RATE, SP_REQUESTS, ROUTING_LLAMA_ARGS
# (extra llama-server args for the routing fleet), COLD_REPS, SIM_GPU,
# CAL_WORKLOAD, CAL_REQUESTS (per unit of concurrency), CAL_ROUNDS.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=${QUICK:-0}
OUT=${OUT:-$(mktemp -d /tmp/capstan-engines.XXXXXX)}
mkdir -p "$OUT"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
capstan_binary
llama_dir

FIGURES=${FIGURES:-overhead routing coldstart calibration}
OVERHEAD_WORKLOAD=${OVERHEAD_WORKLOAD:-random:input=128,output=16}
OVERHEAD_CONCURRENCY=${OVERHEAD_CONCURRENCY:-4}
SP_WORKLOAD=${SP_WORKLOAD:-shared-prefix:groups=8,prompts=6,system=1200,question=100,output=16}
SP_RATE=${SP_RATE:-12}
ROUTING_LLAMA_ARGS=${ROUTING_LLAMA_ARGS:-}
SIM_GPU=${SIM_GPU:-ml.c5.large}
CAL_WORKLOAD=${CAL_WORKLOAD:-random:input=512,output=64}
if [[ "$QUICK" == 1 ]]; then
	ROUNDS=${ROUNDS:-3}
	OVERHEAD_DURATION=${OVERHEAD_DURATION:-8s}
	SP_REQUESTS=${SP_REQUESTS:-96}
	COLD_REPS=${COLD_REPS:-3}
	CAL_REQUESTS=${CAL_REQUESTS:-6}
	CAL_ROUNDS=${CAL_ROUNDS:-1}
else
	ROUNDS=${ROUNDS:-5}
	OVERHEAD_DURATION=${OVERHEAD_DURATION:-20s}
	SP_REQUESTS=${SP_REQUESTS:-288}
	COLD_REPS=${COLD_REPS:-5}
	CAL_REQUESTS=${CAL_REQUESTS:-16}
	CAL_ROUNDS=${CAL_ROUNDS:-3}
fi
want() { [[ " $FIGURES " == *" $1 "* ]]; }

echo "results in $OUT (llama.cpp from $LLAMA_DIR; $(nproc) cores; $(date -u +%F))" >&2
START=$SECONDS

# bench TAG ARGS…: capstan bench into $OUT/TAG.{json,txt}; the llama-server
# metrics names differ from vLLM's, so the bench scrapes nothing.
bench() {
	local tag=$1
	shift
	"$CAPSTAN" bench --model tiny --api openai-completions --progress 0 --no-metrics --timeout 2m \
		--out "$OUT/$tag.json" "$@" >"$OUT/$tag.txt" 2>&1 || { cat "$OUT/$tag.txt" >&2; exit 1; }
	echo "== $tag: $(grep -E 'requests ok' "$OUT/$tag.txt" | tr -s ' ')" >&2
}

# start_gateway TAG STRATEGY ADDR…: `capstan gateway` over the llama-servers;
# sets GW.
start_gateway() {
	local tag=$1 strategy=$2 backends=() i=0
	shift 2
	for a in "$@"; do
		backends+=(--backend "r$i=$a")
		i=$((i + 1))
	done
	"$CAPSTAN" gateway --listen 127.0.0.1:0 --endpoint tiny --strategy "$strategy" --scrape-interval 250ms \
		"${backends[@]}" >"$OUT/gw-$tag.out" 2>"$OUT/gw-$tag.log" &
	PIDS+=($!)
	GW=$(wait_addr "$OUT/gw-$tag.out")
}

# --- 1. gateway overhead ------------------------------------------------
if want overhead; then
	start_llama "$OUT/llama-overhead.log"
	direct=$LLAMA_ADDR
	start_gateway overhead roundrobin "$direct"
	common=(--no-stream --workload "$OVERHEAD_WORKLOAD" --concurrency "$OVERHEAD_CONCURRENCY" --duration "$OVERHEAD_DURATION")
	# Warm-up: connections, the engine's compute graphs.
	bench overhead-warm-direct "${common[@]}" --target "http://$direct" --duration 2s --seed 900
	bench overhead-warm-gateway "${common[@]}" --target "http://$GW" --duration 2s --seed 901
	order=(direct gateway)
	for r in $(seq 1 "$ROUNDS"); do
		for t in "${order[@]}"; do
			url=http://$direct
			[[ $t == gateway ]] && url=http://$GW
			bench "overhead-$t-$r" "${common[@]}" --target "$url" --seed $((1000 + 10 * r + ${#t}))
		done
		order=("${order[@]:1}" "${order[0]}")
	done
	cleanup
fi

# --- 2. prefixaware vs roundrobin ----------------------------------------
if want routing; then
	for s in roundrobin prefixaware; do
		# shellcheck disable=SC2086 # ROUTING_LLAMA_ARGS is a list of words
		start_llama "$OUT/llama-routing-$s-0.log" $ROUTING_LLAMA_ARGS
		a0=$LLAMA_ADDR
		# shellcheck disable=SC2086
		start_llama "$OUT/llama-routing-$s-1.log" $ROUTING_LLAMA_ARGS
		a1=$LLAMA_ADDR
		start_gateway "routing-$s" "$s" "$a0" "$a1"
		sleep 0.5 # first scrape
		bench "routing-$s" --target "http://$GW" --workload "$SP_WORKLOAD" --rate "$SP_RATE" \
			--requests "$SP_REQUESTS" --max-concurrency 64 --seed 7
		for a in "$a0" "$a1"; do
			curl -fsS "http://$a/metrics" >"$OUT/metrics-routing-$s-${a##*:}.txt" || true
		done
		cleanup
	done
fi

# --- 3. cold start from zero --------------------------------------------
if want coldstart; then
	# llama-server alone, exec to /health 200, for scale.
	: >"$OUT/cold-engine.txt"
	for r in $(seq 1 "$COLD_REPS"); do
		t0=$(date +%s%N)
		start_llama "$OUT/llama-cold-$r.log"
		echo $((($(date +%s%N) - t0) / 1000000)) >>"$OUT/cold-engine.txt"
		cleanup
	done
	cat >"$OUT/capstan.yaml" <<YAML
engines:
  llamacpp:
    binary: $LLAMA_DIR/llama-server
    args: ["--threads", "1"]
YAML
	model_dir="$OUT/data/fsx/fs-0123456789abcdef0/capstan/tiny"
	mkdir -p "$model_dir"
	cp "$LLAMA_DIR/tiny.gguf" "$model_dir/"
	"$CAPSTAN" serve --listen 127.0.0.1:0 --data-dir "$OUT/data" --config "$OUT/capstan.yaml" \
		>"$OUT/serve.out" 2>"$OUT/serve.log" &
	PIDS+=($!)
	SERVE=$(wait_serving "$OUT/serve.out" "$OUT/serve.log")
	export CAPSTAN_SERVER=$SERVE
	for r in $(seq 1 "$COLD_REPS"); do
		cat >"$OUT/cold-$r.yaml" <<YAML
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: cold$r, namespace: default}
spec:
  modelName: cold$r
  endpointName: cold$r
  instanceType: ml.g5.12xlarge
  replicas: 0
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
  autoScalingSpec:
    minReplicaCount: 0
    maxReplicaCount: 1
    pollingInterval: 1
    cooldownPeriod: 300
    cloudWatchTrigger: {namespace: capstan, metricName: InFlightPerReplica, metricType: Value, targetValue: 1, activationTargetValue: 0, metricCollectionPeriod: 1, metricCollectionStartTime: 1}
YAML
		"$CAPSTAN" apply -f "$OUT/cold-$r.yaml" >"$OUT/cold-apply-$r.txt" 2>&1 || { cat "$OUT/cold-apply-$r.txt" >&2; exit 1; }
	done
	# Every deployment settled at 0 replicas, none with a llama-server.
	for r in $(seq 1 "$COLD_REPS"); do
		for _ in $(seq 1 200); do
			st=$("$CAPSTAN" get iec "cold$r" -o json 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin).get("status",{}); print(s.get("state",""), s.get("replicas",0))' 2>/dev/null || true)
			[[ -n "$st" && "$st" != " "* && "${st##* }" == 0 ]] && break
			sleep 0.1
		done
	done
	sleep 1
	: >"$OUT/cold-serve.txt"
	for r in $(seq 1 "$COLD_REPS"); do
		t0=$(date +%s%N)
		curl -fsS --max-time 120 "$SERVE/v1/completions" -H 'Content-Type: application/json' \
			-d "{\"model\":\"cold$r\",\"prompt\":\"Hello\",\"max_tokens\":4}" -o "$OUT/cold-answer-$r.json" ||
			{ echo "the request at zero (cold$r) failed" >&2; tail -30 "$OUT/serve.log" >&2; exit 1; }
		ms=$((($(date +%s%N) - t0) / 1000000))
		grep -q text_completion "$OUT/cold-answer-$r.json" || { cat "$OUT/cold-answer-$r.json" >&2; exit 1; }
		# A second request to the now warm replica, for scale.
		t0=$(date +%s%N)
		curl -fsS --max-time 60 "$SERVE/v1/completions" -H 'Content-Type: application/json' \
			-d "{\"model\":\"cold$r\",\"prompt\":\"Hello\",\"max_tokens\":4}" -o /dev/null
		echo "$ms $((($(date +%s%N) - t0) / 1000000))" >>"$OUT/cold-serve.txt"
		echo "== cold$r: first answer after ${ms} ms" >&2
	done
	for r in $(seq 1 "$COLD_REPS"); do "$CAPSTAN" delete iec "cold$r" >/dev/null 2>&1 || true; done
	cleanup
fi

# --- 4. calibration: simulator vs llama-server ---------------------------
if want calibration; then
	mkdir -p "$OUT/tiny"
	# test/engines/tiny_gguf.py's shape: untied f16 embedding and LM head,
	# f32 layer weights (0.4 M of 8.6 M parameters; the engine keeps an f16
	# KV cache, so 2 bytes is the closer dtype), 4,096-token context.
	cat >"$OUT/tiny/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 384, "vocab_size": 32000,
 "max_position_embeddings": 4096, "tie_word_embeddings": false, "rms_norm_eps": 1e-5, "torch_dtype": "float16"}
JSON
	start_llama "$OUT/llama-cal.log"
	real=$LLAMA_ADDR
	# The engine's own batching: llama-server runs $LLAMA_SLOTS slots and
	# computes at most 512 tokens per pass (its default --ubatch-size), so
	# the simulator gets as many sequences and tokens per step.
	"$CAPSTAN" engine sim --model-dir "$OUT/tiny" --served-model-name tiny --gpu "$SIM_GPU" --port 0 \
		--max-num-seqs "${LLAMA_SLOTS:-4}" --max-num-batched-tokens 512 --log-level warn >"$OUT/sim-cal.out" 2>"$OUT/sim-cal.log" &
	PIDS+=($!)
	sim=$(wait_addr "$OUT/sim-cal.out")
	bench cal-warm-real --target "http://$real" --workload "$CAL_WORKLOAD" --concurrency 4 --requests 8 --seed 500
	# The same prompt tokens on both: llama.cpp's tokenizer makes more tokens
	# of the workload's prompts than the simulator's one per word, so the
	# simulator is sent prompts of the length llama-server counted.
	tokens=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["stages"][0]["summaries"][0]; print(round(s["input_tokens"]/s["succeeded"]))' "$OUT/cal-warm-real.json")
	sim_workload=$(sed -E "s/input=[0-9]+/input=$tokens/" <<<"$CAL_WORKLOAD")
	# The real engine's latencies vary by ±25 % from one run to the next on
	# a shared 2-core machine: CAL_ROUNDS rounds, the median of each.
	for r in $(seq 1 "$CAL_ROUNDS"); do
		for c in 1 4 8; do
			for t in real sim; do
				url=http://$real workload=$CAL_WORKLOAD
				[[ $t == sim ]] && url=http://$sim workload=$sim_workload
				bench "cal-$t-c$c-$r" --target "$url" --workload "$workload" --concurrency "$c" \
					--requests $((c * CAL_REQUESTS)) --seed $((600 + 10 * r + c))
			done
		done
	done
	cleanup
fi

echo "all figures in $((SECONDS - START)) s" >&2

python3 - "$OUT" "$FIGURES" "$SIM_GPU" <<'PY'
import glob, json, os, statistics, sys
out, figures, sim_gpu = sys.argv[1], sys.argv[2].split(), sys.argv[3]
def summ(tag):
    return json.load(open(f"{out}/{tag}.json"))["stages"][0]["summaries"][0]
def runs(prefix):
    fs = sorted(glob.glob(f"{out}/{prefix}-[0-9]*.json"), key=lambda f: int(f.rsplit("-", 1)[1].split(".")[0]))
    return [json.load(open(f))["stages"][0]["summaries"][0] for f in fs]
med = statistics.median

if "overhead" in figures:
    d, g = runs("overhead-direct"), runs("overhead-gateway")
    m = lambda rs, f: med(f(r) for r in rs)
    e2e_mean = lambda r: r["e2e_ms"]["mean"]
    e2e_p50 = lambda r: r["e2e_ms"]["p50"]
    rps = lambda r: r["requests_per_second"]
    print(f'RESULT engines gateway-overhead e2e_mean_ratio={m(g, e2e_mean)/m(d, e2e_mean):.3f} '
          f'e2e_p50_ratio={m(g, e2e_p50)/m(d, e2e_p50):.3f} throughput_ratio={m(g, rps)/m(d, rps):.3f} '
          f'direct_e2e_mean_ms={m(d, e2e_mean):.2f} gateway_e2e_mean_ms={m(g, e2e_mean):.2f} '
          f'direct_e2e_p50_ms={m(d, e2e_p50):.2f} gateway_e2e_p50_ms={m(g, e2e_p50):.2f} '
          f'direct_rps={m(d, rps):.1f} gateway_rps={m(g, rps):.1f} rounds={len(d)} '
          f'failed={sum(r["failed"] for r in g)} direct_failed={sum(r["failed"] for r in d)}')

if "routing" in figures:
    def cached(s):
        # llama-server's own count of prompt tokens it reused, both replicas.
        tot = {"cached": 0.0, "computed": 0.0}
        for f in glob.glob(f"{out}/metrics-routing-{s}-*.txt"):
            for line in open(f):
                k = line.split()
                if len(k) == 2 and k[0] == "llamacpp:prompt_tokens_cached_total": tot["cached"] += float(k[1])
                if len(k) == 2 and k[0] == "llamacpp:prompt_tokens_total": tot["computed"] += float(k[1])
        return tot["cached"] / max(1.0, tot["cached"] + tot["computed"])
    b, x = summ("routing-roundrobin"), summ("routing-prefixaware")
    print(f'RESULT engines prefixaware ttft_p90_speedup={b["ttft_ms"]["p90"]/max(1e-9, x["ttft_ms"]["p90"]):.2f} '
          f'ttft_p50_speedup={b["ttft_ms"]["p50"]/max(1e-9, x["ttft_ms"]["p50"]):.2f} '
          f'throughput_gain={x["output_tokens_per_second"]/max(1e-9, b["output_tokens_per_second"]):.2f} '
          f'ttft_p90_ms={x["ttft_ms"]["p90"]:.1f} baseline_ttft_p90_ms={b["ttft_ms"]["p90"]:.1f} '
          f'engine_hit_rate={cached("prefixaware"):.3f} baseline_engine_hit_rate={cached("roundrobin"):.3f} '
          f'failed={x["failed"]} baseline_failed={b["failed"]} requests={x["requests"]}')

if "coldstart" in figures:
    eng = [int(l) for l in open(f"{out}/cold-engine.txt")]
    srv = [tuple(map(int, l.split())) for l in open(f"{out}/cold-serve.txt")]
    first = [a for a, _ in srv]
    print(f'RESULT engines cold-start first_answer_ms_median={med(first):.0f} first_answer_ms_min={min(first)} '
          f'first_answer_ms_max={max(first)} warm_answer_ms_median={med(w for _, w in srv):.0f} '
          f'llama_server_alone_ms_median={med(eng):.0f} reps={len(srv)} all_ms={",".join(map(str, first))}')

if "calibration" in figures:
    parts = []
    for c in (1, 4, 8):
        real, sim = runs(f"cal-real-c{c}"), runs(f"cal-sim-c{c}")
        rt, ri = [x["ttft_ms"]["mean"] for x in real], [x["itl_ms"]["mean"] for x in real]
        st, si = [x["ttft_ms"]["mean"] for x in sim], [x["itl_ms"]["mean"] for x in sim]
        parts.append(f'c{c}_ttft_ratio={med(st)/med(rt):.2f} c{c}_itl_ratio={med(si)/med(ri):.2f}')
        print(f'# calibration c={c}, median of {len(real)} rounds: real ttft {med(rt):.1f} ms '
              f'({min(rt):.1f}-{max(rt):.1f}) itl {med(ri):.3f} ms ({min(ri):.3f}-{max(ri):.3f}), '
              f'prompt {real[0]["input_tokens"]/max(1, real[0]["succeeded"]):.0f} tok, failed {sum(x["failed"] for x in real)} | '
              f'sim ttft {med(st):.1f} ms itl {med(si):.3f} ms, prompt {sim[0]["input_tokens"]/max(1, sim[0]["succeeded"]):.0f} tok',
              file=sys.stderr)
    print(f'RESULT engines calibration device={sim_gpu} rounds={len(runs("cal-real-c1"))} ' + " ".join(parts))
PY
