# Sourced by the bench scripts: process bookkeeping and address discovery.
#   PIDS             background processes to kill on exit (append with PIDS+=($!))
#   cleanup          kill and reap them (also run on EXIT)
#   free_port        a TCP port on 127.0.0.1 that was free a moment ago
#   wait_addr FILE   the host:port a process printed as "listening on http://…"
#   wait_serving OUT LOG  the URL `capstan serve` printed on OUT ("capstan
#                    serving on …"); on failure LOG's tail, and exit
#   run_bench TAG METRICS_URL ARGS…  capstan bench ARGS into $OUT/TAG.{json,txt},
#                    its summary on stderr, then the server's /metrics kept
#   capstan_binary   sets CAPSTAN: as given, else a fresh build into $OUT
#   shared_prefix_knobs  defaults of the routing benchmarks' fleet and
#                    shared-prefix workload (REPLICAS TIME_SCALE GPU_UTIL
#                    SP_WORKLOAD RATE REQUESTS; QUICK=1 for fewer requests)

PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	PIDS=()
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_addr() {
	for _ in $(seq 300); do
		if grep -q 'listening on http://' "$1" 2>/dev/null; then
			grep -o 'listening on http://[^ ]*' "$1" | head -1 | sed 's|listening on http://||'
			return
		fi
		sleep 0.1
	done
	echo "no listening line in $1:" >&2
	cat "$1" >&2
	exit 1
}

capstan_binary() {
	if [[ -z "${CAPSTAN:-}" ]]; then
		CAPSTAN="$OUT/capstan"
		go build -o "$CAPSTAN" ./cmd/capstan
	fi
}

# The shared-prefix workload keeps the reference preset's shape (a long
# system prompt per group, 10:1 against the question, short answers so runs
# stay short) and sizes each replica's KV cache (GPU_UTIL 0.48 = 2,669 blocks
# = 42.7k tokens) so round robin, which shows every group to every replica
# (groups × system = 96k tokens), thrashes, while affinity routing needs
# about an eighth of that per replica. RATE is about twice what round robin
# sustains on this fleet.
shared_prefix_knobs() {
	REPLICAS=${REPLICAS:-8}
	TIME_SCALE=${TIME_SCALE:-1}
	GPU_UTIL=${GPU_UTIL:-0.48}
	SP_WORKLOAD=${SP_WORKLOAD:-shared-prefix:groups=32,prompts=5,system=3000,question=300,output=60}
	RATE=${RATE:-72}
	if [[ "${QUICK:-0}" == 1 ]]; then
		REQUESTS=${REQUESTS:-640}
	else
		REQUESTS=${REQUESTS:-2000}
	fi
}

wait_serving() {
	local u=""
	for _ in $(seq 300); do
		u=$(sed -n 's/^capstan serving on \(http:\/\/.*\)$/\1/p' "$1" 2>/dev/null | head -1) || true
		[[ -n "$u" ]] && break
		sleep 0.1
	done
	[[ -n "$u" ]] || { echo "capstan serve did not start:" >&2; tail -30 "$2" >&2; exit 1; }
	echo "$u"
}

run_bench() {
	local tag=$1 metrics=$2
	shift 2
	"$CAPSTAN" bench "$@" --max-concurrency 512 --timeout 5m --progress 0 \
		--out "$OUT/$tag.json" >"$OUT/$tag.txt" 2>&1 ||
		{ cat "$OUT/$tag.txt" >&2; exit 1; }
	echo "== $tag" >&2
	grep -E 'requests ok|output tok/s|TTFT|cache hit' "$OUT/$tag.txt" >&2 || true
	# The server's own view (routing decisions, request and token counts),
	# kept for looking into a run afterwards.
	curl -fsS "$metrics" >"$OUT/metrics-$tag.txt" 2>/dev/null || true
}

# Real engines (bench/engines.sh):
#   llama_dir        sets LLAMA_DIR: as given, else test/engines/llamacpp.sh's
#                    cached build (llama-server and tiny.gguf)
#   wait_http URL [SECONDS]  poll URL until it answers 200 (default 60 s)
#   start_llama LOG [ARGS…]  one llama-server on the tiny model on a free
#                    port, `--parallel $LLAMA_SLOTS --threads 1` (two threads
#                    stall under load on 2 cores), extra ARGS appended; sets
#                    LLAMA_ADDR (host:port) once its /health answers 200
llama_dir() {
	if [[ -z "${LLAMA_DIR:-}" ]]; then
		LLAMA_DIR=$(test/engines/llamacpp.sh | tail -1)
	fi
	[[ -x "$LLAMA_DIR/llama-server" && -s "$LLAMA_DIR/tiny.gguf" ]] ||
		{ echo "no llama-server and tiny.gguf in $LLAMA_DIR" >&2; exit 1; }
}

wait_http() {
	local url=$1 secs=${2:-60}
	for _ in $(seq $((secs * 20))); do
		curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "$url did not answer 200 within ${secs}s" >&2
	return 1
}

start_llama() {
	local log=$1 port
	shift
	port=$(free_port)
	"$LLAMA_DIR/llama-server" --model "$LLAMA_DIR/tiny.gguf" --host 127.0.0.1 --port "$port" \
		--parallel "${LLAMA_SLOTS:-4}" --metrics --no-webui --alias tiny --threads 1 "$@" >"$log" 2>&1 &
	PIDS+=($!)
	LLAMA_ADDR=127.0.0.1:$port
	wait_http "http://$LLAMA_ADDR/health" 60 || { tail -20 "$log" >&2; exit 1; }
}

# go_k8s_bench BENCH: runs the Go benchmark BENCH of internal/operator once,
# on the control plane test/k8s/binaries.sh builds (cached) and the capstan
# binary ($CAPSTAN_BIN, else a fresh build), and prints its RESULT lines.
go_k8s_bench() {
	CAPSTAN_K8S_BIN="$(test/k8s/binaries.sh)"
	export CAPSTAN_K8S_BIN
	if [ -z "${CAPSTAN_BIN:-}" ]; then
		go build -o bin/capstan ./cmd/capstan
		CAPSTAN_BIN="$PWD/bin/capstan"
	fi
	export CAPSTAN_BIN
	go test -count=1 -run '^$' -bench "$1" -benchtime 1x -timeout 15m ./internal/operator/ | grep -E '^RESULT|^Benchmark|^ok|FAIL'
}
