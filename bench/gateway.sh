#!/usr/bin/env bash
# bench/gateway.sh — reproduce the gateway overhead figures of
# docs/performance.md: one simulated replica answering at once
# (--time-scale 0), reached three ways in the same run: directly, through
# the gateway (`capstan gateway`, the routing code `capstan serve` uses) and
# through nginx as a plain reverse proxy. Small non-streaming completions.
#
#   1. latency: open loop at RATE req/s (constant arrivals), each target
#      alone in turn (interleaving three targets at 2,000 req/s each would
#      saturate a 2-core machine and measure the machine, not the proxies);
#      overhead = gateway E2E − direct E2E, at p50 and p99.
#   2. capacity: closed loop with CONCURRENCY workers, each target alone in
#      turn, ROUNDS rounds; ratio = median over rounds of gateway req/s ÷
#      nginx req/s in the same round.
#
#   bench/gateway.sh            full run
#   QUICK=1 bench/gateway.sh    shorter (well within 5 minutes on 2 cores)
#
# Knobs (env): CAPSTAN (binary; default: build ./cmd/capstan), NGINX
# (default /usr/sbin/nginx), RATE, REQUESTS, CONCURRENCY, DURATION, OUT,
# GATEWAY_ENV (extra environment for the gateway process only, e.g.
# GATEWAY_ENV=GOMAXPROCS=1).
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=${QUICK:-0}
OUT=${OUT:-$(mktemp -d /tmp/capstan-gwbench.XXXXXX)}
mkdir -p "$OUT"
NGINX=${NGINX:-/usr/sbin/nginx}
if [[ -z "${CAPSTAN:-}" ]]; then
	CAPSTAN="$OUT/capstan"
	go build -o "$CAPSTAN" ./cmd/capstan
fi
RATE=${RATE:-2000}
CONCURRENCY=${CONCURRENCY:-64}
if [[ "$QUICK" == 1 ]]; then
	REQUESTS=${REQUESTS:-10000}
	DURATION=${DURATION:-10s}
else
	REQUESTS=${REQUESTS:-120000}
	DURATION=${DURATION:-30s}
fi
WORKLOAD=${WORKLOAD:-random:input=32,output=4}

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

"$CAPSTAN" engine sim --model qwen3-32b --gpu h100 --tensor-parallel 2 --port 0 --time-scale 0 \
	--max-waiting 100000 --log-level warn >"$OUT/sim.log" 2>&1 &
PIDS+=($!)
REPLICA=$(wait_addr "$OUT/sim.log")

# shellcheck disable=SC2086 # GATEWAY_ENV is a list of NAME=VALUE words
env ${GATEWAY_ENV:-} "$CAPSTAN" gateway --listen 127.0.0.1:0 --endpoint qwen3-32b --backend "r0=$REPLICA" >"$OUT/gw.log" 2>&1 &
PIDS+=($!)
GW=$(wait_addr "$OUT/gw.log")

NPORT=$(free_port)
mkdir -p "$OUT/nginx"
cat >"$OUT/nginx/nginx.conf" <<CONF
worker_processes auto;
pid $OUT/nginx/nginx.pid;
error_log $OUT/nginx/error.log warn;
events { worker_connections 8192; }
http {
	access_log off;
	client_body_temp_path $OUT/nginx/body;
	proxy_temp_path $OUT/nginx/proxy;
	fastcgi_temp_path $OUT/nginx/fastcgi;
	uwsgi_temp_path $OUT/nginx/uwsgi;
	scgi_temp_path $OUT/nginx/scgi;
	upstream replica { server $REPLICA; keepalive 256; }
	server {
		listen 127.0.0.1:$NPORT;
		location / {
			proxy_pass http://replica;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
		}
	}
}
CONF
"$NGINX" -p "$OUT/nginx" -c "$OUT/nginx/nginx.conf" -g 'daemon off;' >"$OUT/nginx.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$NPORT/health" >/dev/null && break
	sleep 0.1
done

common=(--api openai-completions --model qwen3-32b --no-stream --workload "$WORKLOAD" --progress 0 --no-metrics --timeout 30s)
echo "results in $OUT (replica $REPLICA, gateway $GW, nginx 127.0.0.1:$NPORT)" >&2

