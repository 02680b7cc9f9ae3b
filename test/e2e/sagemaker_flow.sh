#!/usr/bin/env bash
# End-to-end flow with the real aws CLI against `capstan serve`: create model →
# endpoint config → endpoint, wait InService, invoke, update to a second config,
# change weights and capacity, delete, wait deleted, plus the error cases the
# CLI and its waiters depend on. Needs CAPSTAN_BIN (path to the capstan binary).
set -euo pipefail

# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

acct=000000000000
sm create-model --model-name my-model \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' \
  --execution-role-arn "arn:aws:iam::$acct:role/capstan" >/dev/null
sm create-endpoint-config --endpoint-config-name cfg-a --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"my-model","InitialInstanceCount":1,"InstanceType":"ml.g5.xlarge","InitialVariantWeight":1.0}]' >/dev/null
arn=$(sm create-endpoint --endpoint-name My-Endpoint --endpoint-config-name cfg-a --query EndpointArn --output text)
[ "$arn" = "arn:aws:sagemaker:us-east-1:$acct:endpoint/my-endpoint" ] || fail "endpoint arn $arn"
wait_status My-Endpoint InService
sm wait endpoint-in-service --endpoint-name My-Endpoint
echo "InService"

echo '{"inputs":"What is a GPU?","parameters":{"max_new_tokens":8}}' >"$work/in.json"
smr invoke-endpoint --endpoint-name My-Endpoint --body "fileb://$work/in.json" \
  --content-type application/json "$work/out.json" >"$work/invoke.json"
[ -s "$work/out.json" ] || fail "empty invocation output"
grep -q AllTraffic "$work/invoke.json" || fail "no InvokedProductionVariant: $(cat "$work/invoke.json")"
echo "invoked: $(head -c 200 "$work/out.json")"

# Blue/green update to a second config.
sm create-endpoint-config --endpoint-config-name cfg-b --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"my-model","InitialInstanceCount":2,"InstanceType":"ml.g5.2xlarge"}]' >/dev/null
sm update-endpoint --endpoint-name My-Endpoint --endpoint-config-name cfg-b >/dev/null
wait_status My-Endpoint InService
[ "$(sm describe-endpoint --endpoint-name My-Endpoint --query EndpointConfigName --output text)" = cfg-b ] || fail "config not cfg-b"
smr invoke-endpoint --endpoint-name My-Endpoint --body "fileb://$work/in.json" --content-type application/json "$work/out2.json" >/dev/null
echo "updated to cfg-b"

sm update-endpoint-weights-and-capacities --endpoint-name My-Endpoint \
  --desired-weights-and-capacities VariantName=AllTraffic,DesiredWeight=0.5,DesiredInstanceCount=3 >/dev/null
wait_status My-Endpoint InService
n=$(sm describe-endpoint --endpoint-name My-Endpoint --query 'ProductionVariants[0].CurrentInstanceCount' --output text)
[ "$n" = 3 ] || fail "CurrentInstanceCount $n, want 3"
echo "scaled to 3"

[ "$(sm list-endpoints --status-equals InService --query 'length(Endpoints)' --output text)" = 1 ] || fail "list-endpoints"

# Error cases the CLI and its waiters rely on.
expect_error ValidationException "Could not find endpoint \"arn:aws:sagemaker:us-east-1:$acct:endpoint/nope\"." \
  sm describe-endpoint --endpoint-name nope
expect_error ValidationException "Cannot create already existing endpoint" \
  sm create-endpoint --endpoint-name My-Endpoint --endpoint-config-name cfg-a
expect_error ValidationException "Could not find endpoint configuration" \
  sm create-endpoint --endpoint-name other --endpoint-config-name missing
expect_error ValidationException "failed to satisfy constraint: Member must satisfy regular expression pattern" \
  sm create-endpoint --endpoint-name bad_name --endpoint-config-name cfg-a
expect_error ValidationException "at 'productionVariants.1.member.instanceType' failed to satisfy constraint" \
  sm create-endpoint-config --endpoint-config-name cfg-x --production-variants \
  '[{"VariantName":"v","ModelName":"my-model","InitialInstanceCount":1,"InstanceType":"ml.zz.huge"}]'
sm create-endpoint-config --endpoint-config-name cfg-huge --production-variants \
  '[{"VariantName":"v","ModelName":"my-model","InitialInstanceCount":50,"InstanceType":"ml.p5.48xlarge"}]' >/dev/null
expect_error ResourceLimitExceeded "ml.p5.48xlarge" \
  sm create-endpoint --endpoint-name huge --endpoint-config-name cfg-huge
expect_error ValidationError "Endpoint nope of account $acct not found" \
  smr invoke-endpoint --endpoint-name nope --body "fileb://$work/in.json" --content-type application/json "$work/x.json"
echo "error cases ok"

# The capstan:routing-strategy tag (docs/gateway.md): a cache-aware policy on
# a SageMaker endpoint config; an unknown strategy is refused naming the tag.
sm create-endpoint-config --endpoint-config-name cfg \
  --tags Key=capstan:routing-strategy,Value=kvaware \
  --production-variants '[{"VariantName":"AllTraffic","ModelName":"my-model","InitialInstanceCount":4,"InstanceType":"ml.g5.xlarge"}]' >/dev/null
expect_error ValidationException "capstan:routing-strategy" \
  sm create-endpoint-config --endpoint-config-name cfg-bad --tags Key=capstan:routing-strategy,Value=fastest \
  --production-variants '[{"VariantName":"AllTraffic","ModelName":"my-model","InitialInstanceCount":1,"InstanceType":"ml.g5.xlarge"}]'
sm delete-endpoint-config --endpoint-config-name cfg
echo "routing strategy tag ok"

# Dev clock.
"$CAPSTAN_BIN" clock advance 168h --server "$url" | grep "offset 168h" >/dev/null || fail "clock advance"

sm delete-endpoint --endpoint-name My-Endpoint
for _ in $(seq 1 120); do
  status My-Endpoint >/dev/null 2>&1 || break
  sleep 0.25
done
sm wait endpoint-deleted --endpoint-name My-Endpoint
sm delete-endpoint-config --endpoint-config-name cfg-a
sm delete-model --model-name my-model
echo "deleted"
echo "sagemaker_flow: PASS"
