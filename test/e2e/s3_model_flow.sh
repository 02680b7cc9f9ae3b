#!/usr/bin/env bash
# End-to-end SageMaker model from S3: start moto's standalone server, upload a
# model.tar.gz whose config.json is a model in no catalog (a 30-layer ~2.8B
# architecture) and one without config.json, start `capstan serve
# --s3-endpoint`, `aws sagemaker create-model --primary-container
# ModelDataUrl=s3://…` (the archive is fetched and extracted at CreateModel),
# check the refusal of the bad archive and of a missing object, create the
# endpoint config and endpoint, invoke it, and check the engine runs the
# archive's architecture. Then the same model from an uncompressed prefix via
# ModelDataSource, and a JumpStart id through SM_MODEL_ID.
# Needs CAPSTAN_BIN (path to the capstan binary), the aws CLI, moto_server
# (or python3 -m moto.server), python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${CAPSTAN_BIN:?set CAPSTAN_BIN to the capstan binary}"
for c in aws python3 curl; do command -v "$c" >/dev/null || { echo "$c is required" >&2; exit 1; }; done

# lib/serve.sh (sourced below, once moto is up) takes over work, bg_pids and
# the cleanup.
work=$(mktemp -d)
bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- server log (tail)" >&2
  tail -n 60 "$work/server.log" >&2 || true
  exit 1
}

# The server's S3 client reads these too (moto accepts any credentials).
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_PAGER="" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

# 1. moto and the artifacts.
# shellcheck source=lib/moto.sh
source "$(dirname "$0")/lib/moto.sh"

mkdir -p "$work/model/my-model" "$work/bad"
cat >"$work/model/my-model/config.json" <<'JSON'
{
  "_name_or_path": "acme/custom-3b",
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 2560,
  "intermediate_size": 8960,
  "num_hidden_layers": 30,
  "num_attention_heads": 20,
  "num_key_value_heads": 4,
  "head_dim": 128,
  "vocab_size": 50000,
  "max_position_embeddings": 16384,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
}
JSON
echo '{}' >"$work/model/my-model/tokenizer_config.json"
echo 'not a model folder' >"$work/bad/weights.bin"
# config.json one folder down, as `tar czf model.tar.gz my-model` writes it.
tar -C "$work/model" -czf "$work/model.tar.gz" my-model
tar -C "$work/bad" -czf "$work/bad.tar.gz" weights.bin
s3cli mb s3://models >/dev/null
s3cli cp --only-show-errors "$work/model.tar.gz" s3://models/custom/model.tar.gz
s3cli cp --only-show-errors "$work/bad.tar.gz" s3://models/bad/model.tar.gz
s3cli cp --only-show-errors --recursive "$work/model/my-model" s3://models/custom-folder/
echo "moto S3 at $s3 with a model archive, a bad archive and a model folder"

# 2. capstan serve with the S3 endpoint.
serve_args=(--s3-endpoint "$s3")
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"

# 3. Bad input is refused at CreateModel, naming the field; nothing stored.
expect_error ValidationException "PrimaryContainer.ModelDataUrl: s3://models/bad/model.tar.gz has no config.json" \
  sm create-model --model-name bad --primary-container Image=capstan/sim,ModelDataUrl=s3://models/bad/model.tar.gz
expect_error ValidationException "Could not find model" sm describe-model --model-name bad
expect_error ValidationException "Could not find model data at s3://models/nope/model.tar.gz" \
  sm create-model --model-name nope --primary-container Image=capstan/sim,ModelDataUrl=s3://models/nope/model.tar.gz
echo "bad archives refused"

# 4. The archive: create-model, endpoint, invoke.
sm create-model --model-name custom \
  --primary-container Image=capstan/sim,ModelDataUrl=s3://models/custom/model.tar.gz >/dev/null
[ "$(sm describe-model --model-name custom --query PrimaryContainer.ModelDataUrl --output text)" = s3://models/custom/model.tar.gz ] ||
  fail "describe-model does not echo ModelDataUrl"
sm create-endpoint-config --endpoint-config-name custom \
  --production-variants VariantName=AllTraffic,ModelName=custom,InstanceType=ml.g5.xlarge,InitialInstanceCount=1 >/dev/null
sm create-endpoint --endpoint-name custom --endpoint-config-name custom >/dev/null
wait_status custom InService
echo '{"inputs":"Hello","parameters":{"max_new_tokens":8}}' >"$work/req.json"
smr invoke-endpoint --endpoint-name custom --content-type application/json --body "fileb://$work/req.json" "$work/out.json" >/dev/null
grep -q generated_text "$work/out.json" || fail "invoke answered: $(cat "$work/out.json")"
log=$(ls "$work"/data/replicas/custom.AllTraffic.*.log | head -1)
grep -q 'engine sim ready.* layers=30 ' "$log" || fail "the engine does not run the archive's 30 layers: $(grep 'engine sim ready' "$log")"
echo "custom model from model.tar.gz InService; engine: $(grep -o 'model=[^ ]* layers=[0-9]* params=[0-9]*' "$log")"

# 5. The same folder as an uncompressed prefix (ModelDataSource).
sm create-model --model-name custom-folder --primary-container \
  'Image=capstan/sim,ModelDataSource={S3DataSource={S3Uri=s3://models/custom-folder/,S3DataType=S3Prefix,CompressionType=None}}' >/dev/null
expect_error ValidationException "must end with" sm create-model --model-name custom-folder-2 --primary-container \
  'Image=capstan/sim,ModelDataSource={S3DataSource={S3Uri=s3://models/custom-folder,S3DataType=S3Prefix,CompressionType=None}}'

# 6. A JumpStart id names a catalog model.
sm create-model --model-name js --primary-container 'Image=capstan/sim,Environment={SM_MODEL_ID=meta-textgeneration-llama-3-2-1b-instruct}' >/dev/null
sm create-endpoint-config --endpoint-config-name js \
  --production-variants VariantName=AllTraffic,ModelName=js,InstanceType=ml.g5.xlarge,InitialInstanceCount=1 >/dev/null
sm create-endpoint --endpoint-name js --endpoint-config-name js >/dev/null
wait_status js InService
smr invoke-endpoint --endpoint-name js --content-type application/json --body "fileb://$work/req.json" "$work/out2.json" >/dev/null
grep -q 'engine sim ready.* model=llama-3.2-1b .*layers=16 ' "$work"/data/replicas/js.AllTraffic.*.log || fail "JumpStart id did not run llama-3.2-1b"
echo "JumpStart id meta-textgeneration-llama-3-2-1b-instruct runs llama-3.2-1b"

for e in custom js; do sm delete-endpoint --endpoint-name "$e"; done
echo "PASS s3_model_flow"