# Warm up connections and caches.
"$CAPSTAN" bench "${common[@]}" --compare "direct=http://$REPLICA,gateway=http://$GW,nginx=http://127.0.0.1:$NPORT" \
	--concurrency 8 --requests 2000 >/dev/null 2>&1

url_of() { case $1 in gateway) echo "http://$GW" ;; nginx) echo "http://127.0.0.1:$NPORT" ;; direct) echo "http://$REPLICA" ;; esac; }
# ROUNDS rounds, the order rotating, so other load on the machine does not
# land on one target; the RESULT uses each target's median over the rounds.
ROUNDS=${ROUNDS:-3}
order=(direct gateway nginx)
for r in $(seq 1 "$ROUNDS"); do
	for t in "${order[@]}"; do
		"$CAPSTAN" bench "${common[@]}" --target "$(url_of $t)" --arrival constant --rate "$RATE" --requests "$REQUESTS" \
			--max-concurrency 1024 --out "$OUT/latency-$t-$r.json" >"$OUT/latency-$t-$r.txt" 2>&1 || { cat "$OUT/latency-$t-$r.txt" >&2; exit 1; }
		grep -E 'E2E' "$OUT/latency-$t-$r.txt" | sed "s/^/latency round $r $t: /" >&2
	done
	order=("${order[@]:1}" "${order[0]}")
done
# Capacity the same way: ROUNDS rounds, the order rotating; the ratio is
# the median over rounds of gateway ÷ nginx within a round (the two ran
# within seconds of each other), so a burst of other load on the machine
# during one target's window does not decide the result.
order=(gateway nginx direct)
for r in $(seq 1 "$ROUNDS"); do
	for t in "${order[@]}"; do
		"$CAPSTAN" bench "${common[@]}" --target "$(url_of $t)" --concurrency "$CONCURRENCY" --duration "$DURATION" \
			--out "$OUT/capacity-$t-$r.json" >"$OUT/capacity-$t-$r.txt" 2>&1 || { cat "$OUT/capacity-$t-$r.txt" >&2; exit 1; }
		grep -E 'req/s' "$OUT/capacity-$t-$r.txt" | sed "s/^/capacity round $r $t: /" >&2
	done
	order=("${order[@]:1}" "${order[0]}")
done

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
import glob, statistics
def lat(t):
    runs = [json.load(open(f))["stages"][0]["summaries"][0] for f in sorted(glob.glob(f"{out}/latency-{t}-*.json"))]
    return {"e2e_ms": {q: statistics.median(r["e2e_ms"][q] for r in runs) for q in ("p50", "p99")},
            "offered_rate": runs[0]["offered_rate"], "requests_per_second": statistics.median(r["requests_per_second"] for r in runs),
            "failed": sum(r["failed"] for r in runs)}
d, g, n = lat("direct"), lat("gateway"), lat("nginx")
def rps(t):
    return [json.load(open(f))["stages"][0]["summaries"][0]["requests_per_second"]
            for f in sorted(glob.glob(f"{out}/capacity-{t}-*.json"), key=lambda f: int(f.rsplit("-", 1)[1].split(".")[0]))]
cap = {t: {"requests_per_second": statistics.median(rps(t))} for t in ("gateway", "nginx", "direct")}
ratio = statistics.median(gw / max(1e-9, ng) for gw, ng in zip(rps("gateway"), rps("nginx")))
us = lambda a, b, q: (a["e2e_ms"][q] - b["e2e_ms"][q]) * 1000
print(f'RESULT gateway p50_overhead_us={us(g, d, "p50"):.0f} p99_overhead_us={us(g, d, "p99"):.0f} '
      f'nginx_p50_overhead_us={us(n, d, "p50"):.0f} nginx_p99_overhead_us={us(n, d, "p99"):.0f} '
      f'offered_rps={g["offered_rate"]} achieved_rps={g["requests_per_second"]:.0f} failed={g["failed"]} '
      f'nginx_rate_ratio={ratio:.2f} '
      f'gateway_rps={cap["gateway"]["requests_per_second"]:.0f} nginx_rps={cap["nginx"]["requests_per_second"]:.0f} direct_rps={cap["direct"]["requests_per_second"]:.0f}')
PY
