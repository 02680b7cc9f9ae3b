#!/usr/bin/env bash
# End-to-end prometheusTrigger against a real Prometheus: start `capstan serve`
# and Debian's `prometheus` scraping the server's own /metrics every second,
# apply an InferenceEndpointConfig that scales 1..3 on
# sum(capstan_gateway_in_flight_requests{endpoint="prom-flow"}) (target 2 per
# replica, polling 1 s), drive load with `capstan bench`, and check that
# replicas go 1 → N (>1) → 1 with no failed request, that the decision metrics
# on capstan's /metrics carry the trigger's value, and that once Prometheus is
# gone the trigger fails (FailedGetMetrics) without scaling the deployment.
# Needs CAPSTAN_BIN (path to the capstan binary) and prometheus (test/run.sh
# installs it). About 45 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
command -v jq >/dev/null || fail "jq is required"
command -v curl >/dev/null || fail "curl is required"
command -v prometheus >/dev/null || fail "prometheus is required (test/run.sh installs it)"
export CAPSTAN_SERVER=$url
cap() { "$CAPSTAN_BIN" "$@"; }
name=prom-flow
trigger=$name-scaled-object-prometheus-trigger # the manifest default for an unnamed prometheusTrigger

# fail from lib/serve.sh, plus Prometheus' log: a scrape or query problem shows
# there, not in the server's.
serve_fail=$(declare -f fail | sed '1s/^fail/serve_fail/')
eval "$serve_fail"
fail() {
  echo "--- prometheus log (tail)" >&2
  tail -n 30 "$work/prometheus.log" >&2 2>/dev/null || true
  serve_fail "$@"
}

prom_pid="" sampler=""
stop_sampler() {
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    sampler=""
  fi
}
stop_prometheus() {
  if [ -n "$prom_pid" ]; then
    kill -TERM "$prom_pid" 2>/dev/null || true
    wait "$prom_pid" 2>/dev/null || true
    prom_pid=""
  fi
}
trap 'stop_sampler; stop_prometheus; cleanup' EXIT

# Prometheus: scrape the server every second (the timeout must not exceed the
# interval), TSDB in the temp dir. It cannot listen on port 0 and report the
# port, so pick a free one and retry on the rare lost race.
cat >"$work/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: capstan
    static_configs: [{targets: ["${url#http://}"]}]
EOF
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
prom_url=""
for _ in 1 2 3; do
  port=$(free_port)
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$port" --log.level=info >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  for _ in $(seq 1 300); do
    kill -0 "$prom_pid" 2>/dev/null || break
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null; then
      prom_url="http://127.0.0.1:$port"
      break
    fi
    sleep 0.1
  done
  [ -n "$prom_url" ] && break
  stop_prometheus
done
[ -n "$prom_url" ] || fail "prometheus did not become ready"
echo "prometheus at $prom_url"

# promq QUERY: the instant query's single value ("" when the vector is empty).
promq() {
  curl -fsS "$prom_url/api/v1/query" --data-urlencode "query=$1" |
    jq -r 'if .status != "success" then error(.error) else (.data.result[0].value[1] // "") end'
}

# Up before the manifest goes in, so the trigger's first polls already read
# scraped data rather than an empty answer.
up=""
for _ in $(seq 1 120); do
  up=$(curl -fsS "$prom_url/api/v1/targets" |
    jq -r '[.data.activeTargets[] | select(.labels.job == "capstan") | .health] | first // ""') || true
  [ "$up" = up ] && break
  sleep 0.25
done
[ "$up" = up ] || fail "prometheus target not up (last: '$up')"
[ "$(promq 'up{job="capstan"}')" = 1 ] || fail "up{job=\"capstan\"} is not 1"
echo "prometheus scrapes the server"

# The model folder lives under the server's default fsxRoot (<dataDir>/fsx):
# fsxRoot/<fileSystemId>/<mountName>/<modelLocation>.
model_dir="$work/data/fsx/fs-0123456789abcdef0/capstan/tinyllama"
mkdir -p "$model_dir"
cp "$here/testdata/models/tinyllama/"* "$model_dir/"

sed "s|@PROMETHEUS_URL@|$prom_url|" "$here/testdata/prometheus-trigger.yaml" >"$work/prometheus-trigger.yaml"
cap apply -f "$work/prometheus-trigger.yaml" >"$work/apply.out" 2>&1 || fail "apply: $(cat "$work/apply.out")"
grep -q created "$work/apply.out" || fail "apply did not create: $(cat "$work/apply.out")"

# metric NAME [REASON]: this deployment's series of a capstan_autoscaler_*
# metric on capstan's /metrics (the trigger's for trigger_value, the reason's
# for decisions_total); empty when absent.
metric() {
  local body
  body=$(curl -fsS "$url/metrics") || return 1
  awk -v m="$1" -v obj="$name" -v tr="$trigger" -v reason="${2:-}" '
    function has(l, v) { return index($0, l "=\"" v "\"") > 0 }
    index($0, m "{") == 1 && has("namespace", "default") && has("name", obj) && has("kind", "InferenceEndpointConfig") {
      if (m ~ /trigger_value$/ && !has("trigger", tr)) next
      if (reason != "" && !has("reason", reason)) next
      print $NF; exit
    }' <<<"$body"
}

# shellcheck source=lib/deployment.sh
source "$here/lib/deployment.sh"

