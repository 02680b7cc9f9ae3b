#!/usr/bin/env bash
# CPU instance types with the real aws CLI against `capstan serve` (default fleet): a small
# model on ml.c5.2xlarge reaches InService and answers; a model too big for a CPU instance's
# memory ends Failed with a FailureReason naming the memory; training plans refuse CPU types.
# Needs CAPSTAN_BIN (path to the capstan binary).
set -euo pipefail

# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

sm create-model --model-name small \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"Qwen/Qwen2.5-0.5B-Instruct"}}' >/dev/null
sm create-endpoint-config --endpoint-config-name cpu-cfg --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"small","InitialInstanceCount":2,"InstanceType":"ml.c5.2xlarge"}]' >/dev/null
sm create-endpoint --endpoint-name cpu-ep --endpoint-config-name cpu-cfg >/dev/null
wait_status cpu-ep InService
n=$(sm describe-endpoint --endpoint-name cpu-ep --query 'ProductionVariants[0].CurrentInstanceCount' --output text)
[ "$n" = 2 ] || fail "CurrentInstanceCount $n, want 2"
echo "InService on ml.c5.2xlarge x2"

echo '{"inputs":"Hello from a CPU","parameters":{"max_new_tokens":4}}' >"$work/in.json"
smr invoke-endpoint --endpoint-name cpu-ep --body "fileb://$work/in.json" \
  --content-type application/json "$work/out.json" >/dev/null
grep -q generated_text "$work/out.json" || fail "invocation output: $(cat "$work/out.json")"
echo "invoked: $(head -c 120 "$work/out.json")"

# The replica's engine runs the CPU profile (its metrics read through capstan:
# the replica's own port wants its API key).
log=$(ls "$work/data/replicas/"cpu-ep.AllTraffic.*.log | head -1)
replica=$(basename "$log" .log)
curl -sf "$url/_capstan/replicas/$replica/metrics" >"$work/metrics.txt" || fail "engine metrics of $replica"
grep -q 'capstan_engine_placement_info{.*device="cpu".*gpu="ml.c5.2xlarge"' "$work/metrics.txt" ||
  fail "placement: $(grep placement_info "$work/metrics.txt")"
echo "engine device: cpu (ml.c5.2xlarge)"

# A model whose weights exceed the instance's memory: Failed, naming the memory.
sm create-model --model-name big \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' >/dev/null
sm create-endpoint-config --endpoint-config-name big-cfg --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"big","InitialInstanceCount":1,"InstanceType":"ml.c5.2xlarge"}]' >/dev/null
sm create-endpoint --endpoint-name big-ep --endpoint-config-name big-cfg >/dev/null
wait_status big-ep Failed
reason=$(sm describe-endpoint --endpoint-name big-ep --query FailureReason --output text)
grep -q "16 GiB of memory" <<<"$reason" || fail "FailureReason: $reason"
echo "too big: $reason"

# Training plans reserve GPU types only.
expect_error ValidationException "Value 'ml.m5.xlarge' at 'instanceType' failed to satisfy constraint" \
  sm search-training-plan-offerings --instance-type ml.m5.xlarge --instance-count 1 --duration-hours 24 \
  --target-resources endpoint

sm delete-endpoint --endpoint-name cpu-ep
echo "OK"
