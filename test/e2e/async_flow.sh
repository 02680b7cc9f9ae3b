#!/usr/bin/env bash
# End-to-end asynchronous inference with the real aws CLI: start moto's
# standalone S3 server, start `capstan serve --s3-endpoint`, create an endpoint
# whose config has an AsyncInferenceConfig, put an input object, call
# invoke-endpoint-async, wait for the output object in S3 and print it; then
# a missing input (failure object), a real-time endpoint refusing async calls,
# and config validation errors.
# Needs CAPSTAN_BIN (path to the capstan binary), the aws CLI and moto_server.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${CAPSTAN_BIN:?set CAPSTAN_BIN to the capstan binary}"
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }

# lib/serve.sh (sourced below, once moto is up) takes over work, bg_pids and
# the cleanup.
work=$(mktemp -d)
bg_pids=()
trap 'for p in "${bg_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_PAGER="" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

# shellcheck source=lib/moto.sh
source "$(dirname "$0")/lib/moto.sh"
s3api() { aws s3api --endpoint-url "$s3" "$@"; }
s3cli mb s3://async-demo >/dev/null
echo "moto S3 at $s3"

serve_args=(--s3-endpoint "$s3")
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"

# wait_object KEY: poll the bucket until KEY exists, then print it.
wait_object() {
  for _ in $(seq 1 200); do
    if s3api get-object --bucket async-demo --key "$1" "$work/obj" >/dev/null 2>&1; then
      cat "$work/obj"
      return 0
    fi
    sleep 0.1
  done
  fail "s3://async-demo/$1 never appeared"
}

sm create-model --model-name m1 \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' >/dev/null
variants='[{"VariantName":"AllTraffic","ModelName":"m1","InitialInstanceCount":1,"InstanceType":"ml.g5.xlarge"}]'
sm create-endpoint-config --endpoint-config-name async-cfg --production-variants "$variants" \
  --async-inference-config '{"ClientConfig":{"MaxConcurrentInvocationsPerInstance":4},"OutputConfig":{"S3OutputPath":"s3://async-demo/output","S3FailurePath":"s3://async-demo/failure"}}' >/dev/null
sm create-endpoint --endpoint-name async-ep --endpoint-config-name async-cfg >/dev/null
wait_status async-ep InService
echo "async-ep InService"

echo '{"inputs":"What is a GPU?","parameters":{"max_new_tokens":8}}' >"$work/in.json"
s3cli cp --only-show-errors "$work/in.json" s3://async-demo/input/req.json
smr invoke-endpoint-async --endpoint-name async-ep --input-location s3://async-demo/input/req.json \
  --content-type application/json --inference-id req-1 >"$work/acc.json"
cat "$work/acc.json"
grep -q '"OutputLocation": "s3://async-demo/output/req-1.out"' "$work/acc.json" || fail "OutputLocation: $(cat "$work/acc.json")"
grep -q '"FailureLocation": "s3://async-demo/failure/req-1-error.out"' "$work/acc.json" || fail "FailureLocation: $(cat "$work/acc.json")"
out=$(wait_object output/req-1.out)
echo "output: $out"
[ -n "$out" ] || fail "empty output object"

smr invoke-endpoint-async --endpoint-name async-ep --input-location s3://async-demo/input/missing.json --inference-id req-2 >/dev/null
err=$(wait_object failure/req-2-error.out)
echo "failure: $err"
grep -q "does not exist" <<<"$err" || fail "failure object: $err"

# From a file: grep -q under pipefail could SIGPIPE curl.
curl -fsS "$url/metrics" >"$work/metrics.txt"
grep -q 'capstan_async_backlog{endpoint="async-ep"}' "$work/metrics.txt" || fail "no capstan_async_backlog metric"

# A real-time endpoint refuses async invocations; bad configs are refused.
sm create-endpoint-config --endpoint-config-name rt-cfg --production-variants "$variants" >/dev/null
sm create-endpoint --endpoint-name rt-ep --endpoint-config-name rt-cfg >/dev/null
wait_status rt-ep InService
expect_error ValidationError "is not configured for asynchronous inference" \
  smr invoke-endpoint-async --endpoint-name rt-ep --input-location s3://async-demo/input/req.json
expect_error ValidationException "at 'asyncInferenceConfig.outputConfig.s3OutputPath' failed to satisfy constraint: Member must not be null" \
  sm create-endpoint-config --endpoint-config-name bad --production-variants "$variants" --async-inference-config '{"OutputConfig":{}}'
expect_error ValidationException "at 'asyncInferenceConfig.clientConfig.maxConcurrentInvocationsPerInstance'" \
  sm create-endpoint-config --endpoint-config-name bad --production-variants "$variants" \
  --async-inference-config '{"ClientConfig":{"MaxConcurrentInvocationsPerInstance":1001},"OutputConfig":{"S3OutputPath":"s3://async-demo/o"}}'
echo "async flow ok"