wait_state DeploymentComplete
[ "$(replicas)" = 1 ] || fail "replicas after deployment: $(replicas), want 1"
# Idle, the query is an empty vector (the gauge has no series before the first
# request), which the trigger reads as 0 (ignoreNullValues).
tv=""
for _ in $(seq 1 40); do
  tv=$(metric capstan_autoscaler_trigger_value) || true
  [ -n "$tv" ] && break
  sleep 0.25
done
[ "$tv" = 0 ] || fail "idle trigger value on /metrics: '$tv', want 0"
echo "deployed with 1 replica; idle trigger value 0"

# Sample replicas and the trigger value for the whole load phase; checked at the end.
(
  while :; do
    r=$(replicas 2>/dev/null) && echo "$r" >>"$work/replicas.log"
    v=$(metric capstan_autoscaler_trigger_value 2>/dev/null) && [ -n "$v" ] && echo "$v" >>"$work/trigger.log"
    # Not faster: each sample runs a few processes, and on 2 cores a busier
    # sampler starves the load generator (see the query's note in the YAML).
    sleep 0.5
  done
) &
sampler=$!

# Load: 6 requests always outstanding, each about 40 ms (512 tokens at the
# engine time scale 0.01). Prometheus sees about 6 in flight, the trigger
# proposes ceil(6 / 2) = 3 replicas, the maximum.
conc=6
echo "load: concurrency $conc for 15s"
cap bench --target "$url" --model "$name" --workload random:input=64,output=512 --concurrency "$conc" \
  --duration 15s --timeout 2m --progress 0 --no-metrics --out "$work/load.json" >"$work/load.txt" 2>&1 ||
  fail "bench (load): $(tail -20 "$work/load.txt")"
failed=$(jq '.stages[0].summaries[0].failed' "$work/load.json")
ok=$(jq '.stages[0].summaries[0].succeeded' "$work/load.json")
[ "$failed" = 0 ] || fail "$failed requests failed under load: $(jq -c '.stages[0].summaries[0].errors' "$work/load.json")"
[ "$ok" -gt 0 ] || fail "no request succeeded under load"
peak=$(sort -n "$work/replicas.log" | tail -1)
[ "$peak" -gt 1 ] || fail "replicas never went above 1 under load (peak $peak; trigger values: $(sort -gu "$work/trigger.log" | tr '\n' ' '))"
echo "load: $ok requests ok, 0 failed; peak replicas $peak"

# The value the trigger reported is what Prometheus scraped: the endpoint's
# in-flight requests, so above the per-replica target at the peak and never
# more than the requests the load kept outstanding. A request leaves the
# gateway's in-flight count when its body is closed there, which can be just
# after the client has sent its next one, so each worker may count twice for
# a moment: the bound is 2 × concurrency, still far below a cumulative count.
peak_tv=$(sort -g "$work/trigger.log" | tail -1)
awk -v v="$peak_tv" -v c="$conc" 'BEGIN { exit !(v > 2 && v < 2 * c) }' ||
  fail "peak trigger value on /metrics $peak_tv, want in (2, $((2 * conc)))"
echo "peak trigger value on /metrics: $peak_tv"
[ -n "$(metric capstan_autoscaler_desired_replicas)" ] || fail "no capstan_autoscaler_desired_replicas series"

# Idle: Prometheus scrapes 0 in flight, and the deployment goes back to min 1
# after the scale-down window.
wait_replicas -eq 1 45
stop_sampler
echo 1 >>"$work/replicas.log"
seq=$(uniq "$work/replicas.log" | tr '\n' ' ')
echo "replica sequence: $seq"
python3 - "$seq" <<'PY' || fail "replica sequence $seq lacks 1 → N → 1"
import sys
vals = [int(v) for v in sys.argv[1].split()]
want = [lambda v: v == 1, lambda v: v > 1, lambda v: v == 1]
i = 0
for v in vals:
    if i < len(want) and want[i](v):
        i += 1
sys.exit(0 if i == len(want) else 1)
PY
tv=""
for _ in $(seq 1 40); do
  tv=$(metric capstan_autoscaler_trigger_value) || true
  [ "$tv" = 0 ] && break
  sleep 0.25
done
[ "$tv" = 0 ] || fail "trigger value after load: '$tv', want 0"
[ "$(metric capstan_autoscaler_desired_replicas)" = 1 ] || fail "desired replicas on /metrics: $(metric capstan_autoscaler_desired_replicas), want 1"
echo "scaled in to 1; trigger value back to 0"

# With Prometheus gone the trigger's queries fail: the scaler reports
# FailedGetMetrics (or holds on the fallback) and never scales below min.
stop_prometheus
before=$(metric capstan_autoscaler_decisions_total FailedGetMetrics) || true
failed_gets=""
for _ in $(seq 1 40); do
  failed_gets=$(metric capstan_autoscaler_decisions_total FailedGetMetrics) || true
  [ -n "$failed_gets" ] && [ "$failed_gets" != "${before:-0}" ] && break
  sleep 0.25
done
[ -n "$failed_gets" ] && [ "$failed_gets" != "${before:-0}" ] ||
  fail "no FailedGetMetrics decision after prometheus stopped (count '${failed_gets}')"
grep -q "prometheus http://127.0.0.1:$port" "$work/server.log" ||
  fail "server log does not name the failing prometheus query"
[ "$(replicas)" = 1 ] || fail "replicas after prometheus stopped: $(replicas), want 1"
echo "prometheus stopped: FailedGetMetrics decisions $failed_gets, replicas stay 1"

cap delete iec "$name" >/dev/null || fail "delete $name"
echo "prometheus trigger flow passed"
