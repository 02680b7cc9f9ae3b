#!/usr/bin/env bash
# Tags with the real aws CLI against `capstan serve`: create-time tags are
# listed; add-tags overwrites and appends; delete-tags removes; the limits
# and a missing resource are ValidationExceptions that change nothing; a
# deleted resource's tags go with it and do not come back when the name is
# used again. Needs CAPSTAN_BIN (path to the capstan binary).
set -euo pipefail

# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

acct=000000000000
tags() { sm list-tags --resource-arn "$1" --query 'Tags[].[Key,Value]' --output text | tr '\t\n' '= ' | sed 's/ $//'; }
want_tags() {
  local got
  got=$(tags "$1")
  [ "$got" = "$2" ] || fail "tags of $1: '$got', want '$2'"
}

model_arn=$(sm create-model --model-name tagged-model \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' \
  --tags Key=team,Value=search --query ModelArn --output text)
sm create-endpoint-config --endpoint-config-name tagged-cfg --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"tagged-model","InitialInstanceCount":1,"InstanceType":"ml.g5.xlarge"}]' >/dev/null
ep_arn=$(sm create-endpoint --endpoint-name Tagged-Endpoint --endpoint-config-name tagged-cfg \
  --tags Key=team,Value=search Key=stage,Value=dev --query EndpointArn --output text)
[ "$ep_arn" = "arn:aws:sagemaker:us-east-1:$acct:endpoint/tagged-endpoint" ] || fail "endpoint arn $ep_arn"

want_tags "$model_arn" "team=search"
want_tags "$ep_arn" "team=search stage=dev"

sm add-tags --resource-arn "$ep_arn" --tags Key=stage,Value=prod Key=owner,Value=ml-platform >/dev/null
want_tags "$ep_arn" "team=search stage=prod owner=ml-platform"
sm delete-tags --resource-arn "$ep_arn" --tag-keys team not-there >/dev/null
want_tags "$ep_arn" "stage=prod owner=ml-platform"
sm add-tags --resource-arn "$model_arn" --tags Key=cost-center,Value=42 >/dev/null
want_tags "$model_arn" "team=search cost-center=42"
echo "add-tags / list-tags / delete-tags"

# Bad input: a ValidationException naming the member; the tags stay as they were.
many=()
for i in $(seq 1 51); do many+=("Key=k$i,Value=v"); done
expect_error ValidationException "Value '[51 items]' at 'tags' failed to satisfy constraint" \
  sm add-tags --resource-arn "$ep_arn" --tags "${many[@]}"
expect_error ValidationException "Value 'aws:owner' at 'tags.1.member.key'" \
  sm add-tags --resource-arn "$ep_arn" --tags Key=aws:owner,Value=x
long=$(printf 'k%.0s' $(seq 1 129))
expect_error ValidationException "at 'tags.1.member.key' failed to satisfy constraint: Member must have length between 1 and 128" \
  sm add-tags --resource-arn "$model_arn" --tags "Key=$long,Value=x"
expect_error ValidationException "Resource arn:aws:sagemaker:us-east-1:$acct:model/nope does not exist." \
  sm list-tags --resource-arn "arn:aws:sagemaker:us-east-1:$acct:model/nope"
expect_error ValidationException "at 'resourceArn' failed to satisfy constraint" \
  sm list-tags --resource-arn tagged-model
expect_error ValidationException "Value '[51 items]' at 'tags'" \
  sm create-model --model-name too-many-tags --primary-container '{"Image":"capstan/sim"}' --tags "${many[@]}"
expect_error ValidationException "Could not find model" sm describe-model --model-name too-many-tags
want_tags "$ep_arn" "stage=prod owner=ml-platform"
want_tags "$model_arn" "team=search cost-center=42"
echo "bad input refused, nothing changed"

# The tags go with the resource.
wait_status Tagged-Endpoint InService
sm delete-endpoint --endpoint-name Tagged-Endpoint
for _ in $(seq 1 120); do
  sm describe-endpoint --endpoint-name Tagged-Endpoint >/dev/null 2>&1 || break
  sleep 0.25
done
expect_error ValidationException "Resource $ep_arn does not exist." sm list-tags --resource-arn "$ep_arn"
sm delete-model --model-name tagged-model
expect_error ValidationException "does not exist" sm add-tags --resource-arn "$model_arn" --tags Key=a,Value=b
sm create-model --model-name tagged-model \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' >/dev/null
want_tags "$model_arn" ""
echo "deleted with the resource"

echo "tags_flow: PASS"
