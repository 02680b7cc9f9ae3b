#!/usr/bin/env bash
# End-to-end serverless endpoint with the real aws CLI against `capstan serve`:
# a ServerlessConfig endpoint is InService with 0 replicas, a first invocation
# cold-starts one, two concurrent slow invocations scale it to 2 while a third
# is throttled (MaxConcurrency 2), the dev clock moves past the idle timeout
# and it is back to 0; cold starts and cost show in /metrics; bad input gets
# SageMaker's validation error. Needs CAPSTAN_BIN (path to the capstan binary).
set -euo pipefail

# Engines at a tenth of real time: a long generation takes seconds, so two
# requests are surely in flight when the third arrives.
serve_args=(--engine-time-scale 0.1)
# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

count() { sm describe-endpoint --endpoint-name sl --query 'ProductionVariants[0].CurrentInstanceCount' --output text; }
metric() { # metric NAME: the sample of NAME for endpoint sl (0 if none)
  curl -s "$url/metrics" | awk -v n="$1" '$1 ~ "^"n"[{]" && $1 ~ /endpoint="sl"/ {print $2; f=1} END {if (!f) print 0}' | head -1
}
wait_count() {
  local n=""
  for _ in $(seq 1 240); do
    n=$(count) || true
    [ "$n" = "$1" ] && return 0
    sleep 0.25
  done
  fail "CurrentInstanceCount $n, want $1"
}

sm create-model --model-name m \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' >/dev/null

# The CLI checks the model's bounds itself; without its check the server's
# answer shows.
printf '[default]\nparameter_validation = false\n' >"$work/novalidate.cfg"
expect_error ValidationException "Value '1000' at 'productionVariants.1.member.serverlessConfig.memorySizeInMB' failed to satisfy constraint: Member must have value greater than or equal to 1024" \
  env AWS_CONFIG_FILE="$work/novalidate.cfg" aws sagemaker --endpoint-url "$url" create-endpoint-config --endpoint-config-name bad --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"m","ServerlessConfig":{"MemorySizeInMB":1000,"MaxConcurrency":2}}]'
expect_error ValidationException "specifies both ServerlessConfig and InstanceType" \
  sm create-endpoint-config --endpoint-config-name bad --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.g5.xlarge","InitialInstanceCount":1,"ServerlessConfig":{"MemorySizeInMB":2048,"MaxConcurrency":2}}]'
echo "bad input refused"

sm create-endpoint-config --endpoint-config-name sl --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"m","ServerlessConfig":{"MemorySizeInMB":2048,"MaxConcurrency":2}}]' >/dev/null
[ "$(sm describe-endpoint-config --endpoint-config-name sl --query 'ProductionVariants[0].ServerlessConfig.MemorySizeInMB' --output text)" = 2048 ] ||
  fail "describe-endpoint-config lost the ServerlessConfig"
sm create-endpoint --endpoint-name sl --endpoint-config-name sl >/dev/null
wait_status sl InService
[ "$(count)" = 0 ] || fail "InService with $(count) replicas, want 0"
[ "$(sm describe-endpoint --endpoint-name sl --query 'ProductionVariants[0].CurrentServerlessConfig.MaxConcurrency' --output text)" = 2 ] ||
  fail "no CurrentServerlessConfig"
echo "InService with 0 replicas"

echo '{"inputs":"hi","parameters":{"max_new_tokens":4}}' >"$work/short.json"
smr invoke-endpoint --endpoint-name sl --body "fileb://$work/short.json" --content-type application/json "$work/out.json" >/dev/null
[ -s "$work/out.json" ] || fail "empty answer"
[ "$(count)" = 1 ] || fail "$(count) replicas after the first invocation, want 1"
[ "$(metric capstan_endpoint_cold_start_seconds_count)" = 1 ] || fail "cold start not counted: $(metric capstan_endpoint_cold_start_seconds_count)"
echo "cold start: 0 -> 1 replica, answered"

echo '{"inputs":"tell me a long story","parameters":{"max_new_tokens":1500,"ignore_eos":true}}' >"$work/long.json"
for i in 1 2; do
  smr invoke-endpoint --endpoint-name sl --body "fileb://$work/long.json" --content-type application/json "$work/long$i.out" \
    >"$work/long$i.json" 2>"$work/long$i.err" &
  bg_pids+=($!)
done
for _ in $(seq 1 200); do
  [ "$(curl -s "$url/metrics" | awk '/^capstan_gateway_in_flight_requests[{].*endpoint="sl"/ {s+=$2} END {print s+0}')" = 2 ] && break
  sleep 0.05
done
expect_error ThrottlingException "maximum number of concurrent requests" \
  env AWS_RETRY_MODE=standard AWS_MAX_ATTEMPTS=1 aws sagemaker-runtime --endpoint-url "$url" invoke-endpoint \
  --endpoint-name sl --body "fileb://$work/short.json" --content-type application/json "$work/x.json"
echo "third concurrent call throttled"
for p in "${bg_pids[@]}"; do wait "$p" || fail "a call within MaxConcurrency failed: $(cat "$work"/long*.err)"; done
bg_pids=()
[ "$(count)" = 2 ] || fail "$(count) replicas under two concurrent requests, want 2"
echo "scaled 1 -> 2 replicas"

"$CAPSTAN_BIN" clock advance 6m --server "$url" >/dev/null
wait_count 0
echo "idle: back to 0 replicas"

cost=$(metric capstan_endpoint_cost_usd_total)
awk -v c="$cost" 'BEGIN {exit !(c > 0)}' || fail "no cost recorded: $cost"
echo "cost: \$$cost"

sm delete-endpoint --endpoint-name sl
sm delete-endpoint-config --endpoint-config-name sl
echo "serverless_flow: PASS"
